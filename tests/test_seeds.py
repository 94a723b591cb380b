"""Across-seed comparison: the spread over seeds, the hierarchical bootstrap of an arm difference, the page."""

import numpy as np
import pytest

from hero_core.eval.seeds import (
    TaskScores,
    TextSums,
    answer_sentence,
    arm_spread,
    hierarchical_difference,
    render_markdown,
    summarise,
)


def _run(shift: float, n_texts: int = 40, seed: int = 0, noise: float = 0.05) -> TextSums:
    """Texts of 100 predictions whose routed NLL sits ``shift`` nats per token above dense (plus text noise)."""
    rng = np.random.default_rng(seed)
    dense = rng.uniform(150, 250, n_texts)
    return TextSums(dense + 100 * (shift + noise * rng.standard_normal(n_texts)), dense, np.full(n_texts, 100.0))


def test_the_spread_lists_every_seed_and_its_mean():
    runs = [_run(0.10, seed=1), _run(0.20, seed=2), _run(0.15, seed=3)]
    spread = arm_spread(runs)
    assert spread["seeds"] == 3 and len(spread["per_seed"]) == 3
    assert spread["per_seed"][0] == pytest.approx(runs[0].point())
    assert runs[0].point() == pytest.approx(np.exp((runs[0].nll - runs[0].nll_dense).sum() / runs[0].n_pred.sum()))
    assert spread["min"] < spread["mean"] < spread["max"] and spread["sd"] > 0


def test_identical_arms_are_not_separable_and_distinct_arms_are():
    same_a = [_run(0.1, seed=s) for s in range(3)]
    same_b = [_run(0.1, seed=10 + s) for s in range(3)]
    assert hierarchical_difference(same_a, same_b, n_boot=800)["verdict"] == "not separable"
    worse = [_run(0.3, seed=20 + s) for s in range(3)]
    diff = hierarchical_difference(same_a, worse, n_boot=800)
    assert diff["verdict"] == "lower" and diff["high"] < 0 < diff["high"] - diff["low"]
    assert diff["low"] <= diff["difference"] <= diff["high"]


def test_seed_to_seed_spread_widens_the_interval_beyond_the_texts_alone():
    # the same per-text noise; in one case the seeds also disagree by 0.1 nats per token
    steady = [_run(0.2, seed=s) for s in range(3)]
    scattered = [_run(0.2 + d, seed=s) for s, d in zip(range(3), (-0.1, 0.0, 0.1))]
    reference = [_run(0.2, seed=30 + s) for s in range(3)]
    narrow = hierarchical_difference(steady, reference, n_boot=800)
    wide = hierarchical_difference(scattered, reference, n_boot=800)
    assert wide["high"] - wide["low"] > 1.5 * (narrow["high"] - narrow["low"])


def _grades(accuracy: float, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {task: (rng.random(100) < accuracy).astype(float) for task in ("a", "b")}


def test_retain_is_resampled_on_the_same_examples_for_routed_and_dense():
    dense = _grades(0.5, 0)
    same = TaskScores(dense, dense)
    assert same.point() == pytest.approx(100.0)
    assert np.allclose(same.resample(np.random.default_rng(0), 50), 100.0)  # paired: every replicate is exact
    worse = TaskScores(_grades(0.3, 1), dense)
    diff = hierarchical_difference([worse] * 3, [same] * 3, n_boot=500)
    assert diff["verdict"] == "lower" and diff["difference"] < -20


def test_the_page_lists_every_seed_and_answers_the_question():
    arms = {"hero": ["h0", "h1", "h2"], "local": ["l0", "l1", "l2"]}
    dense = _grades(0.5, 0)
    units = {}
    for i, name in enumerate(arms["hero"] + arms["local"]):
        shift = 0.1 if name.startswith("h") else 0.3
        units[name] = {"ppl": {"chat": _run(shift, seed=i)}, "retain": TaskScores(_grades(0.5, 10 + i), dense)}
    report = {"date": "2026-12-05", "target_skip": 0.1, "limit": 40, "max_tokens": 192, "retain_limit": 100,
              "domains": ["chat"], "summary": summarise(arms, units, ("chat",), n_boot=500),
              "runs": {n: {"seed": int(n[1]), "tau": 0.5, "param_skip": 0.1} for n in units}}
    page = render_markdown(report)
    for name in units:
        assert f"| {name} |" in page
    sentence = answer_sentence(report)
    assert "HeRo has the lower perplexity on chat" in sentence and "training seeds (HeRo 3, local 3)" in sentence
    assert "over seeds and texts" in sentence
    assert "Retain" in sentence and sentence in page
    assert "without the memory read" not in sentence  # that arm is not measured here: nothing said about it

    arms["no_memread"] = ["n0", "n1"]  # the memory read's arm: as good as HeRo here
    for i, name in enumerate(arms["no_memread"]):
        units[name] = {"ppl": {"chat": _run(0.1, seed=20 + i)}, "retain": TaskScores(_grades(0.5, 30 + i), dense)}
    report["summary"] = summarise(arms, units, ("chat",), n_boot=500)
    sentence = answer_sentence(report)
    assert "Against its twin without the memory read (2 seeds), perplexity does not separate them" in sentence


def test_a_seed_run_is_found_by_its_recipe_name():
    from hero_core.eval.seeds import runs_named

    known = ["hero-10-r2-s1", "seeds/hero-10-r2-s1-seed1"]
    assert runs_named(["hero-10-r2-s1-seed1", "hero-10-r2-s1"], known) == ["seeds/hero-10-r2-s1-seed1",
                                                                           "hero-10-r2-s1"]
    assert runs_named(["seeds/hero-10-r2-s1-seed1", "/some/dir"], known) == ["seeds/hero-10-r2-s1-seed1", "/some/dir"]
