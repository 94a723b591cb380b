"""The recipe table scripts/make_checkpoints.py trains (hero_core.train.recipes) and the Makefile's two lanes: every
run is reached, after the run it continues."""

import re
from pathlib import Path

from hero_core.train.recipes import RUNS

ROOT = Path(__file__).resolve().parents[1]


def _lanes() -> dict[str, list[str]]:
    text = (ROOT / "Makefile").read_text()
    return {m.group(1): m.group(2).split() for m in re.finditer(r"^(LANE_[AB]) \?= (.+)$", text, re.M)}


def test_each_run_is_in_one_lane_after_the_run_it_continues_from():
    runs = RUNS
    lanes = _lanes()
    assert set(lanes) == {"LANE_A", "LANE_B"}
    listed = [name for lane in lanes.values() for name in lane]
    assert sorted(listed) == sorted(runs)  # every run once: none missing, none twice
    for lane in lanes.values():
        for i, name in enumerate(lane):
            start = runs[name].start
            if start is not None:  # a continuation: same lane, earlier, same router variant
                assert start in lane[:i], f"{name} continues from {start}, which its lane does not run before it"
                assert runs[start].variant == runs[name].variant, name


def test_the_ablations_repeat_hero_10s_stages():
    runs = RUNS
    for ablation in ("no_memread", "no_aux", "no_pos"):
        for stage in ("-10-s1", "-10"):
            hero, other = runs[f"hero{stage}"], runs[f"{ablation}{stage}"]
            assert (other.target_skip, other.steps, other.budget_scope, other.lr) == \
                   (hero.target_skip, hero.steps, hero.budget_scope, hero.lr), f"{ablation}{stage}"


def test_the_r2_twin_differs_from_hero_10_r2_in_the_memory_read_only():
    runs = RUNS
    for stage in ("-10-r2-s1", "-10-r2", "-10-r3"):
        hero, twin = runs[f"hero{stage}"], runs[f"no_memread{stage}"]
        assert (hero.variant, twin.variant) == ("hero", "no_memread")
        assert (twin.target_skip, twin.steps, twin.budget_scope, twin.lr, twin.levers) == \
               (hero.target_skip, hero.steps, hero.budget_scope, hero.lr, hero.levers), stage
        # and from hero-10 in the memory levers alone
        base = runs[f"hero{stage.replace('-r2', '').replace('-r3', '')}"]
        assert (hero.target_skip, hero.budget_scope, hero.lr) == (base.target_skip, base.budget_scope, base.lr)
        assert hero.steps <= base.steps  # the second stage is shorter (R2_STAGE_TWO): never more training
        assert dict(hero.levers)["memory_kernel"] == "softmax"


def test_r3_differs_from_hero_10_r2_in_the_answer_weight_only():
    runs = RUNS
    r2, r3 = runs["hero-10-r2"], runs["hero-10-r3"]
    assert (r3.variant, r3.target_skip, r3.steps, r3.start, r3.budget_scope, r3.lr) == \
           (r2.variant, r2.target_skip, r2.steps, r2.start, r2.budget_scope, r2.lr)
    assert dict(r3.levers) == {**dict(r2.levers), "answer_weight": 3.0}


def test_r6_differs_from_its_control_in_the_short_answers_alone():
    r6, control = RUNS["hero-10-r6"], RUNS["hero-10-r6c"]
    assert (r6.variant, r6.target_skip, r6.steps, r6.start, r6.budget_scope, r6.lr) == \
           (control.variant, control.target_skip, control.steps, control.start, control.budget_scope, control.lr)
    mix = dict(r6.levers).pop("data_mix")
    assert {k: v for k, v in dict(r6.levers).items() if k != "data_mix"} == dict(control.levers)
    assert "data_mix" not in dict(control.levers) and mix["qa"] > 0
    assert {k: v for k, v in mix.items() if k != "qa"} == {"chat": 2.0, "code": 1.5, "reasoning": 1.0}
