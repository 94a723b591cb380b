"""The words the Memory and Learn pages use for the depth memory: chosen by stated rules on the data, so a
near-uniform read is never called "mostly" and a one-hot read is named, whichever checkpoint is loaded."""

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from hero_core.eval.frontier import measured as measured_results
from hero_core.viz.memory_words import (
    NEAR_UNIFORM,
    RHO_STILL,
    describe_forgetting,
    describe_memory,
    describe_read,
    forgetting_change,
    is_mostly,
    is_near_uniform,
    mostly_weight,
    read_of,
    summarise,
    tour_plan,
)

ROOT = Path(__file__).resolve().parents[1]
LAYERS = list(range(3, 33))  # names of up to 30 earlier blocks: block i is L(i + 3)
PROMPT = "The cat sat on the mat. Then the cat saw a bird, and the bird flew away."


# -- one read -------------------------------------------------------------------------------------------
def test_a_uniform_read_is_close_to_uniform_and_not_mostly():
    read = read_of(np.full(12, 1 / 12))
    assert read.normalised_entropy == pytest.approx(1.0)
    assert is_near_uniform(read) and not is_mostly(read)
    words = describe_read(read, LAYERS)
    assert "close to uniform" in words and "mostly" not in words


def test_a_one_hot_read_names_its_block():
    row = np.zeros(12)
    row[7] = 1.0
    read = read_of(row)
    assert read.top_block == 7 and read.ratio == pytest.approx(12.0) and read.normalised_entropy == pytest.approx(0)
    words = describe_read(read, LAYERS)
    assert "mostly on L10" in words and "12.00×" in words and "close to uniform" not in words


def test_a_read_at_1_2x_uniform_is_not_mostly():
    """The old Learn page said "reads mostly from L11 (8 %, 1.2× uniform)": a read like that is not "mostly"."""
    n = 12
    row = np.full(n, (1 - 1.2 / n) / (n - 1))
    row[3] = 1.2 / n
    read = read_of(row)
    assert read.ratio == pytest.approx(1.2)
    assert not is_mostly(read)
    assert "mostly" not in describe_read(read, LAYERS).replace("“mostly” needs", "")


@pytest.mark.parametrize("n, top, mostly", [
    (29, 0.2, False),  # 5.8x uniform but only 20 % of the read
    (29, 0.3, True),
    (3, 0.6, False),  # 60 % of the read but 1.8x uniform
    (3, 0.7, True),
    (2, 0.7, False),  # with two blocks 2x uniform is all of it: 75 % suffices
    (2, 0.8, True),
])
def test_mostly_needs_both_thresholds(n, top, mostly):
    row = np.full(n, (1 - top) / (n - 1))
    row[0] = top
    assert is_mostly(read_of(row)) is mostly
    assert mostly_weight(n) >= 0.3


def test_reads_with_no_choice_or_no_memory():
    assert "weight 1" in describe_read(read_of([0.99999]), LAYERS)
    assert "empty" in describe_read(read_of([]), LAYERS)
    assert "reads no depth memory" in describe_read(read_of(np.zeros(5)), LAYERS)
    spread = read_of([0.6, 0.3, 0.1])  # between the rules: normalised entropy 0.82, 1.8x uniform
    assert not is_near_uniform(spread) and not is_mostly(spread)
    assert "no single block dominates" in describe_read(spread, LAYERS)


# -- a token's reads and the prompt's ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def trace(tiny):
    return tiny.trace(PROMPT)


def _with_rows(trace, fill):
    """A copy of ``trace`` whose read at every block j of every token is ``fill(j)`` (j earlier blocks)."""
    out = copy.deepcopy(trace)
    for j in range(1, out.n_routed):
        out.memory_attention[:, j, :j] = fill(j)
    return out


def test_a_uniform_memory_is_described_as_uniform(trace):
    flat = _with_rows(trace, lambda j: np.full(j, 1 / j))
    summary = summarise(flat, 3)
    assert summary.mean_entropy == pytest.approx(1.0) and summary.near_uniform_share == 1.0
    assert summary.mostly_share == 0
    words = describe_memory(flat, 3)
    assert "close to uniform" in words and "little information" in words and "mostly" not in words
    assert "close to uniform" in describe_memory(flat)


def test_a_one_hot_memory_names_the_block(trace):
    def previous(j):
        row = np.zeros(j)
        row[-1] = 1.0  # every read takes the block just before it
        return row

    sharp = _with_rows(trace, previous)
    summary = summarise(sharp)
    assert summary.mean_entropy == pytest.approx(0.0, abs=1e-9) and summary.mostly_share == 1.0
    words = describe_memory(sharp, 2)
    assert "selective" in words and "draws mostly on" in words
    t, j = summarise(sharp, 2).most_selective
    assert f"L{sharp.routed_layers[j - 1]} (100.0%" in words


def test_a_uniform_read_run_says_so(trace):
    uniform = copy.deepcopy(trace)
    uniform.memory_read = "uniform"
    assert "by construction" in describe_memory(uniform, 0)


def test_a_variant_without_memory_reads_nothing(tiny):
    local = tiny.trace(PROMPT, variant="no_history")
    assert summarise(local).n_reads == 0
    assert "no read with a choice" in describe_memory(local, 1)


def test_the_summary_matches_the_tiny_trace(trace):
    """On the tiny model's fresh router the reads are near uniform: the words must say so, with its numbers."""
    summary = summarise(trace)
    assert summary.mean_entropy >= NEAR_UNIFORM
    assert f"{summary.mean_entropy:.3f}" in describe_memory(trace)


# -- forgetting factors --------------------------------------------------------------------------------------
def test_rho_that_did_not_move():
    words = describe_forgetting([0.98, 0.9801, 0.9799], 0.98, [3, 4, 5])
    assert "did not move" in words and "0.98" in words
    assert forgetting_change([0.98, 0.98 + RHO_STILL / 2], 0.98).moved is False


def test_rho_that_moved():
    words = describe_forgetting([0.98, 0.93, 0.99], 0.98, [3, 4, 5])
    assert "moved at most 0.050 from its initial 0.98" in words and "L4" in words
    assert "did not move" not in words


def test_rho_with_unknown_initial_value():
    words = describe_forgetting([0.98, 0.97], None, [3, 4])
    assert "unknown" in words and "moved at most" not in words
    assert forgetting_change([0.98], None).moved is None


# -- the Learn tour's plan -------------------------------------------------------------------------------------
def test_tour_on_a_hero_checkpoint_runs_every_lesson():
    plan = tour_plan("hero", "no_aux", "hero-10")
    assert plan.variant == "no_aux" and plan.memory and plan.history and plan.variant_note is None


def test_tour_on_a_local_checkpoint_leaves_out_memory_and_history():
    plan = tour_plan("no_history", "no_history", "local-10")
    assert plan.variant == "no_history"
    assert not plan.memory and not plan.history
    assert "flip no decision by construction" in plan.history_note


def test_tour_on_a_no_memread_checkpoint_keeps_history_only():
    plan = tour_plan("no_memread", "hero", "no_memread-10")
    assert plan.variant == "no_memread" and plan.history and not plan.memory
    assert "no_memread-10" in plan.variant_note and "initialisation" in plan.memory_note


def test_tour_with_a_variant_without_memory_in_the_sidebar():
    plan = tour_plan("hero", "dense", "hero-25")
    assert plan.variant == "hero" and "dense" in plan.variant_note and plan.memory and plan.history


# -- the measured result quoted beside the paper -----------------------------------------------------------
def _point(knob, ratio, low, high, skip):
    cell = {"param_skip": skip, "perplexity_ratio": ratio, "ratio_low": low, "ratio_high": high,
            "top1_agreement": 0.9}
    return {"knob": knob, "d": cell}


def test_history_rows_and_words_from_a_frontier():
    frontier = {"backbone": "B", "limit": 7, "domains": ["d"], "curves": {
        "hero-10": {"variant": "hero", "tau": 0.5, "points": [_point(0.5, 1.0, 0.98, 1.02, 0.1)]},
        "local-10": {"variant": "no_history", "tau": 0.5,
                     "points": [_point(0.4, 1.1, 1.05, 1.15, 0.05), _point(0.6, 1.3, 1.25, 1.35, 0.15)]},
        "hero-10-s1": {"variant": "hero", "tau": 0.5, "points": [_point(0.5, 1.0, 0.98, 1.02, 0.1)]},
        "local-10-s1": {"variant": "no_history", "tau": 0.5, "points": [_point(0.5, 1.0, 0.9, 1.1, 0.1)]}}}
    rows = measured_results.history_rows(frontier)
    assert [(r["hero"], r["local"]) for r in rows] == [("hero-10", "local-10")]  # final stages only
    assert rows[0]["verdict"] == "history better"
    words = measured_results.history_words({"backbone": "B", "texts_per_domain": 7, "history_vs_local": rows})
    assert "clearly better (95 % intervals apart) in **1**" in words and "of 1 budget × domain comparisons" in words
    summary = {"history_vs_local": rows}
    assert "On d the router with history was clearly better in **1**" in \
        measured_results.history_in_domains(summary, ("d",))
    assert measured_results.history_in_domains(summary, ("reasoning", "code")) is None  # not measured there
    assert measured_results.verdict({"ratio_low": 1.0, "ratio_high": 1.2}, {"ratio_low": 0.8, "ratio_high": 0.9}) \
        == "history worse"
    assert measured_results.verdict({"ratio_low": 1.0, "ratio_high": 1.2}, {"ratio_low": 1.1, "ratio_high": 1.3}) \
        == "no clear difference"


def test_missing_measurements_are_said_to_be_missing(tmp_path):
    assert measured_results.load(tmp_path / "absent.json") is None
    assert "No measured comparison" in measured_results.history_words(None)
    assert measured_results.memory_entropy_of(None, "hero-10") is None


@pytest.mark.skipif(not (ROOT / "docs" / "results.json").is_file(), reason="docs/results.json is not here")
def test_the_shipped_summary_matches_docs_results():
    """hero_core/checkpoints/measured.json is docs/results.json's summary: regenerate it with
    `python -m hero_core.eval.frontier.measured` (make results does) when the results change."""
    results = json.loads((ROOT / "docs" / "results.json").read_text(encoding="utf-8"))
    shipped = measured_results.load()
    assert shipped is not None, \
        "hero_core/checkpoints/measured.json is missing: run python -m hero_core.eval.frontier.measured"
    assert json.loads(json.dumps(measured_results.summarise(results))) == shipped, \
        "hero_core/checkpoints/measured.json is stale: run python -m hero_core.eval.frontier.measured"


def test_the_summary_follows_the_per_read_rules_on_a_selective_memory():
    """summarise is vectorised; it must agree with Read and is_mostly read by read, on a selective softmax memory."""
    import torch

    from hero_core.method.tiny import tiny_hero
    from hero_core.viz.memory_words import read_at

    hero = tiny_hero(seed=3, memory_kernel="softmax", memory_scale_init=8.0)
    with torch.no_grad():  # large queries: a fresh router's q.k are too small to pick an entry
        hero.router.to_q.weight.mul_(60.0)
    trace = hero.trace(PROMPT)
    for token in (None, 4):
        tokens = range(trace.n_tokens) if token is None else [token]
        reads = {(t, j): read_at(trace, t, j) for t in tokens for j in range(2, trace.n_routed)}
        summary = summarise(trace, token)
        assert summary.n_reads == len(reads)
        assert summary.mean_entropy == pytest.approx(np.mean([r.normalised_entropy for r in reads.values()]))
        assert summary.mostly_share == pytest.approx(np.mean([is_mostly(r) for r in reads.values()]))
        assert summary.largest_ratio == pytest.approx(max(r.ratio for r in reads.values()))
        lowest = min(reads, key=lambda k: reads[k].normalised_entropy)
        assert reads[summary.most_selective].normalised_entropy == pytest.approx(reads[lowest].normalised_entropy)
    summary = summarise(trace)
    assert summary.mostly_share > 0.3 and summary.mean_entropy < NEAR_UNIFORM
    words = describe_memory(trace)
    assert "selective" in words and "draws mostly on" in words and "close to uniform" not in words
