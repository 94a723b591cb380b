"""hero_core.viz.figures: every figure's data is the trace's own arrays, on the shared axes."""

import json
import math
import re

import numpy as np
import pytest
import torch

from hero_core.viz import decision_figures as D
from hero_core.viz import figures as F
from hero_core.viz import memory_figures as M
from hero_core.viz.palette import MARK_COLOUR
from hero_core.words import labels as L

PROMPT = "The cat sat on the mat because it was tired. <b>Tags</b> & \"quotes\"\n\tand a tab."


@pytest.fixture(scope="module")
def traces(tiny):
    return {v: tiny.trace(PROMPT, variant=v) for v in ("hero", "no_history", "dense")}


@pytest.fixture(scope="module")
def trace(traces):
    return traces["hero"]


def spec(fig) -> dict:
    """The figure as the browser gets it (plain JSON: arrays decoded as lists)."""
    return json.loads(fig.to_json())


def values(obj):
    """A plotly JSON array (plain list or typed-array {dtype, bdata}) as a numpy array."""
    if isinstance(obj, dict) and "bdata" in obj:
        import base64

        data = np.frombuffer(base64.b64decode(obj["bdata"]), dtype=np.dtype(obj["dtype"]))
        if "shape" in obj:
            shape = obj["shape"]
            shape = [int(n) for n in shape.split(",")] if isinstance(shape, str) else shape
            return data.reshape(shape)
        return data
    return np.asarray(obj)


def test_trace_has_both_decisions(trace):
    # The tiny model's gates straddle tau, so the figures below see executed and skipped cells.
    assert trace.executed.any() and (~trace.executed).any()


def test_skip_heatmap_cells_are_the_trace(trace):
    fig = spec(F.skip_heatmap(trace))
    cells = next(d for d in fig["data"] if d.get("name") == F.CELLS_NAME)
    R, T = trace.n_routed, trace.n_tokens
    x, y = values(cells["x"]), values(cells["y"])
    assert x.shape == y.shape == (R * T,)
    np.testing.assert_array_equal(x, np.tile(np.arange(T), R))
    np.testing.assert_array_equal(y, np.repeat(np.arange(1, R + 1), T))
    np.testing.assert_array_equal(values(cells["marker"]["color"]), trace.gate.reshape(-1))
    custom = values(cells["customdata"])
    assert custom.shape == (R * T, 5)
    np.testing.assert_array_equal(custom[:, 0], np.repeat(trace.routed_layers, T))
    np.testing.assert_allclose(custom[:, 1], trace.history_logit.reshape(-1))
    np.testing.assert_allclose(custom[:, 2], trace.local_logit.reshape(-1))
    np.testing.assert_allclose(custom[:, 3], trace.margin().reshape(-1))
    status = np.array(["executed" in h for h in cells["hovertext"]])
    np.testing.assert_array_equal(status, trace.executed.reshape(-1))
    # The crosses sit exactly on the skipped cells.
    marks = next(d for d in fig["data"] if d.get("name") == F.SKIPPED_NAME)
    blocks, tokens = np.nonzero(~trace.executed)
    np.testing.assert_array_equal(values(marks["x"]), tokens)
    np.testing.assert_array_equal(values(marks["y"]), blocks + 1)
    assert cells["type"] == "scatter"  # not heatmap: Streamlit selections need scatter points
    assert fig["layout"]["xaxis"]["tickvals"] == list(range(T))
    assert len(fig["layout"]["xaxis"]["ticktext"]) == T
    assert fig["layout"]["yaxis"]["ticktext"] == [f"L{layer}" for layer in trace.routed_layers]


def test_skip_heatmap_escapes_and_marks_selection(trace):
    fig = spec(F.skip_heatmap(trace, selected=(3, 1)))
    cells = next(d for d in fig["data"] if d.get("name") == F.CELLS_NAME)
    inner = [h[h.index("<b>") + len("<b>"): h.index("</b> → FFN")] for h in cells["hovertext"]]  # the token text
    assert not any("<" in t or ">" in t for t in inner) and any("&lt;" in t for t in inner)
    ring = next(s for s in fig["layout"]["shapes"] if s.get("name") == F.SELECTED_NAME)
    assert (ring["x0"], ring["x1"], ring["y0"], ring["y1"]) == (2.5, 3.5, 1.5, 2.5)  # around token 3, block 2


def test_token_label():
    assert L.token_label("\n") == "↵"
    assert L.token_label("   ") == "␣␣␣"
    assert L.token_label("") == "∅"
    assert L.token_label("\x1f") == "␟" and L.token_label("a\x00b\x1b") == "a␀b␛"  # found by hypothesis
    assert L.token_label("\u3000") == "␣"  # ideographic space: blank, so shown
    assert L.token_label("abcdefghijklmnop", 6) == "abcde…"


def test_executed_counts_and_layer_bars(traces, trace):
    counts = spec(F.executed_counts(trace))["data"][0]
    np.testing.assert_array_equal(values(counts["y"]), trace.executed_per_token())
    np.testing.assert_array_equal(values(counts["x"]), np.arange(trace.n_tokens))
    bars = spec(F.layer_skip_bars([traces["hero"], traces["no_history"]], ["hero", "local"]))["data"]
    assert [b["name"] for b in bars] == ["hero", "local"]
    for bar, t in zip(bars, (traces["hero"], traces["no_history"]), strict=True):
        assert bar["x"] == [f"L{layer}" for layer in t.routed_layers]
        np.testing.assert_allclose(values(bar["y"]), t.layer_skip_rates())


def test_compute_bars_match_summary(traces):
    data = spec(F.compute_bars([traces["hero"], traces["dense"]], ["hero", "dense"]))["data"]
    for bar, name in zip(data, ("hero", "dense"), strict=True):
        summary = traces[name].summary()
        np.testing.assert_allclose(values(bar["y"]), [summary[k] for k in F.SUMMARY_LABELS])
    assert np.all(values(data[1]["y"])[[0, 3]] == 0)  # dense skips nothing


def test_token_compute_html_escapes_and_counts(trace):
    out = F.token_compute_html(trace.tokens, trace.executed_per_token(), trace.n_routed, n_prompt_tokens=5)
    assert "<b>" not in out and "&lt;" in out  # token text is escaped
    assert out.count('class="hero-token"') == trace.n_tokens
    found = [int(v) for v in re.findall(r'data-ffn="(\d+)"', out)]
    assert found == trace.executed_per_token().tolist()
    assert out.count("text-decoration:underline") == trace.n_tokens - 5
    with pytest.raises(ValueError):
        F.token_compute_html(["a"], [1, 2], 4)


def test_memory_maps(trace):
    t = 5
    R = trace.n_routed
    z = values(spec(M.memory_map(trace, t))["data"][0]["z"]).astype(float)
    assert z.shape == (R, R)
    lower = np.tril_indices(R, -1)
    np.testing.assert_allclose(z[lower], trace.memory_attention[t][lower])
    assert np.all(np.isnan(z[np.triu_indices(R)]))
    rows = trace.memory_attention[t].sum(axis=1)
    np.testing.assert_allclose(rows[1:], 1.0, atol=1e-4)  # every read from block 2 on is a weighted average
    mean = values(spec(M.mean_memory_map(trace))["data"][0]["z"]).astype(float)
    np.testing.assert_allclose(mean[lower], trace.mean_memory_attention()[lower])
    fill = values(spec(M.memory_fill(trace, t, 2))["data"][0]["z"]).astype(float)
    assert np.all(np.isnan(fill[2:])) and fill[1, 0] == pytest.approx(trace.memory_attention[t, 1, 0])
    with pytest.raises(ValueError, match="out of range"):
        M.memory_map(trace, trace.n_tokens)
    with pytest.raises(ValueError, match="depth"):
        M.memory_fill(trace, t, R + 1)


def test_forgetting_and_trajectories(trace):
    rho = spec(M.forgetting_bars(trace))["data"][0]
    np.testing.assert_allclose(values(rho["y"]), trace.forgetting)
    t = 4
    data = spec(F.trajectories(trace, t))["data"]
    assert len(data) == len(F.TRAJECTORY_FIELDS)
    for line, (field, _) in zip(data, F.TRAJECTORY_FIELDS, strict=True):
        np.testing.assert_array_equal(values(line["x"]), np.arange(1, trace.n_routed + 1))
        np.testing.assert_allclose(values(line["y"]), getattr(trace, field)[:, t])


def test_flip_map_and_divergence(traces):
    a, b = traces["hero"], traces["no_history"]
    codes = F.flip_codes(a, b)
    assert codes.shape == a.executed.shape
    np.testing.assert_array_equal(codes >= 2, a.executed != b.executed)
    np.testing.assert_array_equal(codes == 2, a.executed & ~b.executed)
    z = values(spec(F.flip_map(a, b, ("hero", "local")))["data"][0]["z"])
    np.testing.assert_array_equal(z, codes)
    div = spec(F.layer_divergence([a, b], ["hero", "local"]))["data"]
    np.testing.assert_allclose(values(div[0]["y"]), (a.executed != b.executed).mean(axis=1))
    np.testing.assert_allclose(values(div[1]["y"]), np.abs(a.gate - b.gate).mean(axis=1))


def test_comparisons_need_the_same_tokens(tiny, trace):
    other = tiny.trace("A different prompt.")
    with pytest.raises(ValueError, match="same tokens"):
        F.flip_map(trace, other)
    with pytest.raises(ValueError, match="same tokens"):
        F.skip_heatmaps([trace, other], ["a", "b"])


def test_skip_heatmaps_share_axes(traces):
    fig = spec(F.skip_heatmaps([traces["hero"], traces["no_history"]], ["hero", "local"]))
    cells = [d for d in fig["data"] if d.get("name") == F.CELLS_NAME]
    assert len(cells) == 2
    marks = [d for d in fig["data"] if d.get("name") == F.SKIPPED_NAME]
    assert [len(values(m["x"])) for m in marks] == [int((~t.executed).sum()) for t in traces.values()][:2]
    np.testing.assert_array_equal(np.asarray(values(cells[1]["z"])).reshape(traces["no_history"].gate.shape),
                                  traces["no_history"].gate)  # one heatmap image per run: these maps are not clicked
    status = ["✓ executed" in h for row in cells[0]["hovertext"] for h in row]  # the verdict in text, too
    np.testing.assert_array_equal(status, traces["hero"].executed.reshape(-1))
    assert fig["layout"]["xaxis"]["matches"] == "x2" or fig["layout"]["xaxis2"].get("matches") == "x"


def test_quality_lines(tiny, trace):
    from hero_core.measures.metrics import compare_to_dense

    ids = torch.tensor(trace.token_ids)
    q = compare_to_dense(tiny.logits(PROMPT, variant="dense"), tiny.logits(PROMPT, variant="hero"), ids)
    data = spec(F.quality_lines([q], ["hero"], trace.tokens))["data"]
    np.testing.assert_allclose(values(data[0]["y"]), q["nll"], rtol=1e-6)
    np.testing.assert_allclose(values(data[1]["y"]), q["kl"], rtol=1e-6, atol=1e-9)
    assert len(values(data[0]["y"])) == trace.n_tokens - 1
    np.testing.assert_array_equal(values(data[2]["x"]), np.flatnonzero(~np.asarray(q["top1_agree"])))
    np.testing.assert_allclose(values(data[3]["y"]), q["nll_dense"], rtol=1e-6)  # the dense reference line


def test_decision_split_is_exact(trace):
    for t in range(trace.n_tokens):
        for j in range(trace.n_routed):
            s = D.decision_split(trace, t, j)
            assert s["gate_logit"] == pytest.approx(trace.history_logit[j, t] + trace.local_logit[j, t])
            assert 1 / (1 + math.exp(-s["gate_logit"])) == pytest.approx(s["gate"], abs=1e-6)
            assert s["executed"] == bool(trace.executed[j, t])
            assert s["history_flips"] == (s["executed"] != (trace.local_logit[j, t] >= s["tau_logit"]))
    bars = spec(D.decision_bars(D.decision_split(trace, 2, 1)))["data"][0]
    np.testing.assert_allclose(values(bars["x"]), [trace.local_logit[1, 2], trace.history_logit[1, 2],
                                                   trace.local_logit[1, 2] + trace.history_logit[1, 2]])


def test_figure_html_is_offline(trace):
    page = F.figure_html(F.skip_heatmap(trace), "a <title>")
    assert page.startswith("<!doctype html>") and "<title>a &lt;title&gt;</title>" in page
    assert re.search(r"<script[^>]*\bsrc=", page) is None  # nothing is fetched
    assert "cdn.plot.ly/plotly" not in page
    assert len(page) > 1_000_000  # plotly.js itself is inlined


def test_settled_margins_hold_the_labels_plotly_would_push_them_to(tiny):
    """A skip map's margins already hold its turned token labels, its layer labels and its colour bar (so plotly
    draws it once); settling twice changes nothing, and a margin already wide enough is left alone."""
    from hero_core.viz.margins import COLOUR_BAR_PX, settle_margins

    trace = tiny.trace("A sentence whose tokens become the labels of the map's token axis.")
    fig = F.skip_heatmap(trace)
    before = fig.layout.margin.to_plotly_json()
    settle_margins(fig)
    after = fig.layout.margin.to_plotly_json()
    assert after["b"] > before["b"] and after["r"] >= COLOUR_BAR_PX and after["l"] >= before["l"]
    longest = max(len(t) for t in fig.layout.xaxis.ticktext)
    assert after["b"] >= longest * fig.layout.xaxis.tickfont.size * 0.6  # the turned labels fit below the plot
    assert settle_margins(fig).layout.margin.to_plotly_json() == after
    import plotly.graph_objects as go

    # a colour bar with named ticks (the flip map's four outcomes) takes the room of its longest name
    flips = F.flip_map(trace, tiny.trace("A sentence whose tokens become the labels of the map's token axis.",
                                         variant="no_history"), labels=("a long run label", "another long label"))
    longest_name = max(len(t) for t in flips.data[0].colorbar.ticktext)
    assert settle_margins(flips).layout.margin.r >= longest_name * 12 * 0.45
    wide = go.Figure(go.Scatter(x=[0, 1], y=[0, 1]), layout={"margin": {"l": 200, "r": 200, "t": 200, "b": 200}})
    assert settle_margins(wide).layout.margin.to_plotly_json() == {"l": 200, "r": 200, "t": 200, "b": 200}


def test_the_clickable_map_marks_its_cell_as_the_selected_point_and_dims_nothing(trace):
    """The app's map: the selected cell is plotly's own selected point (what a click makes it in the browser), not a
    ring, and a selection leaves every other cell and cross as drawn."""
    T = trace.n_tokens
    fig = spec(F.skip_heatmap(trace, selected=(3, 1), clickable=True))
    cells = next(d for d in fig["data"] if d.get("name") == F.CELLS_NAME)
    assert cells["selectedpoints"] == [1 * T + 3]
    assert cells["selected"]["marker"]["color"] == MARK_COLOUR
    marked = [d for d in fig["data"] if d.get("mode") == "markers"]
    assert {d.get("name") for d in marked} >= {F.CELLS_NAME, F.SKIPPED_NAME}
    assert all(d["unselected"]["marker"]["opacity"] == 1 for d in marked)
    assert not fig["layout"].get("shapes")
    legend = next(d for d in fig["data"] if d.get("name") == F.SELECTED_NAME)  # the legend says what orange is
    assert legend["marker"]["color"] == MARK_COLOUR
    unselected = spec(F.skip_heatmap(trace, clickable=True))
    assert "selectedpoints" not in next(d for d in unselected["data"] if d.get("name") == F.CELLS_NAME)
