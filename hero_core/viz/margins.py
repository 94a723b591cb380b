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
SLACK_PX = 6
LEGEND_PX = 50  # a legend's symbol, padding and border beside its longest entry
COLOUR_BAR_PX = 80  # a vertical colour bar with a short title, beside the plot
DEFAULT_TICK_FONT = 12
_TAG = re.compile(r"<[^>]*>")


def _labels(fig: go.Figure, name: str) -> list[str]:
    """The tick texts of axis ``name``: its ``ticktext``, or on a category axis the first trace's values."""
    axis = fig.layout[name]
    texts = axis.ticktext
    if not texts and axis.type == "category" and fig.data:
        texts = getattr(fig.data[0], name[0], None)
    return [_TAG.sub("", str(t)) for t in (texts if texts is not None else ())]


def _across_px(axis, texts: list[str], rotated: bool) -> float:
    """Room (px) the tick labels ``texts`` of ``axis`` take across it: their longest text where it lies across the
    axis (a turned x label, any y label), one line's height where it lies along."""
    font = (axis.tickfont.size if axis.tickfont and axis.tickfont.size else None) or DEFAULT_TICK_FONT
    if not rotated:
        return font * 1.3
    chars = max(len(t) for t in texts) if texts else NUMBER_CHARS
    return chars * font * CHAR_WIDTH


def settle_margins(fig: go.Figure) -> go.Figure:
    """Raise ``fig``'s margins (in place) to the room its main axes and colour bars are estimated to need. Only the
    first x and y axes are read: a subplot's inner axes push no outer margin."""
    layout = fig.layout
    margin = {side: getattr(layout.margin, side) for side in "lrtb"}
    margin = {side: value if value is not None else 100 if side == "t" else 80 for side, value in margin.items()}
    need = dict(margin)
    for name, side in (("xaxis", "b"), ("yaxis", "l")):
        axis = layout[name]
        if axis.visible is False or axis.showticklabels is False or axis.side in ("top", "right"):
            continue
        texts = _labels(fig, name)
        # plotly turns crowded labels on its own ("auto" angle): text labels by the dozen are read as turned
        crowded = axis.tickangle in (None, "auto") and len(texts) > 12
        rotated = name == "yaxis" or crowded or (axis.tickangle not in (None, "auto") and abs(axis.tickangle) >= 45)
        titled = bool(axis.title and axis.title.text)
        need[side] = max(need[side], _across_px(axis, texts, rotated) + (TITLE_PX if titled else BARE_PX) + SLACK_PX)
    if any(getattr(getattr(t, "marker", None), "showscale", False) or getattr(t, "showscale", None) is not False
           and t.type in ("heatmap", "contour") for t in fig.data):
        need["r"] = max(need["r"], COLOUR_BAR_PX)
    legend = layout.legend
    names = [_TAG.sub("", t.name) for t in fig.data if t.name and t.showlegend is not False]
    if len(names) > 1 and layout.showlegend is not False and legend.orientation != "h" and (legend.x is None
                                                                                           or legend.x >= 1):
        need["r"] = max(need["r"], LEGEND_PX + max(len(n) for n in names) * DEFAULT_TICK_FONT * 0.6)
    if need != margin:
        fig.update_layout(margin={side: int(round(v)) for side, v in need.items()})
    return fig
