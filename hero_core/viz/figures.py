"""Plotly figures of routing traces: pure functions of :class:`~hero_core.method.trace.RoutingTrace` objects.

No Streamlit here: the app, notebooks and tests all draw the same figures. Conventions, shared by
every figure so that side-by-side views line up:

* x is the token position 0..T-1 (numeric, with the token text as tick labels: repeated tokens must
  not merge as they would on a categorical axis);
* y is the routed-block index 1..R (tick labels ``L<layer>``, the backbone's layer index);
* per-cell values are the trace's own arrays, unrounded (hover text rounds for display only);
* in skip maps every cell is a square coloured by g; a white × (black outline) over it means the FFN was
  skipped, so executed vs skipped reads without colour;
* every title carries the run's provenance (checkpoint, variant, τ, param skip): an exported figure keeps it;
* no figure paints its background: the template (Streamlit's light or dark theme) does; colours come from
  :mod:`hero_core.viz.palette` (colour-blind safe, one colour per run in every subplot);
* plotly strings are escaped once, for plotly's own HTML subset (:func:`hero_core.words.labels.plotly_text`).

Long prompts: ``window=(first, last)`` shows that token range at a legible cell size (the rest is a pan away),
with tick labels thinned so that they never overlap; :func:`skip_overview` is the whole prompt in one strip.
Memory figures live in :mod:`hero_core.viz.memory_figures`, the decision figures in
:mod:`hero_core.viz.decision_figures`.

The skip map is drawn as square ``go.Scatter`` markers, not ``go.Heatmap``: Streamlit's
``plotly_chart(on_select=...)`` returns no selection for heatmaps (streamlit issue 8760), and a
clicked cell is how the app picks a token. Point k of the cell trace is (block k // T, token k % T).
"""

from __future__ import annotations

import functools
import html
import math
from collections.abc import Sequence
from types import MappingProxyType

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from hero_core.method.trace import RoutingTrace
from hero_core.viz.axes import (
    block_axis,
    cell_size,
    clamp_window,
    hover_labels,
    indexed_hover,
    token_axis,
)
from hero_core.viz.memory_figures import block_labels, check_token
from hero_core.viz.palette import (
    COMPUTE_SCALE,
    DENSE_COLOUR,
    EXECUTED_COLOUR,
    FLIP_COLOURS,
    GATE_SCALE,
    MARK_COLOUR,
    SKIPPED_COLOUR,
    run_colour,
    title_room,
    titled,
)
from hero_core.words.labels import plotly_text

EXECUTED_SYMBOL = "square"  # every cell: a square coloured by g
SKIP_MARK = "x"  # drawn over the cells whose FFN did not run: white fill, black outline, legible on any g
CELLS_NAME = "cells"  # name of the clickable trace in skip maps
SKIPPED_NAME = "FFN skipped (×)"  # name of the cross overlay, which is also its own legend entry
SELECTED_NAME = "selected"  # the ring (a layout shape) around the selected cell, or its legend entry
EXECUTED_NAME = "FFN executed (plain cell, colour = g)"
_GL_THRESHOLD = 12_000  # cells above which the skip map switches to WebGL
FLIP_CODES = ("both skipped", "both executed", "only {a} executed", "only {b} executed")
TRAJECTORY_FIELDS = (("gate", "gate g"), ("history_logit", "history logit a"), ("local_logit", "local logit b"),
                     ("p_hist", "p_hist"), ("m_hist", "m_hist"), ("nu", "novelty ν"))
def _check_same_tokens(traces: Sequence[RoutingTrace]) -> None:
    first = traces[0]
    for other in traces[1:]:
        if other.token_ids != first.token_ids:
            raise ValueError("runs to compare must route the same tokens: their tokenisations differ "
                             "(different backbone, prompt or chat-template setting)")
        if other.routed_layers != first.routed_layers:
            raise ValueError("runs to compare must route the same layers: their checkpoints route "
                             f"{first.routed_layers} and {other.routed_layers}")


# -- skip map ------------------------------------------------------------------------------------
def _cells(trace: RoutingTrace, *, show_scale: bool = True, size: int | None = None) -> go.Scatter:
    """One filled square per (routed block, token), coloured by g; point k is (block k // T, token k % T)."""
    R, T = trace.n_routed, trace.n_tokens
    tokens = np.tile(np.arange(T), R)
    blocks = np.repeat(np.arange(1, R + 1), T)
    executed = trace.executed.reshape(-1)
    labels = indexed_hover(trace.tokens)
    status = ("✗ skipped", "✓ executed")  # a text symbol too: the verdict must not rest on colour alone
    layers = [f"L{layer}" for layer in trace.routed_layers]
    # The token's index and text, the layer and block travel with the point: %{x} and %{y} would be formatted
    # through the axes' tick text ("token 4: 4" on token 50, "block L3").
    hover = [f"{labels[k % T]} → FFN {status[e]}<br>layer {layers[k // T]} (routed block {k // T + 1} of {R})"
             for k, e in enumerate(executed.tolist())]
    # Numeric customdata (one float array) and plain strings: plotly deep-copies object arrays element by element.
    custom = np.stack([np.repeat(np.asarray(trace.routed_layers, dtype=np.float64), T),
                       trace.history_logit.reshape(-1), trace.local_logit.reshape(-1), trace.margin().reshape(-1),
                       tokens.astype(np.float64)], axis=-1)  # (R*T, 5): layer, a, b, g - tau, token
    cls = go.Scattergl if R * T > _GL_THRESHOLD else go.Scatter
    # A scalar symbol: per-point symbol arrays cost plotly ~0.1 ms of validation each (0.5 s at 30 x 130).
    return cls(
        x=tokens, y=blocks, mode="markers", name=CELLS_NAME, showlegend=False, customdata=custom, hovertext=hover,
        marker={"symbol": EXECUTED_SYMBOL, "size": size or cell_size(T, R), "color": trace.gate.reshape(-1),
                "colorscale": GATE_SCALE, "cmin": 0.0, "cmax": 1.0, "line": {"width": 0},
                "showscale": show_scale, "colorbar": {"title": {"text": "g"}, "thickness": 12, "len": 0.8}},
        hovertemplate=("%{hovertext}<br>g = %{marker.color:.4f}<br>a (history) = %{customdata[1]:.3f}<br>"
                       "b (local) = %{customdata[2]:.3f}<br>margin g − τ = %{customdata[3]:+.4f}<extra></extra>"))


def _cell_grid(trace: RoutingTrace, *, show_scale: bool = True) -> go.Heatmap:
    """The cells of a skip map that is only looked at, not clicked (Compare's stacked maps): one heatmap image of g,
    with the same hover as :func:`_cells`. Why: one SVG marker per cell cost the browser most of Compare's drawing
    (13.9 k of its 21.8 k SVG nodes at six runs of a 77-token prompt); a heatmap is one image whatever its size."""
    R, T = trace.n_routed, trace.n_tokens
    labels = indexed_hover(trace.tokens)
    status = ("✗ skipped", "✓ executed")
    layers = [f"L{layer}" for layer in trace.routed_layers]
    hover = [[f"{labels[t]} → FFN {status[int(trace.executed[j, t])]}<br>layer {layers[j]} (routed block {j + 1} "
              f"of {R})" for t in range(T)] for j in range(R)]
    custom = np.stack([trace.history_logit, trace.local_logit, trace.margin()], axis=-1)  # (R, T, 3): a, b, g - tau
    return go.Heatmap(
        x=np.arange(T), y=np.arange(1, R + 1), z=trace.gate, name=CELLS_NAME, colorscale=GATE_SCALE, zmin=0.0,
        zmax=1.0, xgap=1, ygap=1, showscale=show_scale, showlegend=False, hovertext=hover, customdata=custom,
        colorbar={"title": {"text": "g"}, "thickness": 12, "len": 0.8},
        hovertemplate=("%{hovertext}<br>g = %{z:.4f}<br>a (history) = %{customdata[0]:.3f}<br>"
                       "b (local) = %{customdata[1]:.3f}<br>margin g − τ = %{customdata[2]:+.4f}<extra></extra>"))


def _skip_marks(trace: RoutingTrace, *, size: int | None = None, legend: bool = True) -> go.Scatter:
    """A white × with a black outline over every skipped cell (legible on every g of the colour scale, and on
    a light or dark legend); it is its own legend entry, so the legend shows exactly what is drawn."""
    blocks, tokens = np.nonzero(~trace.executed)
    R, T = trace.n_routed, trace.n_tokens
    cls = go.Scattergl if R * T > _GL_THRESHOLD else go.Scatter
    return cls(x=tokens, y=blocks + 1, mode="markers", name=SKIPPED_NAME, showlegend=legend, hoverinfo="skip",
               marker={"symbol": SKIP_MARK, "size": max(6, int(0.7 * (size or cell_size(T, R)))), "color": "white",
                       "line": {"width": 1, "color": "black"}})


def _executed_legend(size: int) -> go.Scatter:
    """Legend entry for an executed cell: a plain square (no ×) in the middle of the g scale."""
    return go.Scatter(x=[None], y=[None], mode="markers", name=EXECUTED_NAME, hoverinfo="skip",
                      marker={"symbol": EXECUTED_SYMBOL, "size": min(size, 14), "line": {"width": 0},
                              "color": sample_colorscale(GATE_SCALE, [0.5])[0]})


def _prompt_boundary(fig: go.Figure, trace: RoutingTrace, **where) -> None:
    n = trace.n_prompt_tokens
    if n is not None and 0 < n < trace.n_tokens:
        fig.add_vline(x=n - 0.5, line={"dash": "dash", "color": DENSE_COLOUR}, annotation_text="generated →",
                      annotation_position="top right", **where)


def visible_cell_size(trace: RoutingTrace, window: tuple[int, int] | None = None) -> int:
    first, last = clamp_window(trace.n_tokens, window)
    return cell_size(last - first + 1, trace.n_routed)


def skip_heatmap(trace: RoutingTrace, *, selected: tuple[int, int] | None = None, title: str | None = None,
                 window: tuple[int, int] | None = None, clickable: bool = False) -> go.Figure:
    """Routed layer x token map of the gates: colour g; a white × marks a skipped FFN.

    ``selected`` = (token, block index 0-based) draws a ring around that cell. ``window`` = (first, last) token
    shown (inclusive); every cell is still in the figure, so panning reveals the rest. ``clickable`` (the app's map,
    which selects a cell on a click): the selected cell is plotly's own selected point, filled with the mark colour,
    instead of a ring, so a click shows its cell in the browser at once and the figure the server sends back need
    not change (Streamlit draws a changed figure from scratch)."""
    R, T = trace.n_routed, trace.n_tokens
    size = visible_cell_size(trace, window)
    fig = go.Figure([_cells(trace, size=size), _skip_marks(trace, size=size), _executed_legend(size)])
    if clickable:  # a selection leaves the other cells and the crosses as they are (plotly would dim them)
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=SELECTED_NAME, hoverinfo="skip",
                                 marker={"symbol": EXECUTED_SYMBOL, "size": min(size, 14), "color": MARK_COLOUR,
                                         "line": {"width": 0}}))  # the legend's entry for the filled cell
        fig.update_traces(unselected={"marker": {"opacity": 1}}, selector={"mode": "markers"})
        fig.update_traces(selected={"marker": {"color": MARK_COLOUR, "opacity": 1}}, selector={"name": CELLS_NAME})
        if selected is not None:
            fig.update_traces(selectedpoints=[selected[1] * T + selected[0]], selector={"name": CELLS_NAME})
    elif selected is not None:
        t, j = selected
        fig.add_shape(type="rect", x0=t - 0.5, x1=t + 0.5, y0=j + 0.5, y1=j + 1.5, name=SELECTED_NAME,
                      line={"color": MARK_COLOUR, "width": 3})
    _prompt_boundary(fig, trace)
    first, last = clamp_window(trace.n_tokens, window)
    shown = "" if (first, last) == (0, trace.n_tokens - 1) else f" · tokens {first}–{last} of {trace.n_tokens}"
    fig.update_layout(
        title=titled(plotly_text(title) if title else f"Skip map · {trace.variant} · τ = {trace.tau:g}{shown}",
                     [trace]),
        xaxis=token_axis(trace.tokens, window), yaxis=block_axis(trace, size=size),
        height=int(max(280, min(900, R * (size + 3) + 190))), clickmode="event+select",
        legend={"orientation": "h", "y": 1.0, "x": 1, "xanchor": "right", "yanchor": "bottom"},
        margin={"l": 60, "r": 20, "t": 90, "b": 60})
    return fig


def skip_overview(trace: RoutingTrace, window: tuple[int, int] | None = None) -> go.Figure:
    """The whole prompt in one strip: FFNs executed per token, the visible window outlined."""
    counts = trace.executed_per_token()
    labels = indexed_hover(trace.tokens)
    fig = go.Figure(go.Heatmap(
        z=counts[None, :], x=np.arange(trace.n_tokens), y=["FFNs"], colorscale=COMPUTE_SCALE, zmin=0,
        zmax=trace.n_routed, showscale=False, customdata=np.asarray(labels, dtype=object)[None, :],
        hovertemplate="%{customdata}<br>%{z} of " + str(trace.n_routed)
                      + " FFNs executed<extra></extra>"))
    if window is not None:
        first, last = clamp_window(trace.n_tokens, window)
        fig.add_vrect(x0=first - 0.5, x1=last + 0.5, line={"color": MARK_COLOUR, "width": 2},
                      fillcolor="rgba(0,0,0,0)", name="window")
    fig.update_layout(title=titled(f"Overview: all {trace.n_tokens} tokens (outlined: the skip map's window)",
                                   [trace]),
                      height=150, xaxis={"range": [-0.5, trace.n_tokens - 0.5], "title": {"text": ""}},
                      yaxis={"showticklabels": False}, margin={"l": 60, "r": 20, "t": 60, "b": 25})
    return fig


def skip_heatmaps(traces: Sequence[RoutingTrace], labels: Sequence[str],
                  window: tuple[int, int] | None = None) -> go.Figure:
    """Skip maps of several runs of the same tokens, stacked with shared (synchronised) axes."""
    _check_same_tokens(traces)
    first = traces[0]
    R = first.n_routed
    size = visible_cell_size(first, window)
    # Each row is titled by its run's label alone, on the left: the provenance is in the figure's title, and a
    # long centred subplot title ran under the legend at the top right.
    fig = make_subplots(rows=len(traces), cols=1, shared_xaxes=True, shared_yaxes=True, vertical_spacing=0.04,
                        subplot_titles=[plotly_text(label) for label in labels])
    fig.update_annotations(x=0, xanchor="left", font={"size": 13})
    for row, trace in enumerate(traces, start=1):
        fig.add_trace(_cell_grid(trace, show_scale=row == 1), row=row, col=1)  # not clicked: an image will do
        fig.add_trace(_skip_marks(trace, size=size, legend=row == 1), row=row, col=1)
        fig.update_yaxes(block_axis(trace, size=size), row=row, col=1)
        fig.update_xaxes(token_axis(first.tokens, window)
                         | {"title": {"text": "token" if row == len(traces) else ""}}, row=row, col=1)
    fig.add_trace(_executed_legend(size))
    per_row = max(180, R * (size + 3) + 40)
    fig.update_layout(height=int(min(2400, per_row * len(traces) + 120)),
                      title=titled("Skip maps (synchronised axes)", traces, labels),
                      legend={"orientation": "h", "y": 1.0, "x": 1, "xanchor": "right", "yanchor": "bottom"},
                      margin={"l": 60, "r": 20, "t": title_room(traces, 100), "b": 60})
    return fig


# -- per-token and per-layer compute ---------------------------------------------------------------
def executed_counts(trace: RoutingTrace, window: tuple[int, int] | None = None) -> go.Figure:
    """FFNs executed per token (of R routed), coloured by the same compute scale as the token text."""
    counts = trace.executed_per_token()
    R = trace.n_routed
    fig = go.Figure(go.Bar(
        x=np.arange(trace.n_tokens), y=counts, name="FFNs executed",
        marker={"color": counts, "colorscale": COMPUTE_SCALE, "cmin": 0, "cmax": R},
        hovertext=indexed_hover(trace.tokens),
        hovertemplate="%{hovertext}<br>%{y} of " + str(R) + " FFNs executed<extra></extra>"))
    _prompt_boundary(fig, trace)
    fig.update_layout(title=titled("FFNs executed per token", [trace]), xaxis=token_axis(trace.tokens, window),
                      yaxis={"title": {"text": "FFNs executed"}, "range": [0, R + 0.5]}, height=320,
                      margin={"l": 60, "r": 20, "t": 70, "b": 60})
    return fig


def token_quality_bars(trace: RoutingTrace, window: tuple[int, int] | None = None) -> go.Figure:
    """Per-token KL(dense || routed) of the next-token distribution: where routing changed the model's output.

    Needs a trace recorded with ``quality=True``; the bars sit under the same token axis as the skip map."""
    if trace.quality is None:
        raise ValueError("this trace has no quality row: record it with hero.trace(..., quality=True)")
    kl = trace.quality["kl_to_dense"]
    agree = trace.quality.get("top1_agree", np.ones_like(kl))
    labels = indexed_hover(trace.tokens)
    fig = go.Figure(go.Bar(
        x=np.arange(trace.n_tokens), y=kl, name="KL to dense",
        marker={"color": np.where(agree > 0.5, EXECUTED_COLOUR, SKIPPED_COLOUR),
                "pattern": {"shape": np.where(agree > 0.5, "", "/").tolist()}},
        customdata=np.stack([labels, np.where(agree > 0.5, "same", "differs")], -1),
        hovertemplate="%{customdata[0]}<br>KL(dense‖routed) %{y:.4f} nats<br>"
                      "top-1 next token vs dense: %{customdata[1]}<extra></extra>"))
    fig.update_layout(title=titled("Quality per token: KL(dense‖routed) of the next-token distribution "
                                   "(hatched orange: top-1 differs from dense)", [trace]),
                      xaxis=token_axis(trace.tokens, window), yaxis={"title": {"text": "nats"}}, height=280,
                      margin={"l": 60, "r": 20, "t": 70, "b": 60}, showlegend=False)
    return fig


@functools.lru_cache(maxsize=4096)  # plotly's colour sampling costs ~0.5 ms a call; a page asks for ~130
def compute_colour(count: float, max_count: int) -> str:
    """Background colour of a token that executed ``count`` of ``max_count`` FFNs (rgb string)."""
    share = 0.0 if max_count <= 0 else min(1.0, max(0.0, count / max_count))
    return sample_colorscale(COMPUTE_SCALE, [share])[0]


def _text_colour(rgb: str) -> str:
    r, g, b = (float(v) for v in rgb[rgb.index("(") + 1: rgb.index(")")].split(","))
    return "#000" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#fff"


def token_compute_html(tokens: Sequence[str], counts: Sequence[float], max_count: int, *,
                       n_prompt_tokens: int | None = None) -> str:
    """Tokens as inline spans shaded by the FFNs they executed (escaped: safe for any text).

    Each span carries ``data-ffn`` (its count) and a tooltip; tokens after ``n_prompt_tokens`` are
    underlined as generated text."""
    if len(tokens) != len(counts):
        raise ValueError(f"{len(tokens)} tokens but {len(counts)} counts")
    spans = []
    for i, (token, count) in enumerate(zip(tokens, counts, strict=True)):
        bg = compute_colour(count, max_count)
        text = html.escape(token).replace("\n", "↵<br>").replace("\t", "⇥") or "∅"
        generated = n_prompt_tokens is not None and i >= n_prompt_tokens
        style = (f"background:{bg};color:{_text_colour(bg)};padding:1px 0;border-radius:2px;white-space:pre-wrap;"
                 + ("text-decoration:underline;" if generated else ""))
        tip = html.escape(f"token {i}: {count:g} of {max_count} FFNs executed", quote=True)
        spans.append(f'<span class="hero-token" data-ffn="{count:g}" title="{tip}" style="{style}">{text}</span>')
    return ('<div class="hero-tokens" style="font-family:ui-monospace,monospace;line-height:1.9;'
            'font-size:0.95rem">' + "".join(spans) + "</div>")


def compute_legend_html(max_count: int) -> str:
    """A small colour key for :func:`token_compute_html`."""
    stops = [0, max_count // 2, max_count] if max_count > 1 else [0, max_count]
    cells = "".join(f'<span style="background:{bg};color:{_text_colour(bg)};padding:1px 6px;margin-right:2px;'
                    f'border-radius:2px">{c}</span>' for c, bg in ((c, compute_colour(c, max_count)) for c in stops))
    return f'<div style="font-size:0.8rem">FFNs executed per token: {cells} (of {max_count})</div>'


def layer_skip_bars(traces: Sequence[RoutingTrace], labels: Sequence[str] | None = None) -> go.Figure:
    """Share of tokens that skipped each routed layer's FFN, one bar group per run."""
    labels = list(labels) if labels is not None else [t.variant for t in traces]
    fig = go.Figure()
    for k, (trace, label) in enumerate(zip(traces, labels, strict=True)):
        fig.add_trace(go.Bar(x=block_labels(trace), y=trace.layer_skip_rates(), name=plotly_text(label),
                             marker={"color": run_colour(k)},
                             hovertemplate="%{x}: %{y:.1%} of tokens skipped<extra>" + plotly_text(label)
                             + "</extra>"))
    fig.update_layout(title=titled("Skip rate per routed layer", traces, labels), barmode="group",
                      yaxis={"title": {"text": "tokens skipping the FFN"}, "tickformat": ".0%", "range": [0, 1]},
                      xaxis={"title": {"text": "routed layer"}}, height=340 + title_room(traces, 0),
                      showlegend=len(labels) > 1, margin={"l": 60, "r": 20, "t": title_room(traces, 70), "b": 50})
    return fig


SUMMARY_LABELS = MappingProxyType({"param_skip": "param skip", "net_param_skip": "net param skip",
                  "flop_share_saved": "FLOPs saved", "skip_rate": "FFN skip rate"})


def compute_bars(traces: Sequence[RoutingTrace], labels: Sequence[str]) -> go.Figure:
    """Headline compute figures of several runs (fractions, shown as %)."""
    fig = go.Figure()
    keys = list(SUMMARY_LABELS)
    for i, (trace, label) in enumerate(zip(traces, labels, strict=True)):
        summary = trace.summary()
        fig.add_trace(go.Bar(x=[SUMMARY_LABELS[k] for k in keys], y=[summary[k] for k in keys],
                             name=plotly_text(label), marker={"color": run_colour(i)},
                             hovertemplate="%{x}: %{y:.2%}<extra>" + plotly_text(label) + "</extra>"))
    fig.update_layout(title=titled("Compute", traces, labels), barmode="group", yaxis={"tickformat": ".0%"},
                      height=340 + title_room(traces, 0),
                      margin={"l": 60, "r": 20, "t": title_room(traces, 70), "b": 40})
    return fig


# -- one token across depth ---------------------------------------------------------------------
def trajectories(trace: RoutingTrace, token: int) -> go.Figure:
    """g, a, b, p_hist, m_hist and nu of one token across routed depth (one panel each)."""
    t = check_token(trace, token)
    fig = make_subplots(rows=2, cols=3, shared_xaxes=True, subplot_titles=[name for _, name in TRAJECTORY_FIELDS],
                        vertical_spacing=0.16, horizontal_spacing=0.07)
    x = np.arange(1, trace.n_routed + 1)
    executed = trace.executed[:, t]
    symbols = np.where(executed, "circle", "circle-open")
    labels = block_labels(trace)
    for k, (field, name) in enumerate(TRAJECTORY_FIELDS):
        row, col = divmod(k, 3)
        fig.add_trace(go.Scatter(x=x, y=getattr(trace, field)[:, t], mode="lines+markers", name=name,
                                 marker={"symbol": symbols, "size": 7}, line={"width": 1.5}, showlegend=False,
                                 customdata=labels, hovertemplate="%{customdata}: %{y:.4f}<extra>" + name
                                 + "</extra>"), row=row + 1, col=col + 1)
    fig.add_hline(y=trace.tau, line={"dash": "dash", "color": MARK_COLOUR}, annotation_text="τ", row=1, col=1)
    step = max(1, math.ceil(trace.n_routed / 8))
    fig.update_xaxes(tickmode="array", tickvals=list(x[::step]), ticktext=labels[::step])
    label = hover_labels(trace.tokens)[t]
    fig.update_layout(title=titled(f"Router trajectories of token {t} “{label}” (hollow = FFN skipped)", [trace]),
                      height=480, margin={"l": 50, "r": 20, "t": 100, "b": 40})
    return fig


# -- comparisons -----------------------------------------------------------------------------------
def flip_codes(trace_a: RoutingTrace, trace_b: RoutingTrace) -> np.ndarray:
    """(R, T) codes: 0 both skipped, 1 both executed, 2 only A executed, 3 only B executed."""
    _check_same_tokens([trace_a, trace_b])
    a, b = trace_a.executed, trace_b.executed
    return np.where(a & b, 1, np.where(a & ~b, 2, np.where(~a & b, 3, 0)))


def flip_map(trace_a: RoutingTrace, trace_b: RoutingTrace, labels: tuple[str, str] = ("A", "B"),
             window: tuple[int, int] | None = None) -> go.Figure:
    """Where two runs of the same tokens decide differently (FFN executed in one, skipped in the other)."""
    codes = flip_codes(trace_a, trace_b)
    la, lb = (plotly_text(s) for s in labels)
    names = [FLIP_CODES[c].format(a=la, b=lb) for c in range(4)]
    scale = []
    for c, colour in enumerate(FLIP_COLOURS):  # a discrete colour per code on zmin=0..zmax=3
        scale += [[c / 4, colour], [(c + 1) / 4, colour]]
    R, T = codes.shape
    text = np.array(names, dtype=object)[codes]
    tokens = np.array(indexed_hover(trace_a.tokens), dtype=object)
    layers = np.array([f"L{layer}" for layer in trace_a.routed_layers], dtype=object)
    custom = np.stack([np.broadcast_to(tokens, (R, T)), trace_a.gate, trace_b.gate, text,
                       np.broadcast_to(layers[:, None], (R, T))], axis=-1)
    fig = go.Figure(go.Heatmap(
        z=codes, x=np.arange(T), y=np.arange(1, R + 1), zmin=-0.5, zmax=3.5, colorscale=scale, customdata=custom,
        xgap=1, ygap=1, colorbar={"tickvals": [0, 1, 2, 3], "ticktext": names, "thickness": 12},
        hovertemplate=("%{customdata[0]}, layer %{customdata[4]}<br>g " + la + " = %{customdata[1]:.4f}<br>"
                       "g " + lb + " = %{customdata[2]:.4f}<br>%{customdata[3]}<extra></extra>")))
    n_flips = int((codes >= 2).sum())
    fig.update_layout(title=titled(f"Decision flips {la} vs {lb}: {n_flips} of {R * T} "
                                   f"({n_flips / max(R * T, 1):.1%})", [trace_a, trace_b], labels),
                      xaxis=token_axis(trace_a.tokens, window), yaxis=block_axis(trace_a),
                      height=int(max(280, min(900, R * (visible_cell_size(trace_a, window) + 3) + 190))),
                      margin={"l": 60, "r": 20, "t": title_room([trace_a, trace_b], 80), "b": 60})
    return fig


def layer_divergence(traces: Sequence[RoutingTrace], labels: Sequence[str]) -> go.Figure:
    """Per routed layer, how far each run departs from the first: decision flip rate and mean |Δg|."""
    _check_same_tokens(traces)
    ref = traces[0]
    fig = make_subplots(rows=1, cols=2, subplot_titles=["decision flip rate vs " + plotly_text(labels[0]),
                                                        "mean |Δg| vs " + plotly_text(labels[0])])
    x = block_labels(ref)
    for k, (trace, label) in enumerate(zip(traces[1:], labels[1:], strict=True), start=1):
        flips = (trace.executed != ref.executed).mean(axis=1)
        dg = np.abs(trace.gate - ref.gate).mean(axis=1)
        name, style = plotly_text(label), {"color": run_colour(k)}  # run k keeps its colour in both panels
        fig.add_trace(go.Scatter(x=x, y=flips, mode="lines+markers", name=name, legendgroup=name, line=style,
                                 marker=style, hovertemplate="%{x}: %{y:.1%} flipped<extra>" + name + "</extra>"),
                      row=1, col=1)
        fig.add_trace(go.Scatter(x=x, y=dg, mode="lines+markers", name=name, legendgroup=name, showlegend=False,
                                 line=style, marker=style, hovertemplate="%{x}: %{y:.4f}<extra>" + name + "</extra>"),
                      row=1, col=2)
    fig.update_yaxes(tickformat=".0%", row=1, col=1)
    fig.update_layout(title=titled("Per-layer divergence", traces, labels), height=360 + title_room(traces, 0),
                      margin={"l": 60, "r": 20, "t": title_room(traces, 90), "b": 50})
    return fig


def quality_lines(qualities: Sequence[dict], labels: Sequence[str], tokens: Sequence[str],
                  traces: Sequence[RoutingTrace] | None = None, window: tuple[int, int] | None = None) -> go.Figure:
    """Per token: NLL of the next token, KL(dense || routed), and where the top-1 prediction departs from
    dense; one line (or row of marks) per run.

    ``qualities`` are :func:`hero_core.measures.metrics.compare_to_dense` dicts on the same tokens; point i is
    the prediction made at token i (the NLL is that of token i+1). Run k has one colour in all three
    panels (the legend names the first panel's line, so the others must match it). ``traces``, when given,
    put each run's provenance in the title; ``window`` = (first, last) token shown, as in the skip map."""
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.07, row_heights=[0.4, 0.4, 0.2],
                        subplot_titles=["NLL of the next token (nats)", "KL(dense ‖ routed) (nats)",
                                        "top-1 prediction differs from dense"])
    hover = indexed_hover(tokens)  # the index travels with the point: %{x} would show the axis' tick text
    for i, (quality, label) in enumerate(zip(qualities, labels, strict=True)):
        name, colour = plotly_text(label), run_colour(i)
        nll = np.asarray(quality["nll"])
        fig.add_trace(go.Scatter(x=np.arange(len(nll)), y=nll, mode="lines", name=name, legendgroup=name,
                                 line={"color": colour}, hovertext=hover[: len(nll)],
                                 hovertemplate="%{hovertext}: %{y:.3f}<extra>" + name + "</extra>"), row=1, col=1)
        kl = np.asarray(quality["kl"])
        fig.add_trace(go.Scatter(x=np.arange(len(kl)), y=kl, mode="lines", name=name, legendgroup=name,
                                 showlegend=False, line={"color": colour}, hovertext=hover[: len(kl)],
                                 hovertemplate="%{hovertext}: %{y:.4f}<extra>" + name + "</extra>"), row=2, col=1)
        differs = np.flatnonzero(~np.asarray(quality["top1_agree"], dtype=bool))
        fig.add_trace(go.Scatter(x=differs, y=[name] * len(differs), mode="markers", name=name, legendgroup=name,
                                 showlegend=False, marker={"symbol": "line-ns-open", "size": 12, "color": colour,
                                                           "line": {"width": 2, "color": colour}},
                                 hovertext=[hover[k] for k in differs],
                                 hovertemplate="%{hovertext}: top-1 differs<extra>" + name + "</extra>"), row=3, col=1)
        if i == 0 and "nll_dense" in quality:
            dense = np.asarray(quality["nll_dense"])
            fig.add_trace(go.Scatter(x=np.arange(len(dense)), y=dense, mode="lines", name="dense",
                                     line={"dash": "dot", "color": DENSE_COLOUR}, hovertext=hover[: len(dense)],
                                     hovertemplate="%{hovertext}: %{y:.3f}<extra>dense</extra>"), row=1, col=1)
    for row in (1, 2):
        fig.update_xaxes(token_axis(tokens, window) | {"title": {"text": ""}}, row=row, col=1)
    fig.update_xaxes(token_axis(tokens, window), row=3, col=1)
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=[plotly_text(s) for s in labels],
                     row=3, col=1)
    fig.update_layout(title=titled("Quality against the dense model, per token", traces or [], labels),
                      height=620 + 20 * len(labels) + title_room(traces or [], 0),
                      margin={"l": 90, "r": 20, "t": title_room(traces or [], 90), "b": 60})
    return fig


# -- export ------------------------------------------------------------------------------------------
def figure_html(fig: go.Figure, title: str | None = None) -> str:
    """A standalone, offline HTML page of a figure: plotly.js is inlined, nothing loads from a CDN."""
    out = fig.to_html(include_plotlyjs=True, full_html=True, config={"displaylogo": False})
    if title:
        out = out.replace("<head>", f"<head><title>{html.escape(title)}</title>", 1)
    return out
