"""A whole study on a tiny model: plan, training interrupted and resumed (no finished run trained again), the
measurements and the report built from them; the plan on a tiny model of another family."""

import dataclasses
import json
import random
import shutil

import pytest

from hero_core.cli.study import draw_study_figures, train_study_run
from hero_core.eval.study import StudyError, StudySpec, run_study
from hero_core.eval.study.measures import store_file
from hero_core.eval.study.stats import TextSums
from hero_core.eval.suites.registry import load_eval_tasks
from hero_core.method.tiny import tiny_model_dir

WORDS = "the a memory router layer token skip gate block model text value sum code data chat".split()
# A few steps of small blocks, the guard on every second step: seconds per run on the tiny model
# The tiny model's embeddings outweigh its FFNs: skipping all of them is ~2 % of its parameters
SKIP = 0.01
QUICK = {"data_blocks": 12, "eval_every": 2, "eval_blocks": 2, "save_every": 2, "warm_start": False,
         "gate_warm_start": False}


@pytest.fixture(scope="module")
def study_inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("study")
    rng = random.Random(0)
    lines = [json.dumps({"text": " ".join(rng.choice(WORDS) for _ in range(60)) + f" item {i}."}) for i in range(150)]
    (root / "text.jsonl").write_text("\n".join(lines) + "\n")
    items = [{"question": f"Which word is number {i}?", "choices": ["one", "two", "three"], "answer": i % 3}
             for i in range(6)]
    (root / "tasks.jsonl").write_text("\n".join(json.dumps(x) for x in items) + "\n")
    for task in load_eval_tasks()["main"]:  # a folder of extracted BIG-bench tasks, four examples each
        examples = [{"input": f"{task} question {i}", "target_scores": {"yes": float(i % 2), "no": float(1 - i % 2)}}
                    for i in range(4)]
        (root / "bigbench" / task).mkdir(parents=True)
        (root / "bigbench" / task / "task.json").write_text(json.dumps({"examples": examples}))
    return root, tiny_model_dir("llama", root / "tiny-llama")


def _spec(root, backbone, out, **kw):
    measured = {"skip": SKIP, "tasks": str(root / "tasks.jsonl"), "bigbench": str(root / "bigbench"), "answers": 2}
    return StudySpec(out=str(out), arms=("hero", "no_history"), seeds=2, steps=4, backbone=str(backbone),
                     data=str(root / "text.jsonl"), limit=4, max_tokens=32, batch_size=2, seq_len=32,
                     train_overrides=QUICK, **measured | kw)


def _same(a, b) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_a_study_is_resumed_without_training_a_finished_run_again(study_inputs, tmp_path, monkeypatch):
    monkeypatch.setenv("HERO_LENS_CACHE", str(tmp_path / "cache"))
    root, backbone = study_inputs
    spec, trained = _spec(root, backbone, tmp_path / "study"), []

    def counting(payload):
        trained.append(payload["job"]["name"])
        train_study_run(payload)

    said = []
    first = run_study(spec, train_run=counting, max_runs=1, progress=False, n_boot=200, say=said.append)
    assert trained == ["hero-seed0"] and "to train" in "\n".join(said)  # the plan came first
    assert first["missing"] == ["hero-seed1", "no_history-seed0", "no_history-seed1"] and "summary" not in first
    weights = tmp_path / "study" / "runs" / "hero-seed0" / "hero_adapter.safetensors"
    stamp = weights.stat().st_mtime_ns

    # the rest on two lanes (processes; the lane count is no setting of the study's numbers)
    report = run_study(dataclasses.replace(spec, lanes=2), train_run=train_study_run, progress=False, n_boot=200,
                       say=said.append)
    assert not report["missing"] and weights.stat().st_mtime_ns == stamp  # the finished run was not trained again
    again = run_study(spec, train_run=counting, progress=False, n_boot=200, say=said.append, draw=draw_study_figures)
    # nothing trained, the same numbers (compared as JSON: a measure dense never gets right is NaN, unequal to itself)
    assert trained == ["hero-seed0"] and _same(again["summary"], report["summary"])
    page = (tmp_path / "study" / "study.md").read_text()
    if shutil.which("chromium"):  # the PNG renderer (kaleido) draws in an installed Chromium
        for name, path in again["figures"].items():
            assert (tmp_path / "study" / path).read_bytes()[:4] == b"\x89PNG" and f"]({path})" in page, name
    else:
        assert again["figures_note"] in page

    # the report's numbers are the stored per-run measurements
    store = tmp_path / "study" / "measures"
    for arm, row in report["summary"]["arms"].items():
        for name, value in zip(row["runs"], row["ppl:data"]["per_seed"], strict=True):
            stored = json.loads(store_file(store, name, "ppl").read_text())
            assert value == TextSums.from_json(stored["domains"]["data"]).point()
            assert report["runs"][name]["tau"] == stored["tau"] and report["runs"][name]["arm"] == arm
            assert report["runs"][name]["health"]["final_step"] == 4  # trained under the guard
    assert set(report["summary"]["measures"]) == {"ppl:data", "mc:accuracy", "mc:retained", "bigbench:retain",
                                                  "answers:kept"}
    # answers kept: dense answered each prompt once for the whole study, every run against the same prompts
    kept = report["measurements"]["hero-seed1"]["answers"]["grades"]
    assert len(kept) == len(report["dense_grades"]["answers"]) == 2
    bigbench = report["measurements"]["hero-seed0"]["bigbench"]["grades"]
    assert set(bigbench) == set(load_eval_tasks()["main"]) and all(len(g) == 4 for g in bigbench.values())
    assert set(report["references"]) == {"static", "random", "oracle"}
    assert "hero vs no_history" in report["verdicts"]["hero - no_history"]
    page = (tmp_path / "study" / "study.md").read_text()
    assert all(f"| {name} |" in page for name in report["runs"]) and "BIG-bench: Retain" in page
    assert _same(json.loads((tmp_path / "study" / "study.json").read_text())["summary"], report["summary"])

    with pytest.raises(StudyError, match="another study"):
        run_study(_spec(root, backbone, tmp_path / "study", skip=0.2), train_run=counting, progress=False,
                  say=said.append)


@pytest.mark.parametrize("family", ["gpt2", "qwen3"])
def test_the_plan_on_a_tiny_model_of_another_family(family, tmp_path, study_inputs):
    root, _ = study_inputs
    backbone = tiny_model_dir(family, tmp_path / family, chat_template=family != "gpt2")
    said = []
    spec = StudySpec(out=str(tmp_path / "out"), backbone=str(backbone), data=str(root / "text.jsonl"), steps=10,
                     lanes=2, batch_size=2, seq_len=32, skip=SKIP)
    plan = run_study(spec, plan_only=True, say=said.append)
    assert [r["name"] for r in plan["runs"]] == [f"{a}-seed{s}" for a in spec.arms for s in range(3)]
    assert plan["tokens_per_run"] == 10 * 2 * 32 and plan["step_seconds"] > 0
    # 9 runs on 2 lanes: 5 runs one after another in the busier lane
    assert plan["estimated_hours"] == pytest.approx(5 * 10 * plan["step_seconds"] / 3600)
    # the model by its name (the folder's), then the data the study trains on
    assert said[0].startswith(f"Study on {family} ({root / 'text.jsonl'}): arms hero, no_history, no_memread x 3 "
                              "seed(s), each trained 10 steps to 1% param skip"), said[0]
    assert not (tmp_path / "out").exists()  # a plan writes nothing
    with pytest.raises(StudyError, match="out of reach"):
        run_study(StudySpec(out=str(tmp_path / "out"), backbone=str(backbone), skip=0.5), plan_only=True,
                  say=said.append)


def test_the_command_prints_the_plan_and_refuses_an_unknown_arm(study_inputs, tmp_path, capsys):
    from hero_core.cli.main import main

    root, backbone = study_inputs
    args = ["study", "--backbone", str(backbone), "--data", str(root / "text.jsonl"), "--skip", str(SKIP),
            "--out", str(tmp_path / "out"), "--plan"]
    assert main([*args, "--arms", "hero,no_memread", "--seeds", "2"]) == 0
    out = capsys.readouterr().out
    assert "arms hero, no_memread x 2 seed(s), each trained 750 steps" in out  # the first-stage recipe's steps
    assert out.count("to train") >= 4 and not (tmp_path / "out").exists()
    assert main([*args, "--arms", "hero,dense"]) == 2
    assert "unknown arm(s) ['dense']" in capsys.readouterr().err


def test_ranks_share_the_runs_and_one_measures(study_inputs, tmp_path, monkeypatch):
    """Under several processes (accelerate launch, one per GPU) rank r trains the unfinished runs r, r + W, …; every
    rank waits at the barrier, then rank 0 alone measures, with every run trained and none trained again."""
    monkeypatch.setenv("HERO_LENS_CACHE", str(tmp_path / "cache"))
    root, backbone = study_inputs
    spec = _spec(root, backbone, tmp_path / "study", tasks=None, bigbench=None, answers=0, references=False)
    trained, waited = {0: [], 1: []}, []

    def on(rank):
        def counting(payload):
            trained[rank].append(payload["job"]["name"])
            train_study_run(payload)
        return counting

    # one process after the other here: rank 1 reaches the barrier first, so rank 0 finds every run trained there
    plan = run_study(spec, train_run=on(1), rank=1, world_size=2, wait=lambda: waited.append(1), progress=False,
                     say=lambda line: None)
    assert "runs" in plan and "summary" not in plan and waited == [1]  # rank 1 trains; it does not measure
    report = run_study(spec, train_run=on(0), rank=0, world_size=2, wait=lambda: waited.append(0), progress=False,
                       n_boot=100, say=lambda line: None)
    assert waited == [1, 0] and "summary" in report  # rank 0 measures after the barrier
    assert trained == {0: ["hero-seed0", "no_history-seed0"], 1: ["hero-seed1", "no_history-seed1"]}
    report = run_study(spec, train_run=on(0), progress=False, n_boot=100, say=lambda line: None)
    assert not report["missing"] and len(trained[0]) == 2  # nothing trained again
