"""Figures of one routing decision: its exact a/b split, and the input tokens that moved it (attributions)."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from hero_core.method.trace import RoutingTrace
from hero_core.viz.axes import indexed_hover, token_axis
from hero_core.viz.memory_figures import check_token
from hero_core.viz.palette import (
    EXECUTED_COLOUR,
    HISTORY_COLOUR,
    LOCAL_COLOUR,
    MARK_COLOUR,
    NEGATIVE,
    NEGATIVE_RGB,
    POSITIVE,
    POSITIVE_RGB,
    SKIPPED_COLOUR,
    titled,
)
from hero_core.words.labels import plotly_text


# -- one decision ------------------------------------------------------------------------------------
def decision_split(trace: RoutingTrace, token: int, block: int) -> dict[str, float | bool | str]:
    """The exact parts of one decision: gate logit a + b against logit(tau).

    ``block`` is the 0-based routed-block index. ``local_only_executed`` is the counterfactual decision
    with the history logit removed at this block alone (a = 0, everything upstream unchanged)."""
    t = check_token(trace, token)
    if not 0 <= block < trace.n_routed:
        raise ValueError(f"block index {block!r} is out of range: the trace routes {trace.n_routed} blocks")
    a = float(trace.history_logit[block, t])
    b = float(trace.local_logit[block, t])
    tau_logit = math.log(trace.tau / (1 - trace.tau))
    return {"token": t, "block": block, "layer": trace.routed_layers[block], "token_text": trace.tokens[t],
            "history_logit": a, "local_logit": b, "gate_logit": a + b, "gate": float(trace.gate[block, t]),
            "tau": trace.tau, "tau_logit": tau_logit, "margin": float(trace.gate[block, t] - trace.tau),
            "executed": bool(trace.executed[block, t]), "local_only_executed": b >= tau_logit,
            "history_flips": bool(trace.executed[block, t]) != (b >= tau_logit)}


def decision_bars(split: dict, trace: RoutingTrace | None = None) -> go.Figure:
    """Local logit b, history logit a and their sum against the threshold logit(tau)."""
    names = ["local logit b", "history logit a", "gate logit a + b"]
    values = [split["local_logit"], split["history_logit"], split["gate_logit"]]
    verdict = "✓ executed" if split["executed"] else "✗ skipped"  # in words on the bar, not by colour alone
    colours = [LOCAL_COLOUR, HISTORY_COLOUR, EXECUTED_COLOUR if split["executed"] else SKIPPED_COLOUR]
    fig = go.Figure(go.Bar(x=values, y=names, orientation="h", marker={"color": colours}, showlegend=False,
                           text=[f"{values[0]:+.3f}", f"{values[1]:+.3f}", f"{values[2]:+.3f} → {verdict}"],
                           textposition="auto", hovertemplate="%{y} = %{x:.4f}<extra></extra>"))
    # The threshold is a dashed line named in the legend, not an annotation: a label on the line sat over the bars
    # ("logit(τ) = 0.000" across the history bar).
    fig.add_vline(x=split["tau_logit"], line={"dash": "dash", "color": MARK_COLOUR})
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line={"dash": "dash", "color": MARK_COLOUR},
                             name=f"threshold logit(τ) = {split['tau_logit']:+.3f} (τ = {split['tau']:g})",
                             hoverinfo="skip"))
    fig.update_layout(title=titled(f"Decision at L{split['layer']}: g = {split['gate']:.4f} → FFN {verdict}",
                                   [trace] if trace is not None else []),
                      height=300, yaxis={"autorange": "reversed"}, showlegend=True,
                      legend={"orientation": "h", "x": 0, "y": -0.18, "yanchor": "top"},
                      margin={"l": 120, "r": 20, "t": 80, "b": 60})
    return fig


def attribution_bars(tokens: Sequence[str], scores: Sequence[float], *, title: str,
                     trace: RoutingTrace | None = None, window: tuple[int, int] | None = None) -> go.Figure:
    """Attribution score per input token (positive pushes the gate towards executing the FFN): blue towards
    executing, orange towards skipping (a diverging pair that survives red-green colour blindness).
    ``window`` = (first, last) token shown for a long prompt (every bar is still there, a pan away)."""
    scores = np.asarray(scores, dtype=np.float64)
    colours = np.where(scores >= 0, POSITIVE, NEGATIVE)
    fig = go.Figure(go.Bar(x=np.arange(len(scores)), y=scores, marker={"color": colours},
                           hovertext=indexed_hover(list(tokens)),
                           hovertemplate="%{hovertext}<br>%{y:+.4f}<extra></extra>"))
    fig.update_layout(title=titled(plotly_text(title), [trace] if trace is not None else []),
                      xaxis=token_axis(list(tokens), window), height=340,
                      yaxis={"title": {"text": "contribution to a + b"}}, margin={"l": 60, "r": 20, "t": 80, "b": 60})
    return fig


def attribution_html(tokens: Sequence[str], scores: Sequence[float]) -> str:
    """Tokens shaded blue (pushes towards executing) or orange (towards skipping) by attribution."""
    scores = np.asarray(scores, dtype=np.float64)
    scale = float(np.max(np.abs(scores))) if scores.size else 0.0
    spans = []
    for i, (token, score) in enumerate(zip(tokens, scores, strict=True)):
        share = 0.0 if scale == 0 else abs(score) / scale
        rgb = POSITIVE_RGB if score >= 0 else NEGATIVE_RGB
        text = html.escape(token).replace("\n", "↵<br>") or "∅"
        tip = html.escape(f"token {i}: {score:+.4f}", quote=True)
        spans.append(f'<span title="{tip}" data-score="{score:.6g}" style="background:rgba({rgb},{share:.3f});'
                     f'padding:1px 0;white-space:pre-wrap">{text}</span>')
    return ('<div style="font-family:ui-monospace,monospace;line-height:1.9;font-size:0.95rem">'
            + "".join(spans) + "</div>")


def log_ticks(low: float, high: float) -> dict:
    """Ticks of a log axis over [low, high]: 1, 2, 5, 10, 20, ... written in full where three or more fit, else
    plotly's own. Why: an overlaying axis defaults to ticks synced to the left axis' grid, which on this log axis
    printed 9, 7, 5, 4 from the bottom up; plotly's own log ticks abbreviate 20 and 50 to "2" and "5"."""
    ticks = [m * 10.0**e for e in range(-3, 7) for m in (1, 2, 5) if low <= m * 10.0**e <= high]
    if len(ticks) < 3:
        return {"tickmode": "auto"}
    return {"tickmode": "array", "tickvals": ticks, "ticktext": [f"{t:g}" for t in ticks]}


def tau_curve(taus: Sequence[float], ffn_per_token: Sequence[float], n_routed: int,
              current: float | None = None, trace: RoutingTrace | None = None, note: str = "",
              perplexity_ratio: Sequence[float] | None = None) -> go.Figure:
    """FFNs executed per token as the threshold tau varies (each point a full re-run), and with
    ``perplexity_ratio`` the quality those runs paid (routed / dense perplexity of the same text, right axis):
    the trade the threshold makes, not only its compute side.

    ``trace`` is the run at the current tau: its checkpoint, variant, tau and param skip go into the title with
    the swept range, followed by ``note`` (e.g. which text and precision), so an exported figure keeps them."""
    fig = go.Figure(go.Scatter(x=list(taus), y=list(ffn_per_token), mode="lines+markers", name="FFNs per token",
                               line={"color": EXECUTED_COLOUR}, marker={"color": EXECUTED_COLOUR},
                               hovertemplate="τ = %{x:.2f}: %{y:.2f} FFNs per token<extra></extra>"))
    if perplexity_ratio is not None:
        fig.add_trace(go.Scatter(x=list(taus), y=list(perplexity_ratio), mode="lines+markers", yaxis="y2",
                                 name="perplexity ratio to dense (right axis)",
                                 line={"color": SKIPPED_COLOUR, "dash": "dot"}, marker={"color": SKIPPED_COLOUR},
                                 hovertemplate="τ = %{x:.2f}: perplexity × %{y:.3f} of dense<extra></extra>"))
    if current is not None:
        fig.add_vline(x=current, line={"dash": "dash", "color": MARK_COLOUR}, annotation_text="τ now")
    parts = []
    if trace is not None:
        parts.append(f"{plotly_text(trace.checkpoint)} · {plotly_text(trace.variant)} · τ swept "
                     f"{min(taus):.3g}–{max(taus):.3g} · τ now {trace.tau:.3g}: param skip {trace.param_skip:.1%} · "
                     f"{trace.n_tokens} tokens")
    if note:
        parts.append(plotly_text(note))
    text = "Compute as the threshold moves" if perplexity_ratio is None else \
        "Compute and quality as the threshold moves"
    layout = {"title": {"text": f"{text}<br><sup>{' · '.join(parts)}</sup>" if parts else text},
              "height": 340, "xaxis": {"title": {"text": "τ"}, "range": [0, 1]},
              "yaxis": {"title": {"text": "FFNs executed per token"}, "range": [0, n_routed + 0.5]},
              "legend": {"orientation": "h", "x": 0, "y": -0.25, "yanchor": "top"},
              "margin": {"l": 60, "r": 60, "t": 70, "b": 80}}
    if perplexity_ratio is not None:
        # log scale: at a high tau the ratio reaches the hundreds, which flattened every other point onto 1
        finite = [v for v in perplexity_ratio if math.isfinite(v) and v > 0]
        low, high = min([0.95, *finite]) * 0.95, max([1.05, *finite]) * 1.1
        layout["yaxis2"] = {"title": {"text": "perplexity ratio to dense (log)"}, "overlaying": "y",
                            "side": "right", "type": "log", "range": [math.log10(low), math.log10(high)],
                            "showgrid": False, **log_ticks(low, high)}
    fig.update_layout(**layout)
    return fig
