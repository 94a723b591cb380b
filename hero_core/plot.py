"""Pictures of routing traces in one import: ``from hero_core import load_hero, plot``.

    hero = load_hero()
    trace = hero.trace("def add(a, b):\\n    return a + b")
    plot.skip_map(trace).show()

Every function takes :class:`~hero_core.RoutingTrace` objects (live or loaded with ``RoutingTrace.load``) and
returns a plotly ``Figure``: ``.show()`` in a notebook, ``.write_html(path)`` or ``.write_image(path)`` to keep it.
The app draws the same figures (hero_core.viz holds them; this module is their stable public name).
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from hero_core.method.trace import RoutingTrace
from hero_core.viz.figures import (
    compute_bars,
    executed_counts,
    flip_map,
    layer_divergence,
    layer_skip_bars,
    skip_heatmap,
    skip_heatmaps,
    token_quality_bars,
    trajectories,
)
from hero_core.viz.memory_figures import forgetting_bars, mean_memory_map, memory_fill, memory_map


def skip_map(trace: RoutingTrace, **options) -> go.Figure:
    """Layer-by-token skip map: a filled square where the FFN ran, hollow where the token skipped it; colour = gate g
    (options as :func:`hero_core.viz.figures.skip_heatmap`: ``selected``, ``title``, ``window``)."""
    return skip_heatmap(trace, **options)


def skip_maps(traces: Sequence[RoutingTrace], labels: Sequence[str]) -> go.Figure:
    """The skip maps of several runs of one prompt, stacked on one token axis."""
    return skip_heatmaps(traces, labels)


def hero_vs_local(hero_trace: RoutingTrace, local_trace: RoutingTrace,
                  labels: tuple[str, str] = ("hero", "local")) -> go.Figure:
    """Where two runs of the same tokens decide differently (e.g. HeRo and its local twin): each cell says which
    of the two ran the FFN."""
    if hero_trace.token_ids != local_trace.token_ids:
        raise ValueError("the two traces hold different tokens: trace the same prompt with both routers")
    return flip_map(hero_trace, local_trace, labels)


__all__ = ["compute_bars", "executed_counts", "flip_map", "forgetting_bars", "hero_vs_local", "layer_divergence",
           "layer_skip_bars", "mean_memory_map", "memory_fill", "memory_map", "skip_map", "skip_maps",
           "token_quality_bars", "trajectories"]
