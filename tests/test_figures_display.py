"""What the figures show a reader: one colour per run, colour-blind-safe pairs, provenance in every title, a legend
that matches the marks, legible windows on long prompts, labels escaped once, memory maps with contrast."""

import json

import numpy as np
import pytest

from hero_core.viz import axes as AX
from hero_core.viz import decision_figures as D
from hero_core.viz import figures as F
from hero_core.viz import memory_figures as M
from hero_core.viz import palette
from hero_core.words import labels as L

PROMPT = "The cat sat on the mat because it was tired. \"\"\"quoted\"\"\" & <b>tags</b> 東京 🚀"
LONG = " ".join(f"word{i % 37}" for i in range(400))


@pytest.fixture(scope="module")
def traces(tiny):
    return {v: tiny.trace(PROMPT, variant=v) for v in ("hero", "no_history", "no_memread")}


@pytest.fixture(scope="module")
def trace(traces):
    return traces["hero"]


def spec(fig) -> dict:
    return json.loads(fig.to_json())


def title(fig_spec: dict) -> str:
    return fig_spec["layout"]["title"]["text"]


# -- #4 colours and provenance ---------------------------------------------------------------------
def _quality(tiny, trace):
    from hero_core.measures.metrics import compare_to_dense

    dense = tiny.logits(PROMPT, variant="dense").cpu()
    routed = tiny.logits(PROMPT, variant=trace.variant).cpu()
    return compare_to_dense(dense, routed, tiny.encode([PROMPT]).input_ids[0])


def test_quality_lines_one_colour_per_run_in_every_panel(tiny, traces):
    runs = list(traces.values())
    labels = list(traces)
    fig = spec(F.quality_lines([_quality(tiny, t) for t in runs], labels, runs[0].tokens, runs))
    colours = {}
    for d in fig["data"]:
        if d["name"] == "dense":
            continue
        colour = d.get("line", {}).get("color") or d["marker"]["color"]
        if d.get("mode") == "markers":
            assert d["marker"]["color"] == d["marker"]["line"]["color"]
        colours.setdefault(d["legendgroup"], set()).add(colour)
    # every run is drawn in three panels, in one colour, and no two runs share a colour
    assert sorted(colours) == sorted(labels)
    assert all(len(c) == 1 for c in colours.values()), colours
    assert [colours[label].pop() for label in labels] == [palette.run_colour(i) for i in range(3)]
    for t in runs:
        assert palette.provenance(t) in title(fig)


def test_comparison_figures_share_the_run_colours(traces):
    runs, labels = list(traces.values()), list(traces)
    skip_bars = spec(F.layer_skip_bars(runs, labels))
    assert [d["marker"]["color"] for d in skip_bars["data"]] == [palette.run_colour(i) for i in range(3)]
    compute = spec(F.compute_bars(runs, labels))
    assert [d["marker"]["color"] for d in compute["data"]] == [palette.run_colour(i) for i in range(3)]
    divergence = spec(F.layer_divergence(runs, labels))  # runs 2 and 3 against run 1, in both panels
    for d in divergence["data"]:
        assert d["line"]["color"] == palette.run_colour(labels.index(d["legendgroup"]))


def test_colour_blind_safe_pairs(trace, tiny):
    from hero_core.analysis.attribution import explain

    a = explain(tiny, PROMPT, 8, 0, method="ablation")
    bars = spec(D.attribution_bars(a.tokens, a.scores, title="t", trace=trace))
    used = set(bars["data"][0]["marker"]["color"])
    assert used <= {palette.POSITIVE, palette.NEGATIVE} and not used & {"#54a24b", "#e45756"}
    html_out = D.attribution_html(a.tokens, a.scores)
    assert "84,162,75" not in html_out and "228,87,86" not in html_out
    assert palette.POSITIVE_RGB in html_out or palette.NEGATIVE_RGB in html_out
    assert "#e45756" not in palette.FLIP_COLOURS and len(set(palette.FLIP_COLOURS)) == 4


def test_every_figure_title_carries_its_provenance(trace, traces):
    other = traces["no_history"]
    split = D.decision_split(trace, 3, 1)
    figures = [F.skip_heatmap(trace), F.executed_counts(trace), F.layer_skip_bars([trace]), M.memory_map(trace, 3),
               M.mean_memory_map(trace), M.memory_fill(trace, 3, 2), M.forgetting_bars(trace),
               F.trajectories(trace, 3), F.flip_map(trace, other), D.decision_bars(split, trace),
               F.skip_heatmaps([trace, other], ["a", "b"]), F.compute_bars([trace, other], ["a", "b"])]
    text = palette.provenance(trace)
    assert trace.checkpoint in text and trace.variant in text and f"{trace.tau:.3g}" in text
    assert f"{trace.param_skip:.1%}" in text
    for fig in figures:
        s = spec(fig)
        assert text in title(s), title(s)
        # no painted background: the theme (light or dark) decides
        assert "plot_bgcolor" not in s["layout"] and "paper_bgcolor" not in s["layout"]


def test_skip_map_legend_is_what_is_drawn(trace):
    fig = spec(F.skip_heatmap(trace))
    shown = [d for d in fig["data"] if d.get("showlegend", True)]
    names = [d["name"] for d in shown]
    assert names == [F.SKIPPED_NAME, F.EXECUTED_NAME]
    crosses = next(d for d in fig["data"] if d["name"] == F.SKIPPED_NAME)
    # the legend entry IS the overlay: same symbol and colours, legible on both ends of viridis
    assert crosses["marker"]["symbol"] == "x"
    assert crosses["marker"]["color"] == "white" and crosses["marker"]["line"]["color"] == "black"
    executed = next(d for d in fig["data"] if d["name"] == F.EXECUTED_NAME)
    assert executed["marker"]["symbol"] == next(d for d in fig["data"] if d["name"] == F.CELLS_NAME)["marker"]["symbol"]
    cells = next(d for d in fig["data"] if d["name"] == F.CELLS_NAME)
    marks = ["✓ executed" in h for h in cells["hovertext"]]  # the verdict in text, not only by colour
    np.testing.assert_array_equal(marks, trace.executed.reshape(-1))
    assert all(("✗ skipped" in h) != m for h, m in zip(cells["hovertext"], marks, strict=True))


# -- #5 long prompts and labels --------------------------------------------------------------------
def test_labels_are_escaped_once_for_plotly(trace):
    fig = spec(F.skip_heatmap(trace))
    ticks = fig["layout"]["xaxis"]["ticktext"]
    assert '"""' in ticks and not any("&quot;" in t for t in ticks)
    assert any("&lt;" in t for t in ticks) and not any("<" in t for t in ticks)  # markup escaped, once
    cells = next(d for d in fig["data"] if d["name"] == F.CELLS_NAME)
    assert not any("&quot;" in h for h in cells["hovertext"])
    assert L.plotly_text('<a & "b">') == '&lt;a &amp; "b"&gt;'


def test_split_characters_show_their_text(tiny, trace):
    assert "\ufffd" not in "".join(trace.tokens)
    assert "".join(trace.tokens) == tiny.tokenizer.decode(trace.token_ids)  # still the exact text
    shown = L.display_tokens(trace.tokens)
    assert any("東" in s for s in shown) and any("🚀" in s for s in shown)
    assert not any("\ufffd" in s or s == "∅" for s in shown)
    continuation = [i for i, src in enumerate(L.continued_from(trace.tokens)) if src is not None]
    assert continuation and all(shown[i].startswith("(") for i in continuation)
    hovers = AX.hover_labels(trace.tokens)
    assert all("byte piece of token" in hovers[i] for i in continuation)


def test_piece_texts_merges_byte_pieces():
    table = {1: b"\xe6", 2: b"\x9d\xb1", 3: b"x", 4: b"\xff"}

    def decode(ids):
        return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")

    assert L.piece_texts(decode, [3, 1, 2, 3]) == ["x", "東", "", "x"]
    assert L.piece_texts(decode, [4, 3]) == ["\ufffd", "x"]  # a truly invalid byte stays as it is


def test_hover_gives_the_token_index(trace):
    """The hover names the real token index, its text and the layer: never %{x} / %{y}, which plotly formats
    through the axes' tick text ("token 4: 4" on token 50, "block L3")."""
    cells = next(d for d in spec(F.skip_heatmap(trace))["data"] if d["name"] == F.CELLS_NAME)
    assert "%{x}" not in cells["hovertemplate"] and "%{y}" not in cells["hovertemplate"]
    T = trace.n_tokens
    k = 2 * T + 5  # block 3, token 5
    label = AX.hover_labels(trace.tokens)[5]
    assert cells["hovertext"][k].startswith(f"token 5: <b>{label}</b>")
    assert f"layer L{trace.routed_layers[2]} (routed block 3 of {trace.n_routed})" in cells["hovertext"][k]
    other = trace.tokens + ["x"]  # every other token-axis figure carries the index with the point too
    for fig in (F.executed_counts(trace), F.token_quality_bars(trace) if trace.quality is not None else None,
                D.attribution_bars(trace.tokens, np.zeros(T), title="a"), F.skip_overview(trace)):
        if fig is not None:
            assert "%{x}" not in fig.data[0].hovertemplate, fig.layout.title.text
    assert other


def test_every_token_is_labelled_up_to_eighty(tiny):
    """At 60 tokens each token has its own tick label (the font shrinks before labels are thinned); at ~80 too."""
    for n in (60, 80):
        axis = AX.token_axis([f"t{i}" for i in range(n)])
        assert axis["tickvals"] == list(range(n)), n
        assert AX.TICK_FONT_PX[0] <= axis["tickfont"]["size"] <= AX.TICK_FONT_PX[1]
        assert AX.PLOT_WIDTH_PX / n >= axis["tickfont"]["size"]  # a rotated label fits its cell
    assert len(AX.token_axis([f"t{i}" for i in range(120)])["tickvals"]) < 120


@pytest.fixture(scope="module")
def long_trace(tiny):
    return tiny.trace(LONG, max_tokens=512)


def test_long_prompt_window_keeps_cells_and_labels_legible(long_trace):
    T = long_trace.n_tokens
    assert T > AX.MAX_WINDOW
    full = spec(F.skip_heatmap(long_trace))
    small = next(d for d in full["data"] if d["name"] == F.CELLS_NAME)["marker"]["size"]
    window = (100, 163)
    fig = spec(F.skip_heatmap(long_trace, window=window))
    cells = next(d for d in fig["data"] if d["name"] == F.CELLS_NAME)
    size = cells["marker"]["size"]
    assert size >= AX.MIN_CELL_PX > small  # the window restores a legible cell
    axis = fig["layout"]["xaxis"]
    assert axis["range"] == [99.5, 163.5]
    ticks = axis["tickvals"]
    visible = [t for t in ticks if window[0] <= t <= window[1]]
    px_per_token = AX.PLOT_WIDTH_PX / (window[1] - window[0] + 1)
    assert min(np.diff(visible)) * px_per_token >= AX.LABEL_PX  # labels never collide
    assert f"tokens 100–163 of {T}" in title(fig)
    # the window never exceeds what fits at the minimum cell size
    assert AX.cell_size(AX.MAX_WINDOW, long_trace.n_routed) >= AX.MIN_CELL_PX


def test_overview_strip_outlines_the_window(long_trace):
    fig = spec(F.skip_overview(long_trace, (100, 163)))
    z = np.asarray(F.skip_overview(long_trace, (100, 163)).data[0].z)
    assert z.shape == (1, long_trace.n_tokens)
    np.testing.assert_array_equal(z[0], long_trace.executed_per_token())
    (shape,) = fig["layout"]["shapes"]
    assert (shape["x0"], shape["x1"]) == (99.5, 163.5)


def test_every_token_axis_chart_takes_the_window(tiny, long_trace):
    """The charts drawn along the tokens beside a long prompt's skip map share its window: same range, labels
    that never collide, and every token's value still in the figure (a pan away)."""
    from hero_core.measures.metrics import compare_to_dense

    window = (100, 163)
    quality = tiny.trace(LONG, max_tokens=512, quality=True)
    routed = tiny.logits(LONG, max_tokens=512).cpu()
    dense = tiny.logits(LONG, variant="dense", max_tokens=512).cpu()
    lines = compare_to_dense(dense, routed, tiny.encode([LONG], max_tokens=512).input_ids[0])
    other = tiny.trace(LONG, variant="no_history", max_tokens=512)
    figures = {"counts": F.executed_counts(long_trace, window), "quality": F.token_quality_bars(quality, window),
               "flips": F.flip_map(long_trace, other, window=window),
               "maps": F.skip_heatmaps([long_trace, other], ["a", "b"], window),
               "lines": F.quality_lines([lines], ["hero"], long_trace.tokens, [long_trace], window=window),
               "attribution": D.attribution_bars(long_trace.tokens, np.linspace(-1, 1, long_trace.n_tokens),
                                                 title="attribution", window=window)}
    px_per_token = AX.PLOT_WIDTH_PX / (window[1] - window[0] + 1)
    for name, fig in figures.items():
        s = spec(fig)
        axes = [v for k, v in s["layout"].items() if k.startswith("xaxis")]
        assert axes, name
        for axis in axes:
            assert axis["range"] == [99.5, 163.5], name
            visible = [t for t in axis["tickvals"] if window[0] <= t <= window[1]]
            assert min(np.diff(visible)) * px_per_token >= AX.LABEL_PX, name
        assert max(fig.data[0].x) >= long_trace.n_tokens - 2, name  # the rest is a pan away (NLL: T - 1 points)


def test_tau_curve_title_carries_its_provenance(trace):
    fig = spec(D.tau_curve([0.1, 0.5, 0.9], [3.0, 2.0, 1.0], trace.n_routed, current=trace.tau, trace=trace,
                           note="text: “The cat …” · bfloat16"))
    text = title(fig)
    for part in (trace.checkpoint, trace.variant, f"τ now {trace.tau:.3g}", f"param skip {trace.param_skip:.1%}",
                 "τ swept 0.1–0.9", f"{trace.n_tokens} tokens", "The cat", "bfloat16"):
        assert part in text, part
    assert title(spec(D.tau_curve([0.1, 0.9], [2.0, 1.0], 4))) == "Compute as the threshold moves"


@pytest.mark.parametrize("n_visible, cell_px", [(20, 45), (64, 14), (112, 8), (512, 1.7)])
def test_tick_step_spacing(n_visible, cell_px):
    step = AX.tick_step(n_visible, cell_px)
    assert step * cell_px >= AX.LABEL_PX and n_visible / step <= AX.MAX_TICK_LABELS


# -- #6 memory maps with contrast ------------------------------------------------------------------
def test_memory_colour_scale_leaves_out_the_trivial_row(trace):
    t = 5
    z = M.contrast(trace.memory_attention[t], trace.mean_memory_attention(), "weights")
    assert z[1, 0] == pytest.approx(1.0)  # row 2 reads one block: always 1
    heat = spec(M.memory_map(trace, t))["data"][0]
    assert heat["zmax"] == pytest.approx(np.nanmax(z[2:])) and heat["zmin"] == pytest.approx(np.nanmin(z[2:]))


def test_memory_modes(trace):
    t = 5
    alpha = M._lower_triangle(trace.memory_attention[t])
    ratio = M.contrast(trace.memory_attention[t], trace.mean_memory_attention(), "ratio")
    rows = np.arange(trace.n_routed)[:, None]
    np.testing.assert_allclose(ratio[2:], (alpha * rows)[2:], rtol=1e-9)  # alpha over 1/j
    diff = M.contrast(trace.memory_attention[t], trace.mean_memory_attention(), "difference")
    np.testing.assert_allclose(diff, alpha - M._lower_triangle(trace.mean_memory_attention()), rtol=1e-9)
    heat = spec(M.memory_map(trace, t, mode="ratio"))["data"][0]
    assert (heat["zmin"] + heat["zmax"]) / 2 == pytest.approx(1.0)  # centred on "no preference"
    heat = spec(M.memory_map(trace, t, mode="difference"))["data"][0]
    assert (heat["zmin"] + heat["zmax"]) / 2 == pytest.approx(0.0)
    with pytest.raises(ValueError, match="zero"):
        M.mean_memory_map(trace, mode="difference")


def _near_uniform(trace, wobble: float):
    """A copy of ``trace`` whose reads are uniform give or take ``wobble`` (alternating signs, rows sum to 1)."""
    import copy

    out = copy.deepcopy(trace)
    for t in range(out.n_tokens):
        for j in range(2, out.n_routed):
            signs = np.where(np.arange(j) % 2 == 0, 1.0, -1.0) * (1 if t % 2 else -1)
            signs[-1] -= signs.sum()  # keep the row's sum at 1
            out.memory_attention[t, j, :j] = 1.0 / j + wobble * signs / 2
    return out


def test_contrast_colour_ranges_have_a_floor():
    """A departure below the floor never reaches full colour: +-0.012 is drawn pale, not as +-1 of the scale."""
    z = np.full((6, 6), np.nan)
    z[np.tril_indices(6, -1)] = 0.012
    z[2, 0] = -0.012
    assert M.colour_range(z, "difference") == (-0.1, 0.1)
    assert M.colour_range(z + 1.0, "ratio") == (0.0, 2.0)  # ratios within 1.2 %: the range is 0..2 all the same
    lo, hi = M.colour_range(z + 1.0, "ratio")
    assert lo <= 0.5 and hi >= 2.0  # the floor [0.5, 2]
    assert M.colour_range(np.full((3, 3), np.nan), "ratio") == (0.0, 2.0)  # nothing to show: centred on 1
    # above the floor, the range follows the data and stays centred on no preference
    z[3, 1] = 0.4
    assert M.colour_range(z, "difference") == pytest.approx((-0.4, 0.4))
    z[3, 1] = 4.0
    assert M.colour_range(z, "ratio") == pytest.approx((-2.0, 4.0))


def test_a_near_uniform_map_is_drawn_pale(trace):
    flat = _near_uniform(trace, 0.012)
    t = 3
    ratio = spec(M.memory_map(flat, t, mode="ratio"))["data"][0]
    assert (ratio["zmin"], ratio["zmax"]) == (0.0, 2.0)
    diff = spec(M.memory_map(flat, t, mode="difference"))["data"][0]
    assert (diff["zmin"], diff["zmax"]) == (-M.COLOUR_FLOOR["difference"], M.COLOUR_FLOOR["difference"])
    z = M.contrast(flat.memory_attention[t], flat.mean_memory_attention(), "difference")
    assert np.nanmax(np.abs(z[2:])) < 0.5 * M.COLOUR_FLOOR["difference"]  # well inside the scale: pale


def test_forgetting_bars_draw_the_initial_value(trace):
    import copy

    fig = M.forgetting_bars(trace)
    bars, line = fig.data
    assert trace.forgetting_init is not None
    assert line.name.startswith(M.INITIAL_NAME) and line.line.dash == "dash"
    np.testing.assert_allclose(np.asarray(line.y), trace.forgetting_init)
    np.testing.assert_allclose(np.asarray(bars.customdata), trace.forgetting - trace.forgetting_init)
    low, high = fig.layout.yaxis.range
    assert low < trace.forgetting_init <= high
    old = copy.deepcopy(trace)
    old.forgetting_init = None  # a trace saved before rho's initial value was recorded
    fig = spec(M.forgetting_bars(old))
    assert len(fig["data"]) == 1 and "initial value unknown" in title(fig)


def test_memory_map_marks_the_selected_block(trace):
    fig = spec(M.memory_map(trace, 5, selected_block=2))
    (shape,) = fig["layout"]["shapes"]
    assert (shape["y0"], shape["y1"]) == (1.5, 2.5)


def test_memory_reads_say_when_a_read_is_uniform(trace):
    import copy

    even = copy.deepcopy(trace)
    R = even.n_routed
    even.memory_attention[0, R - 1, : R - 1] = 1.0 / (R - 1)
    reads = M.memory_reads(even, 0, R)
    assert reads["even"] and reads["preferred"] == []
    assert reads["top"][0]["ratio"] == pytest.approx(1.0)
    peaked = copy.deepcopy(trace)
    row = np.full(R - 1, 0.1 / (R - 2))
    row[1] = 0.9
    peaked.memory_attention[0, R - 1, : R - 1] = row
    reads = M.memory_reads(peaked, 0, R)
    assert not reads["even"] and reads["preferred"][0]["block"] == 1
    assert reads["preferred"][0]["ratio"] == pytest.approx(0.9 * (R - 1))


# -- issue 23: what the figures say ---------------------------------------------------------------------
def test_threshold_is_a_legend_entry_not_text_over_the_bars(trace):
    """`logit(τ) = 0.000` was an annotation over the history bar; the threshold is named in the legend instead."""
    fig = spec(D.decision_bars(D.decision_split(trace, 3, 1), trace))
    assert not fig["layout"].get("annotations")
    names = [d.get("name", "") for d in fig["data"]]
    assert any(n.startswith("threshold logit(τ) = +0.000 (τ = 0.5)") for n in names), names


def test_tau_curve_draws_quality_beside_compute(trace):
    fig = spec(D.tau_curve([0.1, 0.5, 0.9], [3.0, 2.0, 1.0], trace.n_routed, current=trace.tau, trace=trace,
                           perplexity_ratio=[1.0, 1.1, 1.4]))
    assert title(fig).startswith("Compute and quality as the threshold moves")
    quality = next(d for d in fig["data"] if d.get("yaxis") == "y2")
    assert list(quality["y"]) == [1.0, 1.1, 1.4] and fig["layout"]["yaxis2"]["overlaying"] == "y"
    # its own ticks: synced to the left axis' grid, the log axis was labelled 9, 7, 5, 4 from the bottom up
    assert fig["layout"]["yaxis2"]["tickmode"] == "auto"
    wide = spec(D.tau_curve([0.1, 0.5, 0.9], [3.0, 2.0, 1.0], trace.n_routed, perplexity_ratio=[0.97, 3.0, 399.0]))
    axis = wide["layout"]["yaxis2"]
    assert axis["tickmode"] == "array" and list(axis["ticktext"]) == ["1", "2", "5", "10", "20", "50", "100", "200"]
    assert list(axis["tickvals"]) == sorted(axis["tickvals"])


def test_compared_skip_maps_keep_their_titles_clear_of_the_legend(traces):
    """Row titles are the runs' labels on the left (the provenance is in the figure title); the legend sits at
    the top right, where a long centred subplot title used to run under it."""
    fig = spec(F.skip_heatmaps([traces["hero"], traces["no_history"]], ["hero", "no_history"]))
    rows = fig["layout"]["annotations"]
    assert [a["text"] for a in rows] == ["hero", "no_history"]
    assert all(a["x"] == 0 and a["xanchor"] == "left" for a in rows)
    assert fig["layout"]["legend"]["xanchor"] == "right"
