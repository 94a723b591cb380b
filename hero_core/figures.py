"""Plotly figures of routing traces: pure functions of :class:`~hero_core.trace.RoutingTrace` objects.

No Streamlit here: the app, notebooks and tests all draw the same figures. Conventions, shared by
every figure so that side-by-side views line up:

* x is the token position 0..T-1 (numeric, with the token text as tick labels: repeated tokens must
  not merge as they would on a categorical axis);
* y is the routed-block index 1..R (tick labels ``L<layer>``, the backbone's layer index);
* per-cell values are the trace's own arrays, unrounded (hover text rounds for display only);
* in skip maps every cell is a square coloured by g; a white cross over it means the FFN was skipped.

The skip map is drawn as square ``go.Scatter`` markers, not ``go.Heatmap``: Streamlit's
``plotly_chart(on_select=...)`` returns no selection for heatmaps (streamlit issue 8760), and a
clicked cell is how the app picks a token. Point k of the cell trace is (block k // T, token k % T).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from types import MappingProxyType

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from .trace import RoutingTrace

GATE_SCALE = "Viridis"  # g in [0, 1]
COMPUTE_SCALE = "YlOrRd"  # FFNs executed per token: pale = little compute, dark red = dense
EXECUTED_SYMBOL = "square"  # every cell: a square coloured by g
SKIP_MARK = "x-thin-open"  # drawn over the cells whose FFN did not run
LEGEND_SKIPPED_SYMBOL = "square-x"
CELLS_NAME = "cells"  # name of the clickable trace in skip maps
SKIPPED_NAME = "skipped"  # name of the cross overlay
FLIP_CODES = ("both skipped", "both executed", "only {a} executed", "only {b} executed")
FLIP_COLOURS = ("#d9d9d9", "#4c78a8", "#e45756", "#f2a541")
TRAJECTORY_FIELDS = (("gate", "gate g"), ("history_logit", "history logit a"), ("local_logit", "local logit b"),
                     ("p_hist", "p_hist"), ("m_hist", "m_hist"), ("nu", "novelty ν"))
_MAX_TICK_LABELS = 64  # beyond this many tokens, label every k-th tick
_GL_THRESHOLD = 12_000  # cells above which the skip map switches to WebGL


# -- labels ------------------------------------------------------------------------------------
# Other C0 controls and DEL as their Unicode control pictures (␀, ␛, ␟, ␡): invisible characters would leave
# an empty tick label and shift the reader's eye to the wrong token.
_CONTROL_PICTURES = {code: chr(0x2400 + code) for code in range(0x20)} | {0x7F: "␡"}


def token_label(token: str, max_len: int = 12) -> str:
    """A token as a short, visible label: newlines and tabs shown as arrows, other control characters as
    control pictures, an all-blank token as ␣."""
    text = token.replace("\r\n", "↵").replace("\n", "↵").replace("\r", "↵").replace("\t", "⇥")
    text = text.translate(_CONTROL_PICTURES)
    if not text.strip():
        text = "".join("␣" if ch.isspace() else ch for ch in text) or "∅"
    return text if len(text) <= max_len else text[: max_len - 1] + "…"


def block_labels(trace: RoutingTrace) -> list[str]:
    return [f"L{layer}" for layer in trace.routed_layers]


def _token_axis(tokens: Sequence[str]) -> dict:
    T = len(tokens)
    step = max(1, math.ceil(T / _MAX_TICK_LABELS))
    ticks = list(range(0, T, step))
    return {"tickmode": "array", "tickvals": ticks, "ticktext": [html.escape(token_label(tokens[t])) for t in ticks],
            "range": [-0.5, T - 0.5], "tickangle": -60 if T > 12 else 0, "title": {"text": "token"}}


def _block_axis(trace: RoutingTrace, reverse: bool = False) -> dict:
    R = trace.n_routed
    step = max(1, math.ceil(R / 32))
    ticks = list(range(1, R + 1, step))
    axis = {"tickmode": "array", "tickvals": ticks, "ticktext": [f"L{trace.routed_layers[j - 1]}" for j in ticks],
            "title": {"text": "routed layer"}}
    axis["range"] = [R + 0.5, 0.5] if reverse else [0.5, R + 0.5]
    return axis


def _cell_size(n_tokens: int, n_blocks: int) -> int:
    """Marker size (px) so that cells roughly tile a ~900 px wide plot."""
    return int(max(4, min(22, 900 // max(n_tokens, 1), 600 // max(n_blocks, 1))))


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
    labels = [html.escape(token_label(t, 24)) for t in trace.tokens]
    status = ("skipped", "executed")
    hover = [f"<b>{labels[k % T]}</b> → FFN {status[e]}" for k, e in enumerate(executed.tolist())]
    # Numeric customdata (one float array) and plain strings: plotly deep-copies object arrays element by element.
    custom = np.stack([np.repeat(np.asarray(trace.routed_layers, dtype=np.float64), T),
                       trace.history_logit.reshape(-1), trace.local_logit.reshape(-1), trace.margin().reshape(-1),
                       tokens.astype(np.float64)], axis=-1)  # (R*T, 5): layer, a, b, g - tau, token
    cls = go.Scattergl if R * T > _GL_THRESHOLD else go.Scatter
    # A scalar symbol: per-point symbol arrays cost plotly ~0.1 ms of validation each (0.5 s at 30 x 130).
    return cls(
        x=tokens, y=blocks, mode="markers", name=CELLS_NAME, showlegend=False, customdata=custom, hovertext=hover,
        marker={"symbol": EXECUTED_SYMBOL, "size": size or _cell_size(T, R), "color": trace.gate.reshape(-1),
                "colorscale": GATE_SCALE, "cmin": 0.0, "cmax": 1.0, "line": {"width": 0},
                "showscale": show_scale, "colorbar": {"title": {"text": "g"}, "thickness": 12, "len": 0.8}},
        hovertemplate=("token %{x}: %{hovertext}<br>layer %{customdata[0]} (block %{y})<br>"
                       "g = %{marker.color:.4f}<br>a (history) = %{customdata[1]:.3f}<br>"
                       "b (local) = %{customdata[2]:.3f}<br>margin g − τ = %{customdata[3]:+.4f}<extra></extra>"))


def _skip_marks(trace: RoutingTrace, *, size: int | None = None) -> go.Scatter:
    """A white cross over every cell whose FFN was skipped (not hoverable: the cell below answers)."""
    blocks, tokens = np.nonzero(~trace.executed)
    R, T = trace.n_routed, trace.n_tokens
    cls = go.Scattergl if R * T > _GL_THRESHOLD else go.Scatter
    return cls(x=tokens, y=blocks + 1, mode="markers", name=SKIPPED_NAME, showlegend=False, hoverinfo="skip",
               marker={"symbol": SKIP_MARK, "size": int(0.8 * (size or _cell_size(T, R))),
                       "line": {"width": 2, "color": "rgba(255,255,255,0.95)"}})


def _legend_markers() -> list[go.Scatter]:
    return [go.Scatter(x=[None], y=[None], mode="markers", name=name, hoverinfo="skip",
                       marker={"symbol": symbol, "size": 12, "color": "#666",
                               "line": {"width": 2, "color": "white"}})
            for name, symbol in (("FFN executed", EXECUTED_SYMBOL), ("FFN skipped", LEGEND_SKIPPED_SYMBOL))]


def _prompt_boundary(fig: go.Figure, trace: RoutingTrace, **where) -> None:
    n = trace.n_prompt_tokens
    if n is not None and 0 < n < trace.n_tokens:
        fig.add_vline(x=n - 0.5, line={"dash": "dash", "color": "#888"}, annotation_text="generated →",
                      annotation_position="top right", **where)


def skip_heatmap(trace: RoutingTrace, *, selected: tuple[int, int] | None = None,
                 title: str | None = None) -> go.Figure:
    """Routed layer x token map of the gates: colour g; a white cross marks a skipped FFN.

    ``selected`` = (token, block index 0-based) draws a ring around that cell."""
    R, T = trace.n_routed, trace.n_tokens
    fig = go.Figure([_cells(trace), _skip_marks(trace), *_legend_markers()])
    if selected is not None:
        t, j = selected
        fig.add_trace(go.Scatter(x=[t], y=[j + 1], mode="markers", name="selected", hoverinfo="skip",
                                 marker={"symbol": "square-open", "size": _cell_size(T, R) + 8, "color": "#d62728",
                                         "line": {"width": 3}}))
    _prompt_boundary(fig, trace)
    fig.update_layout(
        title={"text": title or f"Skip map · {trace.variant} · τ = {trace.tau:g}"},
        xaxis=_token_axis(trace.tokens), yaxis=_block_axis(trace), plot_bgcolor="white",
        height=int(max(260, min(900, R * (_cell_size(T, R) + 3) + 170))), clickmode="event+select",
        legend={"orientation": "h", "y": 1.02, "x": 1, "xanchor": "right", "yanchor": "bottom"},
        margin={"l": 60, "r": 20, "t": 70, "b": 60})
    return fig


def skip_heatmaps(traces: Sequence[RoutingTrace], labels: Sequence[str]) -> go.Figure:
    """Skip maps of several runs of the same tokens, stacked with shared (synchronised) axes."""
    _check_same_tokens(traces)
    first = traces[0]
    R, T = first.n_routed, first.n_tokens
    fig = make_subplots(rows=len(traces), cols=1, shared_xaxes=True, shared_yaxes=True, vertical_spacing=0.04,
                        subplot_titles=[html.escape(label) for label in labels])
    for row, trace in enumerate(traces, start=1):
        fig.add_trace(_cells(trace, show_scale=row == 1), row=row, col=1)
        fig.add_trace(_skip_marks(trace), row=row, col=1)
        fig.update_yaxes(_block_axis(trace), row=row, col=1)
        fig.update_xaxes(_token_axis(first.tokens) | {"title": {"text": "token" if row == len(traces) else ""}},
                         row=row, col=1)
    per_row = max(180, R * (_cell_size(T, R) + 3) + 40)
    fig.update_layout(height=int(min(2400, per_row * len(traces) + 120)), plot_bgcolor="white",
                      title={"text": "Skip maps (synchronised axes)"}, margin={"l": 60, "r": 20, "t": 70, "b": 60})
    return fig


# -- per-token and per-layer compute ---------------------------------------------------------------
def executed_counts(trace: RoutingTrace) -> go.Figure:
    """FFNs executed per token (of R routed), coloured by the same compute scale as the token text."""
    counts = trace.executed_per_token()
    R = trace.n_routed
    fig = go.Figure(go.Bar(
        x=np.arange(trace.n_tokens), y=counts, name="FFNs executed",
        marker={"color": counts, "colorscale": COMPUTE_SCALE, "cmin": 0, "cmax": R},
        customdata=[html.escape(token_label(t, 24)) for t in trace.tokens],
        hovertemplate="token %{x}: <b>%{customdata}</b><br>%{y} of " + str(R) + " FFNs executed<extra></extra>"))
    _prompt_boundary(fig, trace)
    fig.update_layout(title={"text": "FFNs executed per token"}, xaxis=_token_axis(trace.tokens),
                      yaxis={"title": {"text": "FFNs executed"}, "range": [0, R + 0.5]}, height=300,
                      plot_bgcolor="white", margin={"l": 60, "r": 20, "t": 50, "b": 60})
    return fig


def token_quality_bars(trace: RoutingTrace) -> go.Figure:
    """Per-token KL(dense || routed) of the next-token distribution: where routing changed the model's output.

    Needs a trace recorded with ``quality=True``; the bars sit under the same token axis as the skip map."""
    if trace.quality is None:
        raise ValueError("this trace has no quality row: record it with hero.trace(..., quality=True)")
    kl = trace.quality["kl_to_dense"]
    agree = trace.quality.get("top1_agree", np.ones_like(kl))
    labels = [html.escape(token_label(t, 24)) for t in trace.tokens]
    fig = go.Figure(go.Bar(
        x=np.arange(trace.n_tokens), y=kl, name="KL to dense",
        marker={"color": np.where(agree > 0.5, "#4c78a8", "#e45756"),
                "pattern": {"shape": np.where(agree > 0.5, "", "/").tolist()}},
        customdata=np.stack([labels, np.where(agree > 0.5, "same", "differs")], -1),
        hovertemplate="token %{x}: <b>%{customdata[0]}</b><br>KL(dense‖routed) %{y:.4f} nats<br>"
                      "top-1 next token vs dense: %{customdata[1]}<extra></extra>"))
    fig.update_layout(title={"text": "Quality per token: KL(dense‖routed) of the next-token distribution "
                                     "(hatched red: top-1 differs from dense)"},
                      xaxis=_token_axis(trace.tokens), yaxis={"title": {"text": "nats"}}, height=260,
                      plot_bgcolor="white", margin={"l": 60, "r": 20, "t": 50, "b": 60}, showlegend=False)
    return fig


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
    for trace, label in zip(traces, labels, strict=True):
        fig.add_trace(go.Bar(x=block_labels(trace), y=trace.layer_skip_rates(), name=html.escape(label),
                             hovertemplate="%{x}: %{y:.1%} of tokens skipped<extra>" + html.escape(label)
                             + "</extra>"))
    fig.update_layout(title={"text": "Skip rate per routed layer"}, barmode="group", plot_bgcolor="white",
                      yaxis={"title": {"text": "tokens skipping the FFN"}, "tickformat": ".0%", "range": [0, 1]},
                      xaxis={"title": {"text": "routed layer"}}, height=320, showlegend=len(labels) > 1,
                      margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return fig


SUMMARY_LABELS = MappingProxyType({"param_skip": "param skip", "net_param_skip": "net param skip",
                  "flop_share_saved": "FLOPs saved", "skip_rate": "FFN skip rate"})


def compute_bars(traces: Sequence[RoutingTrace], labels: Sequence[str]) -> go.Figure:
    """Headline compute figures of several runs (fractions, shown as %)."""
    fig = go.Figure()
    keys = list(SUMMARY_LABELS)
    for trace, label in zip(traces, labels, strict=True):
        summary = trace.summary()
        fig.add_trace(go.Bar(x=[SUMMARY_LABELS[k] for k in keys], y=[summary[k] for k in keys],
                             name=html.escape(label), hovertemplate="%{x}: %{y:.2%}<extra>" + html.escape(label)
                             + "</extra>"))
    fig.update_layout(title={"text": "Compute"}, barmode="group", yaxis={"tickformat": ".0%"}, height=320,
                      plot_bgcolor="white", margin={"l": 60, "r": 20, "t": 50, "b": 40})
    return fig


# -- memory ----------------------------------------------------------------------------------------
def _lower_triangle(matrix: np.ndarray) -> np.ndarray:
    """Only alpha_{j,i} with i < j is defined: blank the diagonal and above."""
    out = np.array(matrix, dtype=np.float64)
    out[np.triu_indices(out.shape[0])] = np.nan
    return out


def _memory_heatmap(z: np.ndarray, trace: RoutingTrace, title: str, zmax: float | None = None) -> go.Figure:
    labels = block_labels(trace)
    fig = go.Figure(go.Heatmap(
        z=z, x=labels, y=labels, colorscale="Blues", zmin=0.0, zmax=zmax if zmax is not None else 1.0,
        hoverongaps=False, colorbar={"title": {"text": "α"}, "thickness": 12},
        hovertemplate="read at %{y} ← written at %{x}<br>α = %{z:.4f}<extra></extra>"))
    size = max(320, min(640, 18 * trace.n_routed + 140))
    fig.update_layout(title={"text": title}, height=size, plot_bgcolor="white",
                      xaxis={"title": {"text": "written at block i"}, "type": "category"},
                      yaxis={"title": {"text": "read at block j"}, "type": "category", "autorange": "reversed"},
                      margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return fig


def _check_token(trace: RoutingTrace, token: int) -> int:
    if not isinstance(token, (int, np.integer)) or not 0 <= token < trace.n_tokens:
        raise ValueError(f"token index {token!r} is out of range: the trace has {trace.n_tokens} tokens")
    return int(token)


def memory_map(trace: RoutingTrace, token: int) -> go.Figure:
    """The R x R memory-attention map alpha_{j,i} of one token (row j reads the blocks i < j)."""
    t = _check_token(trace, token)
    label = html.escape(token_label(trace.tokens[t], 24))
    return _memory_heatmap(_lower_triangle(trace.memory_attention[t]), trace,
                           f"Memory attention of token {t} “{label}”")


def mean_memory_map(trace: RoutingTrace) -> go.Figure:
    """The memory-attention map averaged over all tokens."""
    return _memory_heatmap(_lower_triangle(trace.mean_memory_attention()), trace,
                           f"Memory attention, mean over {trace.n_tokens} tokens")


def memory_fill(trace: RoutingTrace, token: int, depth: int) -> go.Figure:
    """The memory map of one token as it stands after ``depth`` routed blocks (rows > depth blank)."""
    t = _check_token(trace, token)
    if not 1 <= depth <= trace.n_routed:
        raise ValueError(f"depth must be between 1 and {trace.n_routed}, got {depth}")
    z = _lower_triangle(trace.memory_attention[t])
    z[depth:] = np.nan
    fig = _memory_heatmap(z, trace, f"Memory after {depth} of {trace.n_routed} routed blocks")
    fig.add_hrect(y0=depth - 1.5, y1=depth - 0.5, line={"color": "#d62728", "width": 2}, fillcolor="rgba(0,0,0,0)")
    return fig


def forgetting_bars(trace: RoutingTrace) -> go.Figure:
    """Per-block forgetting factors rho_j = sigmoid(eta_j): how much of the memory each write keeps."""
    rho = trace.forgetting
    fig = go.Figure(go.Bar(x=block_labels(trace), y=rho, marker={"color": "#4c78a8"},
                           hovertemplate="%{x}: ρ = %{y:.4f}<extra></extra>"))
    low = float(np.min(rho)) if rho.size else 0.0
    fig.update_layout(title={"text": "Forgetting factor ρ per routed block"}, height=280, plot_bgcolor="white",
                      yaxis={"title": {"text": "ρ"}, "range": [max(0.0, low - 0.02), 1.0]},
                      xaxis={"title": {"text": "routed layer"}}, margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return fig


def trajectories(trace: RoutingTrace, token: int) -> go.Figure:
    """g, a, b, p_hist, m_hist and nu of one token across routed depth (one panel each)."""
    t = _check_token(trace, token)
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
    fig.add_hline(y=trace.tau, line={"dash": "dash", "color": "#d62728"}, annotation_text="τ", row=1, col=1)
    step = max(1, math.ceil(trace.n_routed / 8))
    fig.update_xaxes(tickmode="array", tickvals=list(x[::step]), ticktext=labels[::step])
    label = html.escape(token_label(trace.tokens[t], 24))
    fig.update_layout(title={"text": f"Router trajectories of token {t} “{label}” (hollow = FFN skipped)"},
                      height=460, plot_bgcolor="white", margin={"l": 50, "r": 20, "t": 80, "b": 40})
    return fig


# -- comparisons -----------------------------------------------------------------------------------
def flip_codes(trace_a: RoutingTrace, trace_b: RoutingTrace) -> np.ndarray:
    """(R, T) codes: 0 both skipped, 1 both executed, 2 only A executed, 3 only B executed."""
    _check_same_tokens([trace_a, trace_b])
    a, b = trace_a.executed, trace_b.executed
    return np.where(a & b, 1, np.where(a & ~b, 2, np.where(~a & b, 3, 0)))


def flip_map(trace_a: RoutingTrace, trace_b: RoutingTrace, labels: tuple[str, str] = ("A", "B")) -> go.Figure:
    """Where two runs of the same tokens decide differently (FFN executed in one, skipped in the other)."""
    codes = flip_codes(trace_a, trace_b)
    la, lb = (html.escape(s) for s in labels)
    names = [FLIP_CODES[c].format(a=la, b=lb) for c in range(4)]
    scale = []
    for c, colour in enumerate(FLIP_COLOURS):  # a discrete colour per code on zmin=0..zmax=3
        scale += [[c / 4, colour], [(c + 1) / 4, colour]]
    R, T = codes.shape
    text = np.array(names, dtype=object)[codes]
    tokens = np.array([html.escape(token_label(t, 24)) for t in trace_a.tokens], dtype=object)
    custom = np.stack([np.broadcast_to(tokens, (R, T)), trace_a.gate, trace_b.gate, text], axis=-1)
    fig = go.Figure(go.Heatmap(
        z=codes, x=np.arange(T), y=np.arange(1, R + 1), zmin=-0.5, zmax=3.5, colorscale=scale, customdata=custom,
        xgap=1, ygap=1, colorbar={"tickvals": [0, 1, 2, 3], "ticktext": names, "thickness": 12},
        hovertemplate=("token %{x}: <b>%{customdata[0]}</b>, block %{y}<br>g " + la + " = %{customdata[1]:.4f}<br>"
                       "g " + lb + " = %{customdata[2]:.4f}<br>%{customdata[3]}<extra></extra>")))
    n_flips = int((codes >= 2).sum())
    fig.update_layout(title={"text": f"Decision flips {la} vs {lb}: {n_flips} of {R * T} "
                                     f"({n_flips / max(R * T, 1):.1%})"},
                      xaxis=_token_axis(trace_a.tokens), yaxis=_block_axis(trace_a), plot_bgcolor="white",
                      height=int(max(260, min(900, R * (_cell_size(T, R) + 3) + 170))),
                      margin={"l": 60, "r": 20, "t": 60, "b": 60})
    return fig


def layer_divergence(traces: Sequence[RoutingTrace], labels: Sequence[str]) -> go.Figure:
    """Per routed layer, how far each run departs from the first: decision flip rate and mean |Δg|."""
    _check_same_tokens(traces)
    ref = traces[0]
    fig = make_subplots(rows=1, cols=2, subplot_titles=["decision flip rate vs " + html.escape(labels[0]),
                                                        "mean |Δg| vs " + html.escape(labels[0])])
    x = block_labels(ref)
    for trace, label in zip(traces[1:], labels[1:], strict=True):
        flips = (trace.executed != ref.executed).mean(axis=1)
        dg = np.abs(trace.gate - ref.gate).mean(axis=1)
        name = html.escape(label)
        fig.add_trace(go.Scatter(x=x, y=flips, mode="lines+markers", name=name, legendgroup=name,
                                 hovertemplate="%{x}: %{y:.1%} flipped<extra>" + name + "</extra>"), row=1, col=1)
        fig.add_trace(go.Scatter(x=x, y=dg, mode="lines+markers", name=name, legendgroup=name, showlegend=False,
                                 hovertemplate="%{x}: %{y:.4f}<extra>" + name + "</extra>"), row=1, col=2)
    fig.update_yaxes(tickformat=".0%", row=1, col=1)
    fig.update_layout(title={"text": "Per-layer divergence"}, height=340, plot_bgcolor="white",
                      margin={"l": 60, "r": 20, "t": 70, "b": 50})
    return fig


def quality_lines(qualities: Sequence[dict], labels: Sequence[str], tokens: Sequence[str]) -> go.Figure:
    """Per token: NLL of the next token, KL(dense || routed), and where the top-1 prediction departs from
    dense; one line (or row of marks) per run.

    ``qualities`` are :func:`hero_core.quality.compare_to_dense` dicts on the same tokens; point i is
    the prediction made at token i (the NLL is that of token i+1)."""
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.07, row_heights=[0.4, 0.4, 0.2],
                        subplot_titles=["NLL of the next token (nats)", "KL(dense ‖ routed) (nats)",
                                        "top-1 prediction differs from dense"])
    for i, (quality, label) in enumerate(zip(qualities, labels, strict=True)):
        name = html.escape(label)
        nll = np.asarray(quality["nll"])
        fig.add_trace(go.Scatter(x=np.arange(len(nll)), y=nll, mode="lines", name=name, legendgroup=name,
                                 hovertemplate="token %{x}: %{y:.3f}<extra>" + name + "</extra>"), row=1, col=1)
        kl = np.asarray(quality["kl"])
        fig.add_trace(go.Scatter(x=np.arange(len(kl)), y=kl, mode="lines", name=name, legendgroup=name,
                                 showlegend=False, hovertemplate="token %{x}: %{y:.4f}<extra>" + name + "</extra>"),
                      row=2, col=1)
        differs = np.flatnonzero(~np.asarray(quality["top1_agree"], dtype=bool))
        fig.add_trace(go.Scatter(x=differs, y=[name] * len(differs), mode="markers", name=name, legendgroup=name,
                                 showlegend=False, marker={"symbol": "line-ns-open", "size": 12, "line": {"width": 2}},
                                 hovertemplate="token %{x}: top-1 differs<extra>" + name + "</extra>"), row=3, col=1)
        if i == 0 and "nll_dense" in quality:
            dense = np.asarray(quality["nll_dense"])
            fig.add_trace(go.Scatter(x=np.arange(len(dense)), y=dense, mode="lines", name="dense",
                                     line={"dash": "dot", "color": "#444"},
                                     hovertemplate="token %{x}: %{y:.3f}<extra>dense</extra>"), row=1, col=1)
    for row in (1, 2):
        fig.update_xaxes(_token_axis(tokens) | {"title": {"text": ""}}, row=row, col=1)
    fig.update_xaxes(_token_axis(tokens), row=3, col=1)
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=[html.escape(s) for s in labels],
                     row=3, col=1)
    fig.update_layout(title={"text": "Quality against the dense model, per token"},
                      height=600 + 20 * len(labels), plot_bgcolor="white", margin={"l": 90, "r": 20, "t": 70, "b": 60})
    return fig


# -- one decision ------------------------------------------------------------------------------------
def decision_split(trace: RoutingTrace, token: int, block: int) -> dict[str, float | bool | str]:
    """The exact parts of one decision: gate logit a + b against logit(tau).

    ``block`` is the 0-based routed-block index. ``local_only_executed`` is the counterfactual decision
    with the history logit removed at this block alone (a = 0, everything upstream unchanged)."""
    t = _check_token(trace, token)
    if not 0 <= block < trace.n_routed:
        raise ValueError(f"block index {block!r} is out of range: the trace routes {trace.n_routed} blocks")
    a = float(trace.history_logit[block, t])
    b = float(trace.local_logit[block, t])
    tau_logit = math.log(trace.tau / (1 - trace.tau))
    return {"token": t, "block": block, "layer": trace.routed_layers[block], "token_text": trace.tokens[t],
            "history_logit": a, "local_logit": b, "gate_logit": a + b, "gate": float(trace.gate[block, t]),
            "tau": trace.tau, "tau_logit": tau_logit, "margin": float(trace.gate[block, t] - trace.tau),
            "executed": bool(trace.executed[block, t]), "local_only_executed": b >= tau_logit,
            "history_flips": bool(trace.executed[block, t]) != (b >= tau_logit)}


def decision_bars(split: dict) -> go.Figure:
    """Local logit b, history logit a and their sum against the threshold logit(tau)."""
    names = ["local logit b", "history logit a", "gate logit a + b"]
    values = [split["local_logit"], split["history_logit"], split["gate_logit"]]
    colours = ["#4c78a8", "#f58518", "#54a24b" if split["executed"] else "#e45756"]
    fig = go.Figure(go.Bar(x=values, y=names, orientation="h", marker={"color": colours},
                           hovertemplate="%{y} = %{x:.4f}<extra></extra>"))
    fig.add_vline(x=split["tau_logit"], line={"dash": "dash", "color": "#d62728"},
                  annotation_text=f"logit(τ) = {split['tau_logit']:.3f}")
    verdict = "executed" if split["executed"] else "skipped"
    fig.update_layout(title={"text": f"Decision at L{split['layer']}: g = {split['gate']:.4f} → FFN {verdict}"},
                      height=260, plot_bgcolor="white", yaxis={"autorange": "reversed"},
                      margin={"l": 120, "r": 20, "t": 60, "b": 40})
    return fig


def attribution_bars(tokens: Sequence[str], scores: Sequence[float], *, title: str) -> go.Figure:
    """Attribution score per input token (positive pushes the gate towards executing the FFN)."""
    scores = np.asarray(scores, dtype=np.float64)
    colours = np.where(scores >= 0, "#54a24b", "#e45756")
    labels = [html.escape(token_label(t, 24)) for t in tokens]
    fig = go.Figure(go.Bar(x=np.arange(len(scores)), y=scores, marker={"color": colours}, customdata=labels,
                           hovertemplate="token %{x}: <b>%{customdata}</b><br>%{y:+.4f}<extra></extra>"))
    fig.update_layout(title={"text": html.escape(title)}, xaxis=_token_axis(list(tokens)), height=320,
                      yaxis={"title": {"text": "contribution to a + b"}}, plot_bgcolor="white",
                      margin={"l": 60, "r": 20, "t": 50, "b": 60})
    return fig


def attribution_html(tokens: Sequence[str], scores: Sequence[float]) -> str:
    """Tokens shaded green (pushes towards executing) or red (towards skipping) by attribution."""
    scores = np.asarray(scores, dtype=np.float64)
    scale = float(np.max(np.abs(scores))) if scores.size else 0.0
    spans = []
    for i, (token, score) in enumerate(zip(tokens, scores, strict=True)):
        share = 0.0 if scale == 0 else abs(score) / scale
        rgb = "84,162,75" if score >= 0 else "228,87,86"
        text = html.escape(token).replace("\n", "↵<br>") or "∅"
        tip = html.escape(f"token {i}: {score:+.4f}", quote=True)
        spans.append(f'<span title="{tip}" data-score="{score:.6g}" style="background:rgba({rgb},{share:.3f});'
                     f'padding:1px 0;white-space:pre-wrap">{text}</span>')
    return ('<div style="font-family:ui-monospace,monospace;line-height:1.9;font-size:0.95rem">'
            + "".join(spans) + "</div>")


def tau_curve(taus: Sequence[float], ffn_per_token: Sequence[float], n_routed: int,
              current: float | None = None) -> go.Figure:
    """FFNs executed per token as the threshold tau varies (each point a full re-run)."""
    fig = go.Figure(go.Scatter(x=list(taus), y=list(ffn_per_token), mode="lines+markers",
                               hovertemplate="τ = %{x:.2f}: %{y:.2f} FFNs per token<extra></extra>"))
    if current is not None:
        fig.add_vline(x=current, line={"dash": "dash", "color": "#d62728"}, annotation_text="τ now")
    fig.update_layout(title={"text": "Compute as the threshold moves"}, height=300, plot_bgcolor="white",
                      xaxis={"title": {"text": "τ"}, "range": [0, 1]},
                      yaxis={"title": {"text": "FFNs executed per token"}, "range": [0, n_routed + 0.5]},
                      margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return fig


# -- export ------------------------------------------------------------------------------------------
def figure_html(fig: go.Figure, title: str | None = None) -> str:
    """A standalone, offline HTML page of a figure: plotly.js is inlined, nothing loads from a CDN."""
    out = fig.to_html(include_plotlyjs=True, full_html=True, config={"displaylogo": False})
    if title:
        out = out.replace("<head>", f"<head><title>{html.escape(title)}</title>", 1)
    return out
