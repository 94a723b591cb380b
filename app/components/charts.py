"""Every plotly chart of the app goes through :func:`show_chart`, so each is drawn once in the browser.

Why: a figure whose margins are too small for its labels is drawn twice by plotly (the second time with the margins
it measured); :func:`hero_core.viz.margins.settle_margins` gives it that room up front.
"""

from __future__ import annotations

import plotly.graph_objects as go

from hero_core.viz.margins import settle_margins


def show_chart(where, figure: go.Figure, **kwargs):
    """``where.plotly_chart(figure, **kwargs)`` (``where``: ``st``, a column or a container) with settled margins;
    returns what plotly_chart returns (the selection event of a selectable chart)."""
    return where.plotly_chart(settle_margins(figure), **kwargs)
