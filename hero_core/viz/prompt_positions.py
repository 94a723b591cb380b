"""Skip by absolute position within ONE prompt: the table, the sentence and the chart the pages show beside their
skip figures.

Why: a prompt-level param skip mixes two position effects. Token 0 (the attention sink) skips most FFNs and lifts
a short prompt's figure; past the 128-token blocks the routers were trained on, tokens skip fewer FFNs, so a long
prompt's routing can cost more than it saves. One number hides both; the same bins as the Data set page's
(:data:`hero_core.eval.frontier.position_skip.POSITION_EDGES`: token 0 alone, 1-15, 16-127, 128-511, 512-2047,
2048+) show them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from hero_core.eval.frontier.position_skip import POSITION_EDGES, bin_label, position_bins
from hero_core.method.trace import RoutingTrace
from hero_core.viz.palette import EXECUTED_COLOUR, MARK_COLOUR

TRAINED_SPAN = 128  # the routers were trained on 128-token blocks: positions past it are outside training
MIN_TOKENS = 16  # under this a prompt has only token 0 and the 1-15 bin: the first-token caption says it all


def position_table(trace: RoutingTrace) -> pd.DataFrame:
    """One row per absolute-position bin that holds tokens: label, start, n_tokens, FFNs skipped per token, param
    skip and net param skip (means over the bin's tokens)."""
    figures = trace.compute()
    positions = np.arange(trace.n_tokens)
    frame = pd.DataFrame({"bin": position_bins(positions), "ffn_skipped": (~trace.executed).sum(axis=0),
                          "param_skip": figures["param_skip"], "net_param_skip": figures["net_param_skip"]})
    rows = frame.groupby("bin", sort=True).agg(n_tokens=("ffn_skipped", "size"),
                                               ffn_skipped_per_token=("ffn_skipped", "mean"),
                                               param_skip=("param_skip", "mean"),
                                               net_param_skip=("net_param_skip", "mean")).reset_index()
    rows.insert(1, "label", [bin_label(POSITION_EDGES[b], POSITION_EDGES[b + 1]) for b in rows["bin"]])
    rows.insert(2, "start", [int(POSITION_EDGES[b]) for b in rows["bin"]])
    return rows.drop(columns="bin")


def position_words(table: pd.DataFrame, n_routed: int) -> str:
    """What the bins show, from the numbers only: each bin's FFNs skipped per token, then (when the prompt runs past
    the trained span) how the tokens past it compare with those inside it, and where net param skip is negative."""
    parts = [f"{'token 0' if r.start == 0 else 'tokens ' + r.label} skip{'s' if r.start == 0 else ''} "
             f"{r.ffn_skipped_per_token:.1f}" for r in table.itertuples()]
    words = f"FFNs skipped per token, of {n_routed}, by absolute position: {'; '.join(parts)}."
    inside = table[(table.start > 0) & (table.start < TRAINED_SPAN)]
    past = table[table.start >= TRAINED_SPAN]
    if len(inside) and len(past):
        near = float(np.average(inside.ffn_skipped_per_token, weights=inside.n_tokens))
        far = float(np.average(past.ffn_skipped_per_token, weights=past.n_tokens))
        span = f"positions 1-{TRAINED_SPAN - 1}"
        if far == near:
            how = f"as many FFNs as at {span} ({far:.1f} per token)"
        else:
            how = f"{'fewer' if far < near else 'more'} FFNs than at {span} ({far:.1f} per token against {near:.1f})"
        words += (f" Past token {TRAINED_SPAN - 1} (the routers were trained on {TRAINED_SPAN}-token blocks) tokens "
                  f"skip {how}.")
    losing = [r.label for r in table.itertuples() if r.net_param_skip < 0]
    if losing:
        words += (f" Net param skip is below zero in the bins {', '.join(losing)}: there the routers and adapters "
                  "cost more than the skipped FFNs saved.")
    return words


def position_bars(table: pd.DataFrame, trace: RoutingTrace) -> go.Figure:
    """FFNs skipped per token in each absolute-position bin; a bin whose net param skip is negative is drawn in the
    mark colour and says its net figure on hover."""
    colours = [MARK_COLOUR if net < 0 else EXECUTED_COLOUR for net in table.net_param_skip]
    fig = go.Figure(go.Bar(
        x=list(table.label), y=list(table.ffn_skipped_per_token), marker={"color": colours},
        # the values on the bars: token 0's bar sets the scale, and the later bins differ by a fraction of an FFN
        text=[f"{v:.1f}" for v in table.ffn_skipped_per_token], textposition="outside", cliponaxis=False,
        customdata=np.stack([table.n_tokens, table.param_skip, table.net_param_skip], axis=1),
        hovertemplate="tokens %{x}: %{y:.2f} FFNs skipped per token · param skip %{customdata[1]:.1%} · net "
                      "%{customdata[2]:.1%} (%{customdata[0]} tokens)<extra></extra>"))
    title = f"Skip by absolute position · {trace.checkpoint} · {trace.variant} · τ = {trace.tau:g}"
    if (table.net_param_skip < 0).any():
        title += "<br><sup>red bars: net param skip below zero (routing cost more than it saved there)</sup>"
    fig.update_layout(title={"text": title},
                      height=280, margin={"l": 60, "r": 20, "t": 60, "b": 50},
                      xaxis={"title": {"text": "token position (absolute)"}, "type": "category"},
                      yaxis={"title": {"text": "FFNs skipped / token"}, "rangemode": "tozero"})
    return fig
