"""The shared functions behind concepts that each exist once: the KL of a routed run from dense
(hero_core.measures.metrics.kl_divergence), a perplexity ratio written with its interval (hero_core.words.ratio_text),
the words for the references (hero_core.words.reference_labels) and the frontier figure
(hero_core.viz.frontier_figure)."""

import json
import math
from pathlib import Path

import pytest
import torch

from hero_core.measures.metrics import kl_divergence, log_probs
from hero_core.viz.frontier_figure import DOCS_TOP, REFERENCE_STYLE, bundled_frontier_chart
from hero_core.words.ratio_text import interval_text, ratio_text
from hero_core.words.reference_labels import PAPER_BUDGETS, PAPER_BUDGETS_LABEL, REFERENCE_LABELS, reference_run_label

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results.json"


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


# -- the references' words and the frontier figure -------------------------------------------------------------
def _frontier() -> dict:
    return json.loads(RESULTS.read_text())["frontier"]


def test_every_reference_the_frontier_draws_has_its_label_and_its_style():
    fig = bundled_frontier_chart(_frontier())
    references = {trace.legendgroup for trace in fig.data} & set(REFERENCE_STYLE)
    assert references == set(REFERENCE_STYLE) == set(REFERENCE_LABELS)  # the shipped results hold all four
    for trace in fig.data:
        if trace.legendgroup in REFERENCE_LABELS:
            assert trace.name == REFERENCE_LABELS[trace.legendgroup]
        else:  # a router: its own name, never a reference's words
            assert trace.name == trace.legendgroup and trace.name not in REFERENCE_LABELS.values()


def test_the_docs_frontier_marks_the_papers_budgets_and_cuts_the_ratio_axis():
    frontier = _frontier()
    fig = bundled_frontier_chart(frontier)
    budget_lines = sorted({shape.x0 for shape in fig.layout.shapes if shape.x0 == shape.x1 and shape.x0 != 0})
    assert budget_lines == sorted(PAPER_BUDGETS)
    assert sum(a.text == PAPER_BUDGETS_LABEL for a in fig.layout.annotations) == len(frontier["domains"])
    assert fig.layout.yaxis.range[1] == pytest.approx(math.log10(DOCS_TOP))  # log axis: the range is in log10
    assert max(y for trace in fig.data for y in trace.y) > DOCS_TOP  # the cut is doing something on these numbers


def test_a_reference_run_of_the_answers_suite_is_named_with_the_same_words():
    assert reference_run_label("oracle@hero-10") == f"{REFERENCE_LABELS['oracle']} at hero-10"
    assert reference_run_label("random@hero-10-r4") == "random skipping at hero-10-r4"
    assert reference_run_label("local-10@hero-10") is None and reference_run_label("hero-10") is None
