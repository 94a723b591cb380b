"""The Study page, headless (streamlit.testing AppTest, tiny model): the bundled study by default, every run in its
table with links, the differences as interval plots; a wrong or half-finished folder is a plain message."""

import json

import pytest
from apptest_helpers import opener

from hero_core.eval.study.bundled import STORE

TIMEOUT = 120


@pytest.fixture
def open_page(monkeypatch):
    return opener(monkeypatch, TIMEOUT)


def _markdown(at) -> str:
    return "\n".join(m.value for m in at.markdown)


@pytest.mark.skipif(not (STORE / "study.json").is_file(), reason="the bundled study's report is not in this checkout")
def test_the_bundled_study_opens_by_default(open_page):
    at = open_page("study")
    assert not at.exception and not at.warning, [w.value for w in at.warning]
    report = json.loads((STORE / "study.json").read_text())
    seeds = at.dataframe[0].value
    assert list(seeds["run"]) == [n for row in report["summary"]["arms"].values() for n in row["runs"]]
    assert list(seeds["τ"]) == [report["runs"][n]["tau"] for n in seeds["run"]]
    differences, frontier = (json.loads(c.proto.spec) for c in at.get("plotly_chart"))
    measures, arms = report["summary"]["measures"], report["summary"]["arms"]
    assert len(differences["data"]) == len(measures)  # one panel per measure, every comparison in it
    assert all(list(t["y"]) == list(report["summary"]["differences"]) for t in differences["data"])
    # a point per run in every domain, and each arm's references at the same skip
    runs = [t for t in frontier["data"] if t["name"] in arms]
    assert len(runs) == len(arms) * len(report["domains"])
    assert sum(len(t["x"]) for t in runs) == sum(len(r["runs"]) for r in arms.values()) * len(report["domains"])
    references = [t for t in frontier["data"] if t["name"] not in arms]
    assert len(references) == sum(len(a) for a in report["references"].values()) * len(report["domains"])
    text = _markdown(at)
    assert "[Route explorer](explorer?checkpoint=local-10-s1)" in text
    assert "compare_checkpoints=seeds%2Flocal-10-s1-seed1&compare_checkpoints=seeds%2Fhero-10-r2-s1-seed1" in text
    assert "not separable" in text


def test_a_wrong_or_half_finished_folder_is_a_plain_message(open_page, tmp_path):
    at = open_page("study")
    at.text_input(key="study_folder").set_value(str(tmp_path / "nowhere")).run()
    assert not at.exception and "is not a folder" in at.warning[0].value
    at.text_input(key="study_folder").set_value(str(tmp_path)).run()
    assert "holds no study" in at.warning[0].value
    (tmp_path / "study_spec.json").write_text("{}")
    at.text_input(key="study_folder").set_value(str(tmp_path)).run()
    assert "has not written its report yet" in at.warning[0].value
    (tmp_path / "study.json").write_text(json.dumps({"kind": "study", "missing": ["hero-seed1"]}))
    at.text_input(key="study_folder").set_value(str(tmp_path)).run()
    assert "half-finished" in at.warning[0].value and "hero-seed1" in at.warning[0].value
    (tmp_path / "study.json").write_text("[1, 2")
    at.text_input(key="study_folder").set_value(str(tmp_path)).run()
    assert "cannot be read" in at.warning[0].value and not at.dataframe
