"""Margins that already hold what plotly would push them to, so a chart is drawn once.

Why: plotly draws a figure, then measures its tick labels, colour bars and legends; where they need more room than
the figure's margins (``automargin``), it changes the margins and draws the whole figure a second time. In the app
that happened to nearly every chart (rotated token labels pushed the bottom margin from 60 to ~78 px, layer labels
the left one, every colour bar the right one), and the second draw was about a third of Chromium's time after a
skip-map click (docs/experiments/app-latency). :func:`settle_margins` raises each margin to an estimate of that
room beforehand; ``automargin`` stays on, so a label longer than estimated still gets its room (at the old cost of
a second draw) rather than being cut off.
"""

from __future__ import annotations

import re

import plotly.graph_objects as go

CHAR_WIDTH = 0.65  # a tick label's width per character, in units of its font size (plotly's sans-serif)
TITLE_PX = 48  # an axis title, its standoff and the tick padding (measured: 67 px pushed below one line of labels)
BARE_PX = 16  # the tick padding alone, on an axis with no title
NUMBER_CHARS = 5  # a numeric axis's labels ("0.125", "1e-4"): text the figure does not spell out
SLACK_PX = 10
LEGEND_PX = 50  # a legend's symbol, padding and border beside its longest entry
COLOUR_BAR_PX = 80  # a vertical colour bar with a short title, beside the plot
DEFAULT_TICK_FONT = 12
_TAG = re.compile(r"<[^>]*>")


def _labels(fig: go.Figure, name: str) -> list[str]:
    """The tick texts of axis ``name``: its ``ticktext``, or on a category axis the first trace's values."""
    axis = fig.layout[name]
    texts = axis.ticktext
    if not texts and fig.data:  # a category axis (set, or strings plotly reads as one) labels the trace's values
        values = getattr(fig.data[0], name[0], None)
        if values is not None and len(values) and (axis.type == "category" or isinstance(values[0], str)):
            texts = values
    return [_TAG.sub("", str(t)) for t in (texts if texts is not None else ())]


def _across_px(axis, texts: list[str], rotated: bool) -> float:
    """Room (px) the tick labels ``texts`` of ``axis`` take across it: their longest text where it lies across the
    axis (a turned x label, any y label), one line's height where it lies along."""
    font = (axis.tickfont.size if axis.tickfont and axis.tickfont.size else None) or DEFAULT_TICK_FONT
    if not rotated:
        return font * 1.3
    chars = max(len(t) for t in texts) if texts else NUMBER_CHARS
    return chars * font * CHAR_WIDTH


def _colour_bar_px(trace) -> float:
    """Room a trace's vertical colour bar takes right of the plot: its bar and its labels (named ticks, e.g. the flip
    map's four outcomes, are as wide as their longest name)."""
    bar = trace.colorbar if trace.type in ("heatmap", "contour") else getattr(trace.marker, "colorbar", None)
    texts = [_TAG.sub("", str(t)) for t in ((bar.ticktext if bar is not None else None) or ())]
    if not texts:
        return COLOUR_BAR_PX
    # a colour bar's labels are set smaller than tick labels: ~0.45 of the font a character (the flip map, measured)
    return max(COLOUR_BAR_PX, 60 + max(len(t) for t in texts) * DEFAULT_TICK_FONT * 0.45)


def _shows_colour_bar(trace) -> bool:
    if trace.type in ("heatmap", "contour"):
        return trace.showscale is not False
    return bool(getattr(getattr(trace, "marker", None), "showscale", False))


def _margins(layout) -> dict[str, float]:
    """The figure's margins as set, plotly's defaults (80 px, 100 on top) where not."""
    margin = {side: getattr(layout.margin, side) for side in "lrtb"}
    return {side: value if value is not None else 100 if side == "t" else 80 for side, value in margin.items()}


def _axis_room(fig: go.Figure, name: str) -> tuple[str, float] | None:
    """The margin axis ``name`` pushes (``b``, ``l`` or ``r``) and the room its labels and title take there; None for
    an axis that shows no labels on a side with a margin we settle."""
    axis = fig.layout[name]
    if axis.visible is False or axis.showticklabels is False or axis.side == "top":
        return None
    side = "b" if name.startswith("xaxis") else "r" if axis.side == "right" else "l"
    texts = _labels(fig, name)
    # plotly turns crowded labels on its own ("auto" angle): text labels by the dozen are read as turned
    crowded = axis.tickangle in (None, "auto") and len(texts) > 12
    rotated = side != "b" or crowded or (axis.tickangle not in (None, "auto") and abs(axis.tickangle) >= 45)
    titled = bool(axis.title and axis.title.text)
    return side, _across_px(axis, texts, rotated) + (TITLE_PX if titled else BARE_PX) + SLACK_PX


def _right_legend_px(fig: go.Figure) -> float:
    """Room a legend shown right of the plot takes (0 where none is: hidden, horizontal or placed inside)."""
    layout, legend = fig.layout, fig.layout.legend
    names = [_TAG.sub("", t.name) for t in fig.data if t.name and t.showlegend is not False]
    # plotly shows a legend once a figure has two traces, even if only one of them is listed
    shown = layout.showlegend is True or (layout.showlegend is None and len(fig.data) > 1 and names)
    if not shown or legend.orientation == "h" or (legend.x is not None and legend.x < 1):
        return 0.0
    return LEGEND_PX + max(len(n) for n in names) * DEFAULT_TICK_FONT * 0.6


def settle_margins(fig: go.Figure) -> go.Figure:
    """Raise ``fig``'s margins (in place) to the room its axes, colour bars and right-hand legend are estimated to
    need. Every x axis showing labels counts for the bottom margin and every y axis for the left one: an inner
    subplot's labels push nothing, so that may leave a little room unused, never too little."""
    margin = _margins(fig.layout)
    need = dict(margin)
    for name in (n for n in fig.layout if n.startswith(("xaxis", "yaxis"))):
        room = _axis_room(fig, name)
        if room is not None:
            need[room[0]] = max(need[room[0]], room[1])
    bars = [_colour_bar_px(trace) for trace in fig.data if _shows_colour_bar(trace)]
    need["r"] = max(need["r"], *bars, _right_legend_px(fig))
    if need != margin:
        fig.update_layout(margin={side: int(round(v)) for side, v in need.items()})
    return fig
