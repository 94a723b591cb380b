"""Figures of the depth memory: the read weights alpha_{j,i}, in three contrasts, and the forgetting factors.

A trained router's reads sit close to uniform (row j of alpha within ~0.02 of 1/(j-1)), and row 2 reads one
block with weight 1.0 by construction. Drawn as raw weights on a 0..1 scale every map looks the same, so:

* the colour scale is set by the rows that have a choice (row 3 on; 0-based index >= 2), never by row 2;
* ``mode="ratio"`` divides each weight by the uniform read 1/(j-1) (1 = no preference);
* ``mode="difference"`` subtracts the prompt's mean map: what this token reads unlike the others.

The two contrasts have a floor under their colour range (:data:`COLOUR_FLOOR`): the ratio's scale spans at least
0..2 and the difference's at least -0.1..+0.1. Without it a map whose weights differ by +-0.012 was stretched to
full colour, and a near-uniform read looked as decided as a one-hot one.
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np
import plotly.graph_objects as go

from hero_core.method.trace import RoutingTrace
from hero_core.viz.palette import DIVERGING_SCALE, MARK_COLOUR, RUN_COLOURS, titled
from hero_core.words.labels import plotly_text, token_label

MEMORY_MODES = ("weights", "ratio", "difference")
MEMORY_MODE_LABELS = {"weights": "weights α", "ratio": "ratio to uniform", "difference": "difference from the mean"}
ABOVE_UNIFORM = 1.1  # a read counts as a preference only above 1.1x uniform (rows sit within a few % of it)
# The least half-width of a contrast's colour scale around its centre (ratio 1, difference 0): a ratio of 2 (or
# 0: not read at all) or a difference of +-0.1 is the least that reaches full colour.
COLOUR_FLOOR = MappingProxyType({"ratio": 1.0, "difference": 0.1})
COLOUR_FLOOR_TEXT = ("Colour floor: the ratio's scale spans at least 0–2 and the difference's at least ±0.1, so a "
                     "smaller departure from uniform never shows in full colour.")


def block_labels(trace: RoutingTrace) -> list[str]:
    return [f"L{layer}" for layer in trace.routed_layers]


def check_token(trace: RoutingTrace, token: int) -> int:
    if not isinstance(token, (int, np.integer)) or not 0 <= token < trace.n_tokens:
        raise ValueError(f"token index {token!r} is out of range: the trace has {trace.n_tokens} tokens")
    return int(token)


def _lower_triangle(matrix: np.ndarray) -> np.ndarray:
    """Only alpha_{j,i} with i < j is defined: blank the diagonal and above."""
    out = np.array(matrix, dtype=np.float64)
    out[np.triu_indices(out.shape[0])] = np.nan
    return out


def uniform_read(n_routed: int) -> np.ndarray:
    """(R, R) the uniform read 1/j at row j (0-based: row j reads the j blocks before it), NaN where undefined."""
    rows = np.arange(n_routed, dtype=np.float64)[:, None]
    with np.errstate(divide="ignore"):
        return _lower_triangle(np.broadcast_to(1.0 / rows, (n_routed, n_routed)))


def contrast(alpha: np.ndarray, mean: np.ndarray, mode: str) -> np.ndarray:
    """(R, R) the lower triangle of ``alpha`` in ``mode`` (see the module docstring)."""
    if mode not in MEMORY_MODES:
        raise ValueError(f"unknown memory map mode {mode!r}; choose one of {', '.join(MEMORY_MODES)}")
    z = _lower_triangle(alpha)
    if mode == "ratio":
        return z / uniform_read(z.shape[0])
    if mode == "difference":
        return z - _lower_triangle(mean)
    return z


def colour_range(z: np.ndarray, mode: str) -> tuple[float, float]:
    """(zmin, zmax) over the rows with a choice (0-based index >= 2): row 1 reads one block with weight 1.

    A contrast is centred on "no preference" (ratio 1, difference 0) and spans at least :data:`COLOUR_FLOOR`
    either side, so a departure smaller than the floor never reaches full colour."""
    informative = z[2:][np.isfinite(z[2:])]
    if mode == "weights":
        if informative.size == 0:
            return 0.0, 1.0
        low, high = float(informative.min()), float(informative.max())
        return (low, high) if high > low else (0.0, max(high, 1e-9))
    centre = 1.0 if mode == "ratio" else 0.0
    span = float(np.max(np.abs(informative - centre))) if informative.size else 0.0
    span = max(span, COLOUR_FLOOR[mode])
    return centre - span, centre + span


def _memory_heatmap(z: np.ndarray, trace: RoutingTrace, title: str, mode: str = "weights",
                    selected_block: int | None = None) -> go.Figure:
    labels = block_labels(trace)
    zmin, zmax = colour_range(z, mode)
    scale = "Blues" if mode == "weights" else DIVERGING_SCALE
    unit = {"weights": "α", "ratio": "α ÷ uniform", "difference": "α − mean α"}[mode]
    uniform = np.nan_to_num(uniform_read(trace.n_routed), nan=0.0)
    fig = go.Figure(go.Heatmap(
        z=z, x=labels, y=labels, colorscale=scale, zmin=zmin, zmax=zmax,
        hoverongaps=False, customdata=uniform, colorbar={"title": {"text": unit}, "thickness": 12},
        hovertemplate="read at %{y} ← written at %{x}<br>" + unit + " = %{z:.4f}<br>"
                      "uniform α = %{customdata:.4f}<extra></extra>"))
    if selected_block is not None and 0 <= selected_block < trace.n_routed:
        fig.add_hrect(y0=selected_block - 0.5, y1=selected_block + 0.5, line={"color": MARK_COLOUR, "width": 3},
                      fillcolor="rgba(0,0,0,0)", name="selected block")
    size = max(320, min(640, 18 * trace.n_routed + 140))
    fig.update_layout(title=titled(title, [trace]), height=size,
                      xaxis={"title": {"text": "written at block i"}, "type": "category"},
                      yaxis={"title": {"text": "read at block j"}, "type": "category", "autorange": "reversed"},
                      margin={"l": 60, "r": 20, "t": 70, "b": 50})
    return fig


def memory_map(trace: RoutingTrace, token: int, *, mode: str = "weights",
               selected_block: int | None = None) -> go.Figure:
    """The R x R memory-attention map alpha_{j,i} of one token (row j reads the blocks i < j), in ``mode``."""
    t = check_token(trace, token)
    label = plotly_text(token_label(trace.tokens[t], 24))
    z = contrast(trace.memory_attention[t], trace.mean_memory_attention(), mode)
    return _memory_heatmap(z, trace, f"Memory attention of token {t} “{label}” · {MEMORY_MODE_LABELS[mode]}", mode,
                           selected_block)


def mean_memory_map(trace: RoutingTrace, *, mode: str = "weights", selected_block: int | None = None) -> go.Figure:
    """The memory-attention map averaged over all tokens (``difference`` is zero here, so it is refused)."""
    if mode == "difference":
        raise ValueError("the mean map's difference from itself is zero: choose weights or ratio")
    mean = trace.mean_memory_attention()
    return _memory_heatmap(contrast(mean, mean, mode), trace,
                           f"Memory attention, mean over {trace.n_tokens} tokens · {MEMORY_MODE_LABELS[mode]}", mode,
                           selected_block)


def memory_fill(trace: RoutingTrace, token: int, depth: int, *, mode: str = "weights") -> go.Figure:
    """The memory map of one token as it stands after ``depth`` routed blocks (rows > depth blank)."""
    t = check_token(trace, token)
    if not 1 <= depth <= trace.n_routed:
        raise ValueError(f"depth must be between 1 and {trace.n_routed}, got {depth}")
    z = contrast(trace.memory_attention[t], trace.mean_memory_attention(), mode)
    z[depth:] = np.nan
    return _memory_heatmap(z, trace, f"Memory after {depth} of {trace.n_routed} routed blocks", mode,
                           selected_block=depth - 1)


def memory_reads(trace: RoutingTrace, token: int, depth: int, top: int = 3) -> dict:
    """What ``token`` reads at routed block ``depth`` (1-based): the top reads with their ratio to uniform.

    ``preferred`` lists only the reads above :data:`ABOVE_UNIFORM` x uniform; ``even`` is True when there is none
    (a read that is no more than uniform says nothing about which block the history head wants)."""
    t = check_token(trace, token)
    if not 1 <= depth <= trace.n_routed:
        raise ValueError(f"depth must be between 1 and {trace.n_routed}, got {depth}")
    row = np.asarray(trace.memory_attention[t, depth - 1, : depth - 1], dtype=np.float64)
    if row.size == 0:
        return {"n_read": 0, "uniform": float("nan"), "top": [], "preferred": [], "even": True}
    uniform = 1.0 / row.size
    order = np.argsort(row)[::-1][:top]
    reads = [{"layer": trace.routed_layers[i], "block": int(i), "weight": float(row[i]),
              "ratio": float(row[i] / uniform)} for i in order]
    preferred = [r for r in reads if r["ratio"] > ABOVE_UNIFORM]
    return {"n_read": int(row.size), "uniform": uniform, "top": reads, "preferred": preferred,
            "even": not preferred}


INITIAL_NAME = "initial ρ"  # the reference line at rho's value before training


def forgetting_bars(trace: RoutingTrace) -> go.Figure:
    """Per-block forgetting factors rho_j = sigmoid(eta_j): how much of the memory each write keeps, against a
    dashed line at rho's initial value (``trace.forgetting_init``; absent when the trace does not record it), so
    bars that never left it show as bars that end on the line."""
    rho = trace.forgetting
    initial = trace.forgetting_init
    change = np.zeros_like(rho) if initial is None else rho - initial
    moved = "" if initial is None else f"<br>change from {initial:g}: " + "%{customdata:+.4f}"
    fig = go.Figure(go.Bar(x=block_labels(trace), y=rho, marker={"color": RUN_COLOURS[0]}, name="ρ",
                           customdata=change, hovertemplate="%{x}: ρ = %{y:.4f}" + moved + "<extra></extra>"))
    low = float(np.min(rho)) if rho.size else 0.0
    if initial is not None:
        low = min(low, initial)
        # a line trace, not a layout shape: it appears in the legend and in exported figures' data
        fig.add_trace(go.Scatter(x=block_labels(trace), y=np.full(len(rho), initial), mode="lines",
                                 name=f"{INITIAL_NAME} = {initial:g}", line={"color": MARK_COLOUR, "dash": "dash"},
                                 hoverinfo="skip"))
    title = "Forgetting factor ρ per routed block" + ("" if initial is not None else " (initial value unknown)")
    fig.update_layout(title=titled(title, [trace]), height=300, showlegend=initial is not None,
                      legend={"orientation": "h", "y": 1.02, "x": 1, "xanchor": "right", "yanchor": "bottom"},
                      yaxis={"title": {"text": "ρ"}, "range": [max(0.0, low - 0.02), 1.0]},
                      xaxis={"title": {"text": "routed layer"}}, margin={"l": 60, "r": 20, "t": 70, "b": 50})
    return fig
