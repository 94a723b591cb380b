"""The bundled study: its runs are the bundled checkpoints, taken as finished and never trained; its report is drawn
from the stored measurements in docs/seeds/ and answers the memory question."""

import json

import pytest

from hero_core.eval.study import run_study
from hero_core.eval.study.bundled import STORE, answer_sentence, bundled_spec, shipped_summary
from hero_core.eval.study.lanes import finished
from hero_core.eval.study.spec import plan_runs
from hero_core.eval.study.stats import TextSums


def _never(payload):
    raise AssertionError(f"the bundled study trained {payload['job']['name']}")


def test_every_bundled_run_is_finished_and_named_by_its_checkpoint():
    spec = bundled_spec()
    jobs = plan_runs(spec)
    assert len(jobs) == 9 and all(j.given and finished(j, spec) for j in jobs)
    assert [j.name for j in jobs if j.arm == "local"] == ["local-10-s1", "seeds/local-10-s1-seed1",
                                                          "seeds/local-10-s1-seed2"]


def test_the_bundled_report_comes_from_the_stored_measurements(tmp_path):
    if not all((STORE / f"{n}.ppl.json").is_file() for n in ("hero-10-r2-s1", "local-10-s1")):
        pytest.skip("the bundled measurements are not in this checkout")
    said = []
    report = run_study(bundled_spec(out=tmp_path), train_run=_never, render_only=True, n_boot=300, say=said.append)
    for arm, row in report["summary"]["arms"].items():
        for name, value in zip(row["runs"], row["ppl:code"]["per_seed"], strict=True):
            stored = json.loads((STORE / f"{name.replace('/', '__')}.ppl.json").read_text())
            assert value == TextSums.from_json(stored["domains"]["code"]).point(), (arm, name)
    answer = answer_sentence(report)
    assert answer.startswith("**Does history help on this backbone?**") and "HeRo 3, local 3" in answer
    assert "Against its twin without the memory read (3 seeds)" in answer
    shipped = shipped_summary(report)
    assert shipped["answer"] == answer and set(shipped["arms"]) == {"hero", "local", "no_memread"}
    assert (tmp_path / "study.md").is_file() and said[-1].startswith("hero vs no_memread: ")
    # the references were stored under their old names (static_pruning, random_skip): read back under the frontier's,
    # not measured again
    assert set(report["references"]) == {"static", "random", "oracle"} and "references" not in report["notes"]
    stored = json.loads((STORE / "hero-10-r2-s1.refs.json").read_text())["references"]["random_skip"]["code"]
    assert report["measurements"]["hero-10-r2-s1"]["refs"]["references"]["random"]["code"] == stored


def test_a_report_written_under_the_old_reference_names_reads_under_the_frontiers():
    from hero_core.eval.study.report import read_report

    if not (STORE / "study.json").is_file():
        pytest.skip("the bundled report is not in this checkout")
    report = read_report(STORE)
    assert set(report["references"]) == {"static", "random", "oracle"}
    for run in report["measurements"].values():
        assert set(run["refs"]["references"]) == set(run["refs"]["calibration_skip"]) | {"random"}
        assert run["refs"]["settings"]["references"] == ["static", "random", "oracle"]
