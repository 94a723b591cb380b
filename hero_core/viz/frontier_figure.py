"""The held-out skip-quality frontier as a live figure: a router among its twins and the fixed references.

Drawn from the summary that ships beside the bundled checkpoints (``hero_core/checkpoints/measured.json``, key
``frontier``: per run and domain, points of param skip, perplexity ratio and its 95 % interval); nothing is measured
here. The static figure of docs/figures/frontier.png comes from the same numbers (scripts/make_frontier.py).
"""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..eval.frontier import REFERENCE_LABELS
from .palette import DENSE_COLOUR, run_colour

# references in fixed, muted styles so the routers (coloured by run) stand out; dashes tell them apart in grey print
REFERENCE_STYLE = {"static": ("#B2182B", "dot"), "random": (DENSE_COLOUR, "dashdot"),
                   "expert_choice": ("#8C6D31", "dash"), "oracle": ("#666666", "longdash")}
VIEW_TOP = 4.0  # the opening view's highest ratio: a reference 4x worse than dense is out of the comparison's range


def frontier_chart(curves: dict[str, dict], domains: list[str], *, mark: dict[str, float] | None = None) -> go.Figure:
    """One panel per domain: perplexity ratio to dense (log axis, with its 95 % interval as error bars) against
    param skip, for every run in ``curves`` (routers first, then the references, each labelled with its caveat).
    ``mark`` (domain -> param skip) draws the skip the comparison is read at, and the axes open around it (up to
    twice that skip and a ratio of :data:`VIEW_TOP`; plotly's autoscale shows every point)."""
    fig = make_subplots(rows=1, cols=len(domains), subplot_titles=domains, shared_yaxes=True,
                        horizontal_spacing=0.04)
    routers = [n for n in curves if n not in REFERENCE_LABELS]
    for col, domain in enumerate(domains, start=1):
        for index, name in enumerate([*routers, *(n for n in REFERENCE_LABELS if n in curves)]):
            points = curves[name].get(domain) or []
            if not points:
                continue
            if name in REFERENCE_STYLE:
                colour, dash = REFERENCE_STYLE[name]
                label = REFERENCE_LABELS[name]
            else:
                colour, dash, label = run_colour(routers.index(name)), "solid", name
            skip, ratio, low, high = (list(v) for v in zip(*points, strict=True))
            fig.add_trace(go.Scatter(
                x=[100 * s for s in skip], y=ratio, mode="lines+markers", name=label, legendgroup=name,
                showlegend=col == 1, line={"color": colour, "dash": dash, "width": 2.5 if index == 0 else 1.6},
                marker={"size": 5},
                error_y={"type": "data", "symmetric": False, "array": [h - r for h, r in zip(high, ratio, strict=True)],
                         "arrayminus": [r - lo for r, lo in zip(ratio, low, strict=True)], "thickness": 1, "width": 2},
                hovertemplate=f"{label}<br>param skip %{{x:.1f}} %<br>ppl ratio %{{y:.3f}}<extra>{domain}</extra>"),
                row=1, col=col)
        fig.add_hline(y=1.0, line={"color": DENSE_COLOUR, "width": 1}, row=1, col=col)
        if mark and domain in mark:
            fig.add_vline(x=100 * mark[domain], line={"dash": "dot", "width": 1}, row=1, col=col)
        fig.update_xaxes(title_text="param skip %", row=1, col=col)
    if mark:  # open on the neighbourhood of the comparison: at high skip the ratios run to 10^4 and flatten it
        right = 2 * max(mark.values())
        near = [y for trace in fig.data for x, y in zip(trace.x, trace.y, strict=True) if x <= 100 * right]
        fig.update_xaxes(range=[0, 100 * right])
        if near:
            top = min(max(near), VIEW_TOP)
            fig.update_yaxes(range=[math.log10(min(near)) - 0.03, math.log10(top) + 0.03])
    fig.update_yaxes(type="log")  # every panel: a shared range is in log10 units, meaningless on a linear axis
    fig.update_yaxes(title_text="perplexity ratio to dense (log)", row=1, col=1)
    fig.update_layout(title={"text": "Held-out frontier: lower is better, 1 = the dense model"}, height=430,
                      legend={"orientation": "h", "y": -0.22}, margin={"t": 70, "b": 40})
    return fig
