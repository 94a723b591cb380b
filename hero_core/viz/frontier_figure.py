"""The held-out skip-quality frontier as a live figure: a router among its twins and the fixed references.

Drawn from the summary that ships beside the bundled checkpoints (``hero_core/checkpoints/measured.json``, key
``frontier``: per run and domain, points of param skip, perplexity ratio and its 95 % interval); nothing is measured
here. The docs' figure (docs/figures/frontier.png, :func:`bundled_frontier_chart`) is the same chart of the bundled
budgets, drawn from docs/results.json and exported through :mod:`hero_core.viz.figure_export`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from hero_core.eval.frontier.measured import frontier_curves
from hero_core.eval.frontier.net_axis import net_curves
from hero_core.viz.palette import DENSE_COLOUR, RUN_COLOURS, run_colour
from hero_core.words.reference_labels import PAPER_BUDGETS, PAPER_BUDGETS_LABEL, REFERENCE_LABELS

# references in fixed, muted styles so the routers (coloured by run) stand out; dashes tell them apart in grey print
REFERENCE_STYLE = {"static": ("#B2182B", "dot"), "random": (DENSE_COLOUR, "dashdot"),
                   "expert_choice": ("#8C6D31", "dash"), "oracle": ("#666666", "longdash")}
ROUTER_DASHES = ("solid", "dash", "dashdot")  # routers' line styles, one per pass through the run colours
VIEW_TOP = 4.0  # the opening view's highest ratio: a reference 4x worse than dense is out of the comparison's range
# The docs' figure: the default, the paper-width recipe it resizes and the larger budgets at both widths, with twins
# (a router not measured is left out).
DOCS_ROUTERS = ("hero-10-r7", "hero-10-r4", "hero-25-r7", "hero-25", "hero-40-r7", "hero-40")
DOCS_TOP = 100.0  # the docs' figure's highest ratio: above it only the far end of random skipping (its numbers are in
# the tables); the log axis would otherwise spend half its height on ratios of 10^2 to 10^4
AXIS_WORDS = {"param": "param skip", "net": "FLOPs saved net"}  # the x axis: the paper's metric, or net of the router
DOCS_SIZE = (1400, 560)  # px: three panels side by side with a legend of eleven runs under them
NET_VIEW = (32.0, 10.0)  # the net figure's view: net saving up to 32 % and ratios up to 10, where budgets are compared
# (the param-skip figure holds the far ends)


def frontier_chart(curves: dict[str, dict], domains: list[str], *, mark: dict[str, float] | None = None,
                   ratio_top: float | None = None, budgets: Sequence[float] = (), axis: str = "param") -> go.Figure:
    """One panel per domain: perplexity ratio to dense (log axis, with its 95 % interval as error bars) against
    param skip, for every run in ``curves`` (routers first, then the references, each labelled with its caveat).
    ``mark`` (domain -> param skip) draws the skip the comparison is read at, and the axes open around it (up to
    twice that skip and a ratio of :data:`VIEW_TOP`; plotly's autoscale shows every point). Without ``mark``,
    ``ratio_top`` cuts the y axis at that ratio; ``budgets`` (param skip %) are drawn as the paper's budgets.
    ``axis`` names what the points' x is (:data:`AXIS_WORDS`): curves from
    :func:`hero_core.eval.frontier.net_axis.net_curves` are drawn with ``axis="net"``."""
    fig = make_subplots(rows=1, cols=len(domains), subplot_titles=domains, shared_yaxes=True,
                        horizontal_spacing=0.04)
    routers = [n for n in curves if n not in REFERENCE_LABELS]
    runs = [*routers, *(n for n in REFERENCE_LABELS if n in curves)]
    for col, domain in enumerate(domains, start=1):
        for index, name in enumerate(runs):
            points = curves[name].get(domain) or []
            if points:
                fig.add_trace(_curve(name, domain, points, routers, first=index == 0, legend=col == 1,
                                     axis=AXIS_WORDS[axis]), row=1, col=col)
        _panel_lines(fig, col, None if not mark else mark.get(domain), budgets, AXIS_WORDS[axis])
    if mark:
        # twice the compared skip, and at least 5 points: a run saving little (or nothing, net) still shows its trade
        _open_near(fig, max(2 * max(mark.values()), 0.05), left=min(0.0, *mark.values()))
    elif ratio_top is not None:
        _cut_at(fig, ratio_top)
    fig.update_yaxes(type="log")  # every panel: a shared range is in log10 units, meaningless on a linear axis
    fig.update_yaxes(title_text="perplexity ratio to dense (log)", row=1, col=1)
    fig.update_layout(title={"text": "Held-out frontier: lower is better, 1 = the dense model"}, height=430,
                      legend={"orientation": "h", "y": -0.22}, margin={"t": 70, "b": 40})
    return fig


def _curve(name: str, domain: str, points: list, routers: list[str], *, first: bool, legend: bool,
           axis: str) -> go.Scatter:
    """One run's curve in one panel: a reference in its fixed style, a router in its run colour (the first drawn
    thicker), the 95 % interval as error bars."""
    if name in REFERENCE_STYLE:
        colour, dash = REFERENCE_STYLE[name]
        label = REFERENCE_LABELS[name]
    else:
        index = routers.index(name)
        # past the palette's seven colours a colour comes back: its line style then tells the two runs apart
        colour, dash, label = run_colour(index), ROUTER_DASHES[index // len(RUN_COLOURS) % len(ROUTER_DASHES)], name
    skip, ratio, low, high = (list(v) for v in zip(*points, strict=True))
    return go.Scatter(
        x=[100 * s for s in skip], y=ratio, mode="lines+markers", name=label, legendgroup=name, showlegend=legend,
        line={"color": colour, "dash": dash, "width": 2.5 if first else 1.6}, marker={"size": 5},
        error_y={"type": "data", "symmetric": False, "array": [h - r for h, r in zip(high, ratio, strict=True)],
                 "arrayminus": [r - lo for r, lo in zip(ratio, low, strict=True)], "thickness": 1, "width": 2},
        hovertemplate=f"{label}<br>{axis} %{{x:.1f}} %<br>ppl ratio %{{y:.3f}}<extra>{domain}</extra>")


def _panel_lines(fig: go.Figure, col: int, mark: float | None, budgets: Sequence[float], axis: str) -> None:
    """A panel's lines: dense at 1, the skip the comparison is read at (``mark``), the paper's budgets."""
    fig.add_hline(y=1.0, line={"color": DENSE_COLOUR, "width": 1}, row=1, col=col)
    if mark is not None:
        fig.add_vline(x=100 * mark, line={"dash": "dot", "width": 1}, row=1, col=col)
    for k, budget in enumerate(budgets):  # one label per panel, on the first budget (plotly names an empty one)
        named = {"annotation_text": PAPER_BUDGETS_LABEL, "annotation_font_size": 10,
                 "annotation_position": "top left"} if k == 0 else {}
        fig.add_vline(x=budget, line={"color": "#BBBBBB", "width": 1}, row=1, col=col, **named)
    fig.update_xaxes(title_text=f"{axis} %", row=1, col=col)


def _open_near(fig: go.Figure, right: float, left: float = 0.0) -> None:
    """Open on the neighbourhood of the comparison, from ``left`` (below 0 only on the net axis, where a run can cost
    more than dense) up to ``right``: at high skip the ratios run to 10^4 and would flatten it."""
    near = [y for trace in fig.data for x, y in zip(trace.x, trace.y, strict=True) if 100 * left <= x <= 100 * right]
    fig.update_xaxes(range=[100 * left - (1 if left < 0 else 0), 100 * right])
    if near:
        top = min(max(near), VIEW_TOP)
        fig.update_yaxes(range=[math.log10(min(near)) - 0.03, math.log10(top) + 0.03])


def _cut_at(fig: go.Figure, ratio_top: float) -> None:
    """The y axis cut at ``ratio_top``."""
    shown = [y for trace in fig.data for y in trace.y if y <= ratio_top]
    if shown:
        fig.update_yaxes(range=[math.log10(min(shown)) - 0.03, math.log10(ratio_top)])


def bundled_frontier_chart(frontier: dict, routers: Sequence[str] = DOCS_ROUTERS) -> go.Figure:
    """The docs' frontier: ``routers`` with the runs each is read against (its twins) and the references, from the
    ``frontier`` of docs/results.json, cut at :data:`DOCS_TOP` with the paper's budgets marked."""
    curves: dict[str, dict] = {}
    for router in routers:
        curves |= {name: curve for name, curve in frontier_curves(frontier, router).items() if name not in curves}
    fig = frontier_chart(curves, list(frontier["domains"]), ratio_top=DOCS_TOP, budgets=PAPER_BUDGETS)
    # a page of its own, not a themed app: a white template (the app's figures leave the background to the theme)
    fig.update_layout(template="plotly_white", width=DOCS_SIZE[0], height=DOCS_SIZE[1], title={"text": (
        f"Held-out frontier, {frontier['backbone']} ({frontier['limit']} texts per domain, {frontier['max_tokens']} "
        f"tokens each): lower is better, 1 = the dense model; y cut at {DOCS_TOP:g}")})
    return fig


def bundled_net_frontier_chart(frontier: dict, profiles: dict, routers: Sequence[str] = DOCS_ROUTERS) -> go.Figure:
    """The docs' frontier against FLOPs saved net: ``routers`` with their twins and the references, each point moved
    to what its run saves once ``profiles`` (:func:`hero_core.eval.frontier.net_axis.run_profiles`) charge its router
    and adapters; the paper's budgets left off (they are param skip, on another backbone)."""
    curves: dict[str, dict] = {}
    for router in routers:
        curves |= {name: curve for name, curve in frontier_curves(frontier, router).items() if name not in curves}
    net = net_curves(curves, list(frontier["domains"]), frontier["max_tokens"], profiles)
    fig = frontier_chart(net, list(frontier["domains"]), ratio_top=NET_VIEW[1], axis="net")
    for col in range(1, len(frontier["domains"]) + 1):  # left of 0 a run spends more than dense
        fig.add_vline(x=0, line={"color": "#888888", "width": 1}, row=1, col=col)
    fig.update_xaxes(range=[-8, NET_VIEW[0]])
    fig.update_layout(template="plotly_white", width=DOCS_SIZE[0], height=DOCS_SIZE[1], title={"text": (
        f"Held-out frontier against FLOPs saved net, {frontier['backbone']} ({frontier['limit']} texts per domain): "
        "lower is better, 1 = dense; left of 0 a run costs more than dense")})
    return fig
