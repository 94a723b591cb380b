"""`python -m hero_core study` checks every argument before it writes or trains anything: a refused start says why
and leaves --out as it was, so the corrected command is then taken; --data is identified by its content.

"Taken" is seen at the first training call (replaced here by one that stops the study there): by then the command
has passed every check and written its spec to the folder."""

import json
import random
import shutil

import pytest

import hero_core.cli.study as study_cli
import hero_core.eval.study.runner as runner
from hero_core.cli.main import main
from hero_core.eval.study.spec import SPEC_FILE
from hero_core.method.tiny import tiny_model_dir

WORDS = "the a memory router layer token skip gate block model text value sum code data chat".split()
TASKS = [{"question": f"Which word is number {i}?", "choices": ["one", "two", "three"], "answer": i % 3}
         for i in range(4)]


LOADED: dict = {}
real_load_backbone = runner._load_backbone


def loaded_once(spec):
    """The study's own loader, once per backbone path in this module (a path that fails to load fails each time)."""
    if spec.backbone not in LOADED:
        LOADED[spec.backbone] = real_load_backbone(spec)
    return LOADED[spec.backbone]


class Started(Exception):
    """The study reached its first training run: every check passed."""


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("checks")
    rng = random.Random(0)
    lines = [json.dumps({"text": " ".join(rng.choice(WORDS) for _ in range(60)) + f" item {i}."}) for i in range(150)]
    (root / "text.jsonl").write_text("\n".join(lines) + "\n")
    (root / "tasks.jsonl").write_text("\n".join(json.dumps(t) for t in TASKS) + "\n")
    return root, tiny_model_dir("llama", root / "tiny-llama")


@pytest.fixture
def study(inputs, tmp_path, monkeypatch, capsys):
    """``study(**options)`` runs the command with the good settings changed by ``options`` (``--steps="0"``); it
    returns ("refused", message) or ("taken", the spec written)."""
    root, backbone = inputs
    monkeypatch.setenv("HERO_LENS_CACHE", str(tmp_path / "cache"))
    started = []

    def stop(payload):
        started.append(payload["job"]["name"])
        raise Started

    monkeypatch.setattr(study_cli, "train_study_run", stop)
    # the plan's timed step (a full-vocabulary backward) is no check; most of a start's time on the tiny model
    monkeypatch.setattr("hero_core.eval.study.runner.measure_step_seconds", lambda hero, spec: 0.01)
    monkeypatch.setattr(runner, "_load_backbone", loaded_once)
    good = {"--backbone": str(backbone), "--data": str(root / "text.jsonl"), "--tasks": str(root / "tasks.jsonl"),
            "--out": str(tmp_path / "s1"), "--arms": "hero,no_history", "--seeds": "1", "--steps": "2",
            "--skip": "0.01", "--limit": "4", "--max-tokens": "32"}

    def run(**options):
        argv = ["study", *[x for k, v in (good | {k.replace("_", "-"): v for k, v in options.items()}).items()
                           for x in (k, v)]]
        capsys.readouterr()
        started.clear()
        try:
            code = main(argv)
        except Started:
            spec = json.loads((tmp_path / "s1" / SPEC_FILE).read_text())
            return "taken", spec
        assert code == 2 and not started
        return "refused", capsys.readouterr().err

    return run


def untouched(folder) -> bool:
    return not folder.exists() or not any(folder.iterdir())


def refused_then_taken(study, tmp_path, bad: dict, said: str, good: dict | None = None) -> dict:
    outcome, message = study(**bad)
    assert outcome == "refused" and said in message, (outcome, message)
    assert untouched(tmp_path / "s1")  # no study_spec.json, nothing else: the folder takes the next command
    outcome, spec = study(**(good or {}))
    assert outcome == "taken", spec
    return spec


def test_a_missing_data_path_is_refused_before_anything_is_written(study, tmp_path):
    spec = refused_then_taken(study, tmp_path, {"__data": str(tmp_path / "missing")}, "does not exist")
    assert spec["data_sha256"]


def test_data_that_holds_no_text_is_refused(study, tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    refused_then_taken(study, tmp_path, {"__data": str(tmp_path / "empty.jsonl")}, "holds no text")


def test_data_with_no_held_out_item_is_refused_before_training(study, tmp_path):
    # every item lands in the training split: the held-out perplexity would fail after all the training
    from hero_core.data.splits import split_of

    items = [f"text number {i}, " + "words " * 80 for i in range(400)]
    (tmp_path / "train_only.jsonl").write_text(
        "\n".join(json.dumps({"text": t}) for t in items if split_of(t) == "train") + "\n")
    refused_then_taken(study, tmp_path, {"__data": str(tmp_path / "train_only.jsonl")}, "no held-out items")


def test_zero_steps_is_refused_not_the_recipes_steps(study, tmp_path):
    spec = refused_then_taken(study, tmp_path, {"__steps": "0"}, "--steps must be a whole number of at least 1, got 0",
                              {"__steps": "3"})
    assert spec["steps"] == 3


def test_zero_held_out_texts_is_refused_before_training(study, tmp_path):
    spec = refused_then_taken(study, tmp_path, {"__limit": "0"}, "--limit must be a whole number of at least 1, got 0",
                              {"__limit": "3"})
    assert spec["limit"] == 3


@pytest.mark.parametrize("lines, said", [
    (['{"question": "Q?", "choices": ["a", "b"]}'], "tasks.jsonl:1: every item needs question, choices and answer"),
    (['{"question": "Q?", "choices": ["a", "b"], "answer": 0}', "not json"], "tasks.jsonl"),
    (['{"question": "Q?", "choices": ["a", "b"], "answer": 5}'], "answer 5 is not one of its 2 choices"),
    ([], "holds no items"),
    (None, "is not a file"),
])
def test_malformed_tasks_are_refused_before_training(study, tmp_path, lines, said):
    bad = tmp_path / "bad" / "tasks.jsonl"
    if lines is not None:
        bad.parent.mkdir()
        bad.write_text("\n".join(lines) + "\n")
    refused_then_taken(study, tmp_path, {"__tasks": str(bad)}, said)


def test_a_backbone_that_does_not_load_is_refused(study, tmp_path):
    (tmp_path / "not-a-model").mkdir()
    refused_then_taken(study, tmp_path, {"__backbone": str(tmp_path / "not-a-model")}, "not-a-model")


def test_data_is_identified_by_its_content_not_its_path(study, inputs, tmp_path):
    root, _ = inputs
    data = tmp_path / "mine.jsonl"
    shutil.copy(root / "text.jsonl", data)
    outcome, first = study(__data=str(data))
    assert outcome == "taken"
    moved = tmp_path / "elsewhere" / "renamed.jsonl"
    moved.parent.mkdir()
    data.rename(moved)
    outcome, spec = study(__data=str(moved))  # the same text under another name continues the study
    assert outcome == "taken" and spec == first
    shutil.copy(root / "text.jsonl", data)
    with data.open("a") as fh:
        fh.write(json.dumps({"text": "one more item, so this is other data"}) + "\n")
    outcome, message = study(__data=str(data))  # other text at the first path: another study
    assert outcome == "refused" and "settings differ: data (the files' content)" in message, message
    assert json.loads((tmp_path / "s1" / SPEC_FILE).read_text()) == first  # the folder's spec is as it was
    assert study(__data=str(moved))[0] == "taken"


def test_a_study_grown_by_seeds_goes_on_and_any_other_change_is_refused(tmp_path):
    """A third training seed landing after a two-seed report: the folder takes it (each run's measures are stored by
    run) and keeps the grown settings; a changed skip, or a run of the old study swapped for another, is refused."""
    from hero_core.eval.study.spec import SPEC_FILE, StudyError, StudySpec, load_or_write_spec

    two = {"a/0": "run-a0", "a/1": "run-a1", "b/0": "run-b0", "b/1": "run-b1"}
    load_or_write_spec(StudySpec(out=str(tmp_path), arms=("a", "b"), seeds=2, existing=two))
    three = {**two, "a/2": "run-a2", "b/2": "run-b2"}
    load_or_write_spec(StudySpec(out=str(tmp_path), arms=("a", "b"), seeds=3, existing=three))
    assert json.loads((tmp_path / SPEC_FILE).read_text())["seeds"] == 3  # the grown study is the folder's now
    with pytest.raises(StudyError, match=r"settings differ: .*skip\)"):
        load_or_write_spec(StudySpec(out=str(tmp_path), arms=("a", "b"), seeds=4, skip=0.2,
                                     existing={**three, "a/3": "x", "b/3": "y"}))
    with pytest.raises(StudyError, match="settings differ"):  # a run it had, replaced
        load_or_write_spec(StudySpec(out=str(tmp_path), arms=("a", "b"), seeds=4,
                                     existing={**three, "a/0": "other", "a/3": "x", "b/3": "y"}))
    with pytest.raises(StudyError, match=r"settings differ: .*seeds"):  # fewer seeds is another study
        load_or_write_spec(StudySpec(out=str(tmp_path), arms=("a", "b"), seeds=2, existing=two))


def test_a_study_grown_by_an_arm_goes_on_and_a_reordered_or_dropped_arm_is_refused(tmp_path):
    """The width study's third arm landing after two arms were reported: the folder takes it with the runs it had;
    arms dropped or put in another order are another study."""
    from hero_core.eval.study.spec import SPEC_FILE, StudyError, StudySpec, load_or_write_spec

    two = {"a/0": "run-a0", "a/1": "run-a1", "b/0": "run-b0", "b/1": "run-b1"}
    load_or_write_spec(StudySpec(out=str(tmp_path), arms=("a", "b"), seeds=2, existing=two))
    with_c = {**two, "c/0": "run-c0", "c/1": "run-c1"}
    load_or_write_spec(StudySpec(out=str(tmp_path), arms=("a", "b", "c"), seeds=2, existing=with_c))
    assert json.loads((tmp_path / SPEC_FILE).read_text())["arms"] == ["a", "b", "c"]
    with pytest.raises(StudyError, match=r"settings differ: .*arms"):  # an arm dropped
        load_or_write_spec(StudySpec(out=str(tmp_path), arms=("a", "c"), seeds=2, existing=with_c))
    with pytest.raises(StudyError, match=r"settings differ: .*arms"):  # the same arms in another order
        load_or_write_spec(StudySpec(out=str(tmp_path), arms=("b", "a", "c", "d"), seeds=2,
                                     existing={**with_c, "d/0": "x", "d/1": "y"}))
    with pytest.raises(StudyError, match="settings differ"):  # a run it had, replaced, while an arm is added
        load_or_write_spec(StudySpec(out=str(tmp_path), arms=("a", "b", "c", "d"), seeds=2,
                                     existing={**with_c, "a/0": "other", "d/0": "x", "d/1": "y"}))
