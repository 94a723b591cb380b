"""The shared functions behind concepts that each exist once: the KL of a routed run from dense
(hero_core.core.metrics.kl_divergence)."""

import math

import pytest
import torch

from hero_core.core.metrics import kl_divergence, log_probs


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
