"""Retain with bootstrap intervals (hero_core.eval.suites.retain) and local twins at matched compute
(hero_core.eval.twins)."""

import json

import numpy as np
import pytest
import torch

from hero_core.eval import twins
from hero_core.eval.suites import retain as R
from hero_core.method.tau_search import realised_skip

# Two tasks of 10 examples, paired (the same examples for both methods): dense 0.5 / 0.8, routed 0.5 / 0.4.
DENSE = {"a": [1, 1, 1, 1, 1, 0, 0, 0, 0, 0], "b": [1, 1, 1, 1, 1, 1, 1, 1, 0, 0]}
ROUTED = {"a": [1, 1, 1, 1, 0, 1, 0, 0, 0, 0], "b": [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]}
SUBSET = {"a": DENSE["a"], "b": ROUTED["b"]}  # right only where dense is right: Retain 75, no replicate above 100


def test_retain_of_a_hand_built_table_and_its_intervals():
    fig = R.retain_interval(ROUTED, DENSE)
    assert fig["retain"] == pytest.approx(75.0)  # (0.5 / 0.5 + 0.4 / 0.8) / 2
    assert 0 <= fig["low"] < 75.0 < fig["high"] <= 150  # 10 examples a task: a wide interval, around the point
    # over tasks: the mean of ratios 100 and 50 resampled can only be 50, 75 or 100
    assert (fig["task_low"], fig["task_high"]) == (pytest.approx(50.0), pytest.approx(100.0))
    assert fig["tasks"] == ["a", "b"] and fig["left_out"] == [] and fig["examples"] == {"a": 10, "b": 10}


def test_resampling_is_paired_so_a_copy_of_dense_has_no_spread():
    # unpaired resampling of routed and dense would put most replicates away from 100
    fig = R.retain_interval(DENSE, DENSE)
    assert fig["retain"] == 100.0 and fig["low"] == pytest.approx(100.0) and fig["high"] == pytest.approx(100.0)


def test_more_examples_narrow_the_interval_at_the_same_means():
    small = R.retain_interval(ROUTED, DENSE)
    big = R.retain_interval({t: v * 10 for t, v in ROUTED.items()}, {t: v * 10 for t, v in DENSE.items()})
    assert big["retain"] == pytest.approx(small["retain"])
    assert big["high"] - big["low"] < 0.6 * (small["high"] - small["low"])


def test_tasks_where_dense_scores_zero_are_left_out():
    dense = {**DENSE, "c": [0, 0, 0]}
    fig = R.retain_interval({**ROUTED, "c": [1, 0, 0]}, dense)
    assert fig["retain"] == pytest.approx(75.0) and fig["left_out"] == ["c"] and fig["tasks"] == ["a", "b"]
    none = R.retain_interval({"c": [1, 0, 0]}, {"c": [0, 0, 0]})
    assert none["retain"] is None and none["low"] is None and none["task_low"] is None


def test_unpaired_tables_are_refused():
    with pytest.raises(ValueError, match="same examples"):
        R.retain_interval({"a": [1, 0]}, {"a": [1, 0, 1]})


def test_paired_difference():
    same = R.retain_difference(ROUTED, ROUTED, DENSE)
    assert same["difference"] == 0 and same["low"] == 0 and same["high"] == 0
    # no resample can put SUBSET above dense, so the interval stays at or above 0
    subset = SUBSET
    diff = R.retain_difference(DENSE, subset, DENSE)
    assert diff["difference"] == pytest.approx(25.0) and 0 <= diff["low"] < 25.0 < diff["high"]
    # the same two compared the other way round: the interval mirrors
    back = R.retain_difference(subset, DENSE, DENSE)
    assert (back["low"], back["high"]) == (pytest.approx(-diff["high"]), pytest.approx(-diff["low"]))
    assert R.retain_difference({"c": [1]}, {"c": [1]}, {"c": [0]})["difference"] is None


def _result(methods: dict[str, dict[str, list[int]]], humaneval: dict[str, list[int]] | None = None) -> dict:
    """An evaluate()-shaped result: main-suite tasks with grades (and compute), optionally HumanEval."""
    results = {}
    for name, table in methods.items():
        main = {"tasks": {t: {"accuracy": float(np.mean(g)), "grades": [float(x) for x in g]}
                          for t, g in table.items()},
                "compute": {"tokens": 300, "param_skip": 0.0 if name == "dense" else 0.1}}
        results[name] = {"main": main}
        if humaneval and name in humaneval:
            results[name]["humaneval"] = {"grades": humaneval[name], "n": len(humaneval[name]),
                                          "passed": sum(humaneval[name]),
                                          "compute": {"tokens": 100, "param_skip": 0.0 if name == "dense" else 0.3}}
    return {"results": results}


def test_summary_counts_humaneval_as_a_task_and_weights_skip_by_tokens():
    result = _result({"dense": DENSE, "hero-10": SUBSET, "local-10@hero-10": DENSE},
                     humaneval={"dense": [1, 0], "hero-10": [0, 0], "local-10@hero-10": [1, 0]})
    result["matched"] = {"hero-10": {"method": "local-10@hero-10"}}
    summary = R.retain_summary(result)
    hero = summary["hero-10"]
    assert hero["retain"] == pytest.approx((100 + 50 + 0) / 3) and hero["tasks"] == ["a", "b", "humaneval"]
    assert hero["param_skip"] == pytest.approx((300 * 0.1 + 100 * 0.3) / 400)
    assert hero["vs_twin"]["twin"] == "local-10@hero-10"
    assert hero["vs_twin"]["difference"] == pytest.approx(hero["retain"] - 100.0)
    assert hero["vs_twin"]["high"] < 0  # the twin is dense itself here: every paired replicate favours it
    assert "dense" not in summary and json.loads(json.dumps(summary)) == summary


def test_a_result_without_per_example_scores_says_so():
    result = _result({"dense": DENSE, "hero-10": ROUTED})
    del result["results"]["hero-10"]["main"]["tasks"]["a"]["grades"]
    with pytest.raises(ValueError, match="per-example"):
        R.retain_summary(result)


def test_evaluate_keeps_the_grades_retain_reads(tiny, tmp_path, monkeypatch):
    from hero_core.eval.benchmarks import bigbench
    from hero_core.eval.suites import runner

    root = tmp_path / "tasks" / "fixture_task"
    root.mkdir(parents=True)
    examples = [{"input": f"Is {n} even?", "target_scores": {"Yes": int(n % 2 == 0), "No": int(n % 2)}}
                for n in range(4)]
    (root / "task.json").write_text(json.dumps({"examples": examples}))
    monkeypatch.setattr(bigbench, "tasks_dir", lambda: tmp_path / "tasks")
    tasks_file = tmp_path / "eval_tasks.json"
    tasks_file.write_text(json.dumps({"main": ["fixture_task"], "extended": []}))
    result = runner.evaluate(tiny, ["hero"], ["main"], limit=4, tasks_file=tasks_file, keep_samples=False)
    task = result["results"]["hero"]["main"]["tasks"]["fixture_task"]
    assert len(task["grades"]) == 4 and np.mean(task["grades"]) == pytest.approx(task["accuracy"])
    fig = R.retain_summary(result)["hero"]
    assert fig["retain"] == result["results"]["hero"]["main"]["retain"]  # the suite's own Retain, same number
    assert fig["param_skip"] == pytest.approx(result["results"]["hero"]["main"]["compute"]["param_skip"])


# -- twins ----------------------------------------------------------------------------------------
def test_twin_names_and_headline_selection():
    assert twins.twin_name("hero-10") == "local-10" and twins.twin_name("hero-10-s1") == "local-10-s1"
    assert twins.twin_name("hero-10-r2") == "local-10" and twins.twin_name("no_memread-10-r2") == "local-10"
    assert twins.twin_name("hero-10-r2-s1") == "local-10-s1"
    assert twins.twin_name("hero-10-r3") == "local-10" and twins.twin_name("no_memread-10-r3") == "local-10"
    assert twins.twin_name("local-10") is None and twins.twin_name("measured.json") is None
    bundled = ["hero-25", "local-10-s1", "no_memread-10", "no_memread-10-r2", "hero-10", "local-10", "no_aux-10",
               "hero-10-r2", "hero-10-s1", "hero-40", "local-25"]
    assert twins.headline_checkpoints(bundled) == ["hero-10", "hero-10-r2", "no_memread-10-r2", "local-10",
                                                   "hero-10-s1", "local-10-s1", "hero-25", "local-25", "hero-40"]


def test_counterparts_are_the_twin_and_the_same_recipes_ablations():
    names = ["hero-10", "local-10", "no_memread-10", "no_memread-10-r4", "hero-10-r4", "local-25", "hero-10-s1",
             "local-10-s1"]
    assert twins.counterparts("hero-10", names) == ["local-10", "no_memread-10"]
    assert twins.counterparts("hero-10-r4", names) == ["local-10", "no_memread-10-r4"]
    assert twins.counterparts("hero-10-s1", names) == ["local-10-s1"]
    assert twins.counterparts("local-10", names) == [] and twins.counterparts("tiny-random", names) == []
    assert twins.counterpart("hero-10-r4", "no_aux") == "no_aux-10-r4" and twins.counterpart("x", "local") is None


@pytest.fixture(scope="module")
def twin_pair():
    from hero_core.method.tiny import tiny_hero

    hero = tiny_hero(seed=0)
    twin = tiny_hero(seed=0, variant="no_history")
    hero.checkpoint_name, twin.checkpoint_name = "hero-10", "local-10"
    hero.config.tau = 0.75  # the checkpoint skips more at its own tau than the twin at the same one
    generator = torch.Generator().manual_seed(7)
    blocks = torch.randint(100, len(hero.tokenizer) - 1, (4, 48), generator=generator)
    return hero, twin, blocks


def test_matched_tau_lands_the_twin_on_the_checkpoints_skip(twin_pair):
    hero, twin, blocks = twin_pair
    match = twins.match_twin(hero, twin, blocks)
    target = realised_skip(hero, blocks, "hero", hero.config.tau)
    assert match.target_skip == pytest.approx(target) and match.method == "local-10@hero-10"
    assert match.realised_skip == pytest.approx(realised_skip(twin, blocks, "no_history", match.tau))
    # (the tiny model's FFNs are 3 % of its parameters, so skips are small: tolerances are shares of the range)
    span = realised_skip(twin, blocks, "no_history", 0.95) - realised_skip(twin, blocks, "no_history", 0.05)
    own = realised_skip(twin, blocks, "no_history", 0.5)  # the twin at its own tau
    assert abs(own - target) > 0.1 * span  # unmatched, the twin would sit well off the target ...
    assert abs(match.realised_skip - target) < 0.02 * span  # ... matched, it lands on it
    assert match.tau > 0.6


def test_match_twins_loads_a_missing_twin_and_skips_those_without_one(twin_pair):
    hero, twin, blocks = twin_pair
    loaded = []

    def load(name):
        loaded.append(name)
        return twin

    found = twins.match_twins({"hero-10": hero, "hero-25": hero}, blocks, load, available=["local-10"])
    assert list(found) == ["hero-10"] and loaded == ["local-10"]  # no local-25 bundled: hero-25 gets no twin
    assert found["hero-10"].to_dict()["twin"] == "local-10"


def test_answers_cli_twins(tmp_path, monkeypatch):
    from hero_core.cli import main as cli

    monkeypatch.setenv("HERO_LENS_TINY", "1")
    out = tmp_path / "answers.json"
    args = ["eval", "--answers", "--twins", "--limit", "1", "--answers-tokens", "2", "--quiet", "--out", str(out)]
    assert cli.main(args) == 0
    assert json.loads(out.read_text())["config"]["matched"] == {}  # the tiny model has no local twin bundled
    assert cli.main([*args, "--tau", "0.5"]) == 2  # matching is to each checkpoint's own tau
