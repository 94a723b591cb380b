"""The figures that compare runs of the same tokens decision by decision, drawn the same way for live runs
(Compare) and for uploaded traces."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
import streamlit as st

from hero_core import RoutingTrace
from hero_core.viz.figures import flip_map, layer_divergence, skip_heatmaps

from .charts import show_chart
from .exports import show_figure
from .widgets import windowed


def draw_same_token_comparison(traces: Sequence[RoutingTrace], labels: Sequence[str],
                               key: str) -> dict[str, go.Figure]:
    """Skip maps of every run, the flip map of each run against the first, per-layer divergence. A long prompt
    gets one token window (slider and overview strip) shared by the maps; :func:`widgets.shown_window` hands it
    to the page's other token-axis charts."""
    window = windowed(traces[0], prefix=key)  # a long prompt: one token window for every map
    figures = {"skip maps": skip_heatmaps(traces, labels, window)}
    show_chart(st, figures["skip maps"], key=f"{key}_maps")
    for i in range(1, len(traces)):
        name = f"flips {labels[0]} vs {labels[i]}"
        show_figure(figures, name, flip_map(traces[0], traces[i], (labels[0], labels[i]), window),
                    key=f"{key}_flip_{i}")
    if len(traces) > 1:  # one run: nothing to diverge from
        show_figure(figures, "layer divergence", layer_divergence(traces, labels), key=f"{key}_divergence")
    return figures
