"""Shared axes of the token x layer figures: windows over long prompts, collision-free tick labels, cell sizes.

Sizes are planned for a plot about :data:`PLOT_WIDTH_PX` wide (Streamlit's wide layout): a long prompt gets a
window of at most :data:`MAX_WINDOW` tokens, so a cell never drops below :data:`MIN_CELL_PX`. Every token is
labelled while a label fits its cell (the font shrinks from 11 to 8 px first: up to ~80 visible tokens); beyond that
labels are thinned until neighbours sit :data:`LABEL_PX` apart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from hero_core.method.trace import RoutingTrace
from hero_core.words.labels import continued_from, display_tokens, plotly_text

# The plot area cell sizes and label spacing are planned for: Streamlit's wide layout minus the sidebar, the margins
# and the colour bar. Measured in headless Chromium: 787 px in a 1400-px window with the sidebar open; 720 leaves
# room for the common 1366-px laptop screen (at 900, labels planned 14 px apart sat 12.3 px apart on screen).
PLOT_WIDTH_PX = 720
MIN_CELL_PX = 8  # below this a cell cannot be clicked or read: the window shrinks instead
MAX_CELL_PX = 22
MAX_WINDOW = PLOT_WIDTH_PX // MIN_CELL_PX  # the most tokens one skip map shows at once (90)
TICK_FONT_PX = (8, 11)  # the smallest and largest tick-label font; a rotated label needs its font size plus a gap
LABEL_GAP_PX = 1
LABEL_PX = TICK_FONT_PX[0] + LABEL_GAP_PX  # the least room one rotated label needs along the axis (9 px)
MAX_TICK_LABELS = MAX_WINDOW  # labels one axis carries at most (a wider view labels every k-th token)


# -- axes ----------------------------------------------------------------------------------------
def clamp_window(n_tokens: int, window: tuple[int, int] | None) -> tuple[int, int]:
    """(first, last) token shown, inclusive, clamped to the trace; None: every token."""
    if window is None:
        return 0, n_tokens - 1
    first, last = (int(v) for v in window)
    first = min(max(first, 0), n_tokens - 1)
    return first, min(max(last, first), n_tokens - 1)


def tick_font(cell_px: float) -> int:
    """The tick-label font (px) for labels ``cell_px`` apart: as large as fits, within :data:`TICK_FONT_PX`.

    Why shrink before thinning: at 60 tokens an 11 px label needs 14 px and only every other token was labelled,
    so a reader could not name the token under a cell; 10 px fits every one of them."""
    return int(min(TICK_FONT_PX[1], max(TICK_FONT_PX[0], math.floor(cell_px) - LABEL_GAP_PX)))


def tick_step(n_visible: int, cell_px: float) -> int:
    """Label every k-th token so that neighbouring labels sit at least :data:`LABEL_PX` apart (at the smallest
    font); every token while they fit."""
    return max(1, math.ceil(LABEL_PX / max(cell_px, 1e-9)), math.ceil(n_visible / MAX_TICK_LABELS))


def token_axis(tokens: Sequence[str], window: tuple[int, int] | None = None) -> dict:
    """Token axis over ``window`` (all tokens by default); ticks are global, so panning keeps them in place.

    ``ticklabeloverflow`` "allow": plotly's default measures every label's box on every draw to hide those past the
    figure's edge, a quarter of a second per redraw of the skip map's token labels (docs/experiments/app-latency);
    these labels sit inside the plot's width."""
    T = len(tokens)
    first, last = clamp_window(T, window)
    n_visible = last - first + 1
    cell_px = PLOT_WIDTH_PX / n_visible
    step = tick_step(n_visible, cell_px)
    ticks = list(range(first % step, T, step))
    labels = display_tokens(tokens)
    return {"tickmode": "array", "tickvals": ticks, "ticktext": [plotly_text(labels[t]) for t in ticks],
            "tickfont": {"size": tick_font(cell_px * step)},
            "range": [first - 0.5, last + 0.5], "tickangle": -90 if n_visible > 12 else 0,
            "title": {"text": "token"}, "automargin": True, "ticklabeloverflow": "allow"}


def hover_labels(tokens: Sequence[str]) -> list[str]:
    """Per token, the hover name: its label, and for a continuation piece of a split character which piece."""
    labels = display_tokens(tokens, 24)
    out = []
    for i, source in enumerate(continued_from(tokens)):
        text = plotly_text(labels[i])
        out.append(text if source is None else f"{text} (byte piece of token {source})")
    return out


def indexed_hover(tokens: Sequence[str]) -> list[str]:
    """Per token, ``token i: <b>label</b>``: the index and text a hover names.

    Why not ``%{x}`` in a hovertemplate: on an axis with array ticks plotly formats x through the tick text, so
    token 50 hovered as "token 4: 4" and block 3 as "block L3"; the index must travel with the point."""
    return [f"token {i}: <b>{label}</b>" for i, label in enumerate(hover_labels(tokens))]


def block_axis(trace: RoutingTrace, reverse: bool = False, size: int | None = None) -> dict:
    R = trace.n_routed
    step = max(1, math.ceil(R / 32), math.ceil(12 / (size + 3)) if size else 1)  # 12 px: one label's height
    ticks = list(range(1, R + 1, step))
    axis = {"tickmode": "array", "tickvals": ticks, "ticktext": [f"L{trace.routed_layers[j - 1]}" for j in ticks],
            "title": {"text": "routed layer"}, "ticklabeloverflow": "allow"}
    axis["range"] = [R + 0.5, 0.5] if reverse else [0.5, R + 0.5]
    return axis


def cell_size(n_tokens: int, n_blocks: int) -> int:
    """Marker size (px) so that ``n_tokens`` visible cells roughly tile the plot; never under MIN_CELL_PX
    when ``n_tokens`` <= MAX_WINDOW (a longer prompt gets a window, not smaller cells)."""
    return int(max(4, min(MAX_CELL_PX, PLOT_WIDTH_PX // max(n_tokens, 1), 600 // max(n_blocks, 1))))


