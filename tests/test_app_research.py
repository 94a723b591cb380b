"""Research workflows in the app, headless on the tiny model: the Data set page, saved traces uploaded back in,
the per-token table, Compare's exports of every run, and the page state in the URL."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

APP = Path(__file__).resolve().parents[1] / "app"
MAIN = str(APP / "main.py")
sys.path.insert(0, str(APP))

from apptest_helpers import assert_clean, charts, starter  # noqa: E402
from components.exports import trace_json  # noqa: E402

from hero_core.analysis.token_table import token_summary  # noqa: E402
from hero_core.eval.sweep.prompt_sets import bundled_items  # noqa: E402
from hero_core.eval.sweep.run import sweep  # noqa: E402

TIMEOUT = 300
PROMPT_A = "The cat sat on the mat because it was warm."
PROMPT_B = "def square(x):\n    return x * x\n"


@pytest.fixture
def app(monkeypatch):
    return starter(monkeypatch, TIMEOUT)


def values(obj) -> np.ndarray:
    if isinstance(obj, dict) and "bdata" in obj:
        import base64

        return np.frombuffer(base64.b64decode(obj["bdata"]), dtype=np.dtype(obj["dtype"]))
    return np.asarray(obj)


def frames(at) -> list:
    return [d.value for d in at.dataframe]


# -- the Data set page ------------------------------------------------------------------------------
def test_dataset_runs_a_bundled_set_and_opens_an_item(app, tiny, monkeypatch):
    at = app("dataset")
    assert at.radio(key="dataset_source").value == "bundled"
    at.number_input(key="dataset_n").set_value(3)
    at.toggle(key="dataset_match").set_value(False).run()
    assert_clean(at)
    assert at.query_params["set"] == "reasoning" and at.query_params["n"] == "3"
    assert not charts(at)  # nothing runs before Run is pressed
    from components import dataset as dataset_component

    dataset_component._item_rows.clear()  # items another test ran stay cached in this process
    routed = []  # every item the page routes (a cached item is not routed)
    real_run_item = dataset_component.run_item
    monkeypatch.setattr(dataset_component, "run_item", lambda *a, **k: routed.append(a) or real_run_item(*a, **k))
    at.button(key="dataset_run").click().run()
    assert_clean(at)
    items = bundled_items("reasoning", 3)
    expected = sweep(tiny, items, variants=["hero", "no_history"], max_tokens=256, match_compute=False)
    layer_chart = charts(at)["Skip rate per routed layer (data set)"]
    for trace_spec, run in zip(layer_chart["data"], ["hero", "no_history"], strict=True):
        want = expected.layer_skip()
        np.testing.assert_allclose(values(trace_spec["y"]), want[want.run == run].skip_rate)
    assert {"Skip rate by token category", "Skip rate by position in the prompt",
            "Quality against dense per item"} <= set(charts(at))
    table = next(f for f in frames(at) if "prompt" in f.columns and "perplexity_ratio" in f.columns)
    assert len(table) == 6 and sorted(table.item.unique()) == [0, 1, 2]
    labels = [d.label for d in at.get("download_button")]
    assert {"Items (CSV)", "Items (PARQUET)", "Tokens (CSV)", "Tokens (PARQUET)"} <= set(labels)
    assert "PNG" in labels and "SVG" in labels and "All figures (one HTML page)" in labels

    # A rerun takes every item from the cache: no item is routed again (counted, not timed: a loaded machine
    # made the cached rerun slower than the first run once).
    routed_first = len(routed)
    at.button(key="dataset_run").click().run()
    assert_clean(at)
    assert routed_first == 3 and len(routed) == routed_first
    assert charts(at)["Skip rate per routed layer (data set)"] == layer_chart

    at.selectbox(key="dataset_pick").set_value(3)  # item 1 under no_history (rows are item-major)
    at.button(key="dataset_open").click().run()
    assert_clean(at)
    assert at.text_area(key="explorer_prompt").value == items[1].text
    assert at.selectbox(key="sb_variant").value == "no_history"


def test_dataset_upload_and_bad_files(app, tiny):
    at = app("dataset")
    at.radio(key="dataset_source").set_value("upload").run()
    assert any("Upload one or more files" in i.value for i in at.info)
    good = "\n".join(json.dumps({"id": f"q{i}", "prompt": p}) for i, p in enumerate([PROMPT_A, PROMPT_B]))
    at.file_uploader(key="dataset_files").set_value([("prompts.jsonl", good.encode(), "application/json")]).run()
    assert_clean(at)
    at.multiselect(key="dataset_variants").set_value(["hero"])
    at.button(key="dataset_run").click().run()
    assert_clean(at)
    table = next(f for f in frames(at) if "perplexity_ratio" in f.columns and "prompt" in f.columns)
    assert list(table.id) == ["q0", "q1"]
    expected = tiny.trace(PROMPT_B, max_tokens=256, quality=True)
    assert table.param_skip.iloc[1] == pytest.approx(expected.param_skip)
    at.file_uploader(key="dataset_files").set_value([("prompts.jsonl", b'{"answer": 1}', "application/json")]).run()
    assert not at.exception
    assert any("no prompt field" in e.value for e in at.error)


def test_dataset_set_from_url(app):
    at = app("dataset", set="code", n="2")
    assert at.selectbox(key="dataset_set").value == "code"
    assert at.number_input(key="dataset_n").value == 2
    assert "2 prompts" in " ".join(c.value for c in at.caption)


# -- saved traces back in -------------------------------------------------------------------------------
def _upload(at, *files) -> None:
    at.file_uploader(key="saved_files").set_value(list(files)).run()


def _file(name, trace) -> tuple:
    return (name, trace_json(trace).encode(), "application/json")


def test_saved_trace_draws_on_the_pages_without_the_model(app, tiny):
    saved = tiny.trace(PROMPT_A, variant="no_history", tau=0.4, quality=True)
    at = app()
    _upload(at, _file("mine.json", saved))
    assert_clean(at)
    assert at.radio(key="saved_source").value == "mine.json"
    assert any("Drawing the saved trace" in i.value for i in at.info)
    spec = next(s for t, s in charts(at).items() if t.startswith("Skip map"))
    cells = [d for d in spec["data"] if d.get("name") == "cells"][0]
    np.testing.assert_allclose(values(cells["marker"]["color"]), saved.gate.reshape(-1), rtol=1e-6)
    assert not any("Loaded **" in c.value for c in at.sidebar.caption)  # no model was loaded for the drawing
    at.switch_page("views/memory.py").run()
    assert_clean(at)
    assert any("Drawing the saved trace" in i.value for i in at.info)
    at.radio(key="saved_source").set_value("live model").run()
    assert_clean(at)
    assert not any("Drawing the saved trace" in i.value for i in at.info)


def test_saved_traces_compare_like_runs_or_side_by_side(app, tiny):
    a, b = tiny.trace(PROMPT_A, variant="hero"), tiny.trace(PROMPT_A, variant="no_history")
    at = app("compare")
    _upload(at, _file("a.json", a), _file("b.json", b))
    assert_clean(at)
    titles = set(charts(at))
    assert any(t.startswith("Decision flips") or "flip" in t.lower() for t in titles), titles
    assert any("divergence" in t.lower() for t in titles), titles
    labels = [d.label for d in at.get("download_button")]
    assert "Trace (JSON) · a.json · hero" in labels and "Trace (JSON) · b.json · no_history" in labels
    _upload(at, _file("a.json", a), _file("c.json", tiny.trace(PROMPT_B)))
    assert_clean(at)
    assert any("side by side" in c.value for c in at.caption)
    assert not any("divergence" in t.lower() for t in charts(at))


@pytest.mark.parametrize("content, message", [
    (b"\x80\x04\x95 not json", "not a JSON file"),
    (b'{"hello": 1}', "schema_version"),
    (json.dumps({"schema_version": 1, "tokens": ["a"]}).encode(), "missing fields"),
])
def test_bad_trace_files_get_a_clear_message(app, content, message):
    at = app()
    _upload(at, ("bad.json", content, "application/json"))
    assert not at.exception
    problems = [e.value for e in at.sidebar.error]
    assert any("bad.json could not be loaded" in p and message in p for p in problems), problems
    assert at.radio(key="saved_source").value == "live model"


# -- per-token table and Compare's exports -------------------------------------------------------------------
def test_explorer_token_table(app, tiny):
    at = app(prompt=PROMPT_A)
    expected = token_summary(tiny.trace(PROMPT_A, quality=True))
    table = next(f for f in frames(at) if "min_margin" in f.columns)
    assert list(table.token) == list(expected.token)
    np.testing.assert_array_equal(table.ffn_executed, expected.ffn_executed)
    np.testing.assert_allclose(table.min_margin, expected.min_margin, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(table.delta_nll[:-1], expected.delta_nll[:-1], rtol=1e-5, atol=1e-7)


def test_compare_exports_every_runs_trace(app):
    at = app("compare", prompt=PROMPT_A)
    labels = [d.label for d in at.get("download_button")]
    for label in ("hero (as trained)", "no_history (ablation)", "no_memread (ablation)"):
        assert f"Trace (JSON) · {label}" in labels
