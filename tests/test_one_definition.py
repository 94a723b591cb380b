"""The shared functions behind concepts that each exist once: the KL of a routed run from dense
(hero_core.core.metrics.kl_divergence) and a perplexity ratio written with its interval (hero_core.core.ratio_text)."""

import math

import pytest
import torch

from hero_core.core.metrics import kl_divergence, log_probs
from hero_core.core.ratio_text import interval_text, ratio_text


# -- KL(dense || routed) ----------------------------------------------------------------------------------------
def test_the_kl_is_the_hand_computed_sum_in_the_dense_to_routed_direction():
    dense = torch.tensor([[0.5, 0.5]]).log()
    routed = torch.tensor([[0.25, 0.75]]).log()
    by_hand = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)  # sum p_dense * log(p_dense / p_routed)
    reverse = 0.25 * math.log(0.25 / 0.5) + 0.75 * math.log(0.75 / 0.5)  # KL(routed || dense), the wrong direction
    kl = kl_divergence(dense, routed)
    assert kl.shape == (1,)
    # fp32 log / exp of numbers of order 1: a few ulp, far below the gap between the two directions (~0.01 nats)
    assert float(kl[0]) == pytest.approx(by_hand, abs=1e-6)
    assert abs(by_hand - reverse) > 1e-2 and float(kl[0]) != pytest.approx(reverse, abs=1e-3)


def test_the_kl_is_zero_for_equal_distributions_and_keeps_every_leading_dimension():
    logits = torch.randn(2, 3, 11, generator=torch.Generator().manual_seed(0))
    same = kl_divergence(log_probs(logits), log_probs(logits))
    assert same.shape == (2, 3)
    torch.testing.assert_close(same, torch.zeros(2, 3), atol=1e-6, rtol=0)  # fp32 rounding of p * (a - a) = 0
    other = log_probs(logits.flip(-1))
    per_row = torch.stack([kl_divergence(log_probs(logits[i]), other[i]) for i in range(2)])
    torch.testing.assert_close(kl_divergence(log_probs(logits), other), per_row)  # a batch = its rows one by one
    assert bool((per_row > 0).all())


# -- a ratio with its interval ----------------------------------------------------------------------------------
def test_a_ratio_is_written_with_its_interval_to_three_decimals():
    cell = {"perplexity_ratio": 0.93049, "ratio_low": 0.9, "ratio_high": 0.95951}
    assert ratio_text(cell) == "0.930 [0.900, 0.960]"
    assert ratio_text(cell, mark="†") == "0.930† [0.900, 0.960]"
    assert interval_text(1.5, 2.25) == "[1.500, 2.250]"


def test_a_comparison_row_names_its_side_by_prefix():
    row = {"hero_perplexity_ratio": 1.2, "hero_ratio_low": 1.1, "hero_ratio_high": 1.3,
           "local_perplexity_ratio": 1.25, "local_ratio_low": 1.2, "local_ratio_high": 1.31}
    assert ratio_text(row, "hero_") == "1.200 [1.100, 1.300]"
    assert ratio_text(row, "local_") == "1.250 [1.200, 1.310]"
    with pytest.raises(KeyError):
        ratio_text(row)  # no unprefixed ratio in a comparison row
