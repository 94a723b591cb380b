"""Figures of a data-set sweep (:class:`hero_core.eval.sweep.run.SweepResult`): pure functions of its tables."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go

from hero_core.eval.sweep.run import SweepResult

_LAYOUT = {"template": "plotly_white", "height": 340, "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
           "legend": {"orientation": "h", "y": -0.25}}


def _one_trace_per_run(table: pd.DataFrame, trace: Callable[[str, pd.DataFrame], go.Scatter | go.Bar]) -> go.Figure:
    """A figure with ``trace(run, rows)`` for each run of a long table, in the table's run order (the legend then
    lists the runs as the page does)."""
    fig = go.Figure()
    for run, rows in table.groupby("run", sort=False):
        fig.add_trace(trace(run, rows))
    return fig


def _naming_the_run(hover: str, run: str) -> str:
    """A hover template whose side box (plotly's ``<extra>``) names the run, as the legend does."""
    return f"{hover}<extra>{run}</extra>"


def _run_scatter(run: str, rows: pd.DataFrame, x: str, y: str, mode: str, hover_columns: list[str],
                 hover: str) -> go.Scatter:
    """One run's trace of columns ``x`` against ``y``; ``hover`` reads ``hover_columns`` as %{customdata[0]}, [1], ...
    and its side box names the run."""
    return go.Scatter(x=rows[x], y=rows[y], mode=mode, name=run, customdata=rows[hover_columns],
                      hovertemplate=_naming_the_run(hover, run))


def sweep_layer_skip(result: SweepResult) -> go.Figure:
    """Skip rate per routed layer, pooled over every token of the data set, one line per run."""
    fig = _one_trace_per_run(result.layer_skip(), lambda run, g: go.Scatter(
        x=[f"L{layer}" for layer in g.layer], y=g.skip_rate, mode="lines+markers", name=run))
    fig.update_layout(title="Skip rate per routed layer (data set)", xaxis_title="routed layer",
                      yaxis={"title": "share of tokens skipping the FFN", "range": [0, 1], "tickformat": ".0%"},
                      **_LAYOUT)
    return fig


def sweep_category_skip(result: SweepResult) -> go.Figure:
    """Skip rate by token category, grouped bars per run (hover: the category's share of tokens)."""
    fig = _one_trace_per_run(result.skip_by_category(), lambda run, g: go.Bar(
        x=g.category_label, y=g.skip_rate, name=run, customdata=g[["n_tokens", "share_of_tokens"]],
        hovertemplate=_naming_the_run("%{x}: %{y:.1%} skipped<br>%{customdata[0]} tokens (%{customdata[1]:.0%})",
                                      run)))
    # No x title and the legend on top: rotated category names need the room below the axis (they were cut and
    # ran into the title "token category").
    fig.update_layout(title="Skip rate by token category", barmode="group",
                      xaxis={"automargin": True, "tickangle": -35},
                      yaxis={"title": "share of decisions skipped", "tickformat": ".0%"},
                      **(_LAYOUT | {"legend": {"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 1,
                                               "xanchor": "right"},
                                    "height": 380, "margin": {"l": 60, "r": 20, "t": 70, "b": 20}}))
    return fig


def sweep_position_skip(result: SweepResult) -> go.Figure:
    """Skip rate against the token's ABSOLUTE position in its item, in bins (token 0 alone, then 1-15, 16-127,
    128-511, 512-2047), one line per run; hover: tokens in the bin, FFNs skipped per token and param skip.

    Why absolute and not relative: routing depends on the token index itself (token 0, the attention sink,
    skips most FFNs; the routers were trained on 128-token blocks), and a relative axis smears those effects
    over prompts of every length."""
    table = result.skip_by_absolute_position()
    fig = _one_trace_per_run(table, lambda run, g: _run_scatter(
        run, g, "label", "skip_rate", "lines+markers", ["n_tokens", "ffn_skipped_per_token", "param_skip"],
        "tokens %{x}: %{y:.1%} skipped, %{customdata[1]:.2f} FFNs per token, param skip %{customdata[2]:.1%} "
        "(%{customdata[0]} tokens)"))
    fig.update_layout(title="Skip rate by position in the prompt",
                      xaxis={"title": "absolute token position (bins of the token index)", "type": "category",
                             "categoryorder": "array", "categoryarray": list(dict.fromkeys(table.label))},
                      yaxis={"title": "share of decisions skipped", "tickformat": ".0%"}, **_LAYOUT)
    return fig


def sweep_item_quality(result: SweepResult) -> go.Figure:
    """Each item: its param skip against its perplexity ratio to dense, one marker colour per run."""
    fig = _one_trace_per_run(result.items, lambda run, g: _run_scatter(
        run, g, "param_skip", "perplexity_ratio", "markers", ["item", "id", "param_skip_excluding_first_token"],
        "item %{customdata[0]} (%{customdata[1]}): skip %{x:.1%} (%{customdata[2]:.1%} without the first token), "
        "ratio %{y:.3f}"))
    fig.add_hline(y=1.0, line={"dash": "dot", "color": "grey"})
    fig.update_layout(title="Quality against dense per item", xaxis={"title": "param skip", "tickformat": ".0%"},
                      yaxis_title="perplexity ratio routed / dense", **_LAYOUT)
    return fig


def sweep_matched_bars(result: SweepResult) -> go.Figure:
    """Perplexity ratio of every run against dense, with 95 % bootstrap intervals over items.

    Points with interval whiskers on an axis fitted to the intervals, not bars from 0: bars from 0 made runs 5 %
    apart look equal (1.00 against 1.05 differ by a hair on a 0..1.1 axis)."""
    table = result.quality()
    fig = go.Figure(go.Scatter(x=table.run, y=table.perplexity_ratio, mode="markers",
                               marker={"size": 12, "symbol": "diamond"},
                               error_y={"type": "data", "symmetric": False, "width": 8,
                                        "array": table.ratio_high - table.perplexity_ratio,
                                        "arrayminus": table.perplexity_ratio - table.ratio_low},
                               customdata=table[["param_skip", "param_skip_excluding_first_token", "ratio_low",
                                                 "ratio_high"]],
                               hovertemplate="%{x}: %{y:.3f} [%{customdata[2]:.3f}, %{customdata[3]:.3f}] at "
                                             "%{customdata[0]:.1%} param skip (%{customdata[1]:.1%} without each "
                                             "item's first token)<extra></extra>"))
    fig.add_hline(y=1.0, line={"dash": "dot", "color": "grey"}, annotation_text="dense = 1",
                  annotation_position="bottom left")  # left: the last run's marker sits at the right end
    values = [1.0, *table.ratio_low.dropna(), *table.ratio_high.dropna()]
    span = max(values) - min(values)
    pad = max(0.02, 0.15 * span)
    fig.update_layout(title="Perplexity ratio to dense (95 % bootstrap over items)", xaxis_title="run",
                      yaxis={"title": "perplexity ratio routed / dense",
                             "range": [min(values) - pad, max(values) + pad]},
                      **_LAYOUT)
    return fig
