"""Compute and quality over a span of a trace's tokens: a generation's answer apart from its prompt, a prompt without
its first token, and the sentences the pages say about them.

Why spans: a whole-trace average mixes what a reader wants apart. A generated answer's figures drowned in the chat
template's system prompt; token 0 (the attention sink) skips most FFNs and lifts a short prompt's param skip; and on
a prompt whose tokens skip few FFNs the adapters and routers can cost more than the skipped FFNs save (a 635-word
prompt measured a net param skip of −3.8 %), which a page must say where it shows the number.

Positions follow :meth:`RoutingTrace.compute` (per token) and ``RoutingTrace.quality`` (the prediction made AT
token t, of token t + 1). A generation's trace covers the prompt and every generated token but the last (never fed
back), so:

* the answer's compute is that of positions ``n_prompt_tokens`` … T − 1 (as
  :func:`hero_core.eval.answers.run.answer_cost`);
* the answer's quality is that of the predictions of the answer: positions ``n_prompt_tokens − 1`` … T − 1 (the
  prompt's last token predicts the first answer token; the NLL of the last one is unknown, so it is left out).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hero_core.measures.metrics import perplexity_ratio
from hero_core.method.trace import RoutingTrace

FIRST_TOKEN_NOTE_SHARE = 0.2  # say how much token 0 lifts the figure when it carries at least this share of skips


@dataclass(frozen=True)
class SpanFigures:
    """One span's figures (fractions, not percent); quality fields are NaN without a quality row or predictions."""

    n_tokens: int
    param_skip: float
    net_param_skip: float
    flop_share_saved: float
    ffn_executed_per_token: float
    perplexity_ratio: float = math.nan
    top1_agreement: float = math.nan
    mean_kl_to_dense: float = math.nan
    n_predictions: int = 0


def _mean(values: np.ndarray) -> float:
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else math.nan


def span_figures(trace: RoutingTrace, start: int, stop: int | None = None, *,
                 predictions: tuple[int, int | None] | None = None) -> SpanFigures | None:
    """Figures over tokens ``start`` … ``stop − 1`` (None: no token there); quality over the predictions made at
    positions ``predictions`` = (first, stop) (default: the same span)."""
    T = trace.n_tokens
    stop = T if stop is None else min(stop, T)
    start = max(0, start)
    if stop <= start:
        return None
    figures = trace.compute()
    span = slice(start, stop)
    out = {"n_tokens": stop - start, "param_skip": _mean(figures["param_skip"][span]),
           "net_param_skip": _mean(figures["net_param_skip"][span]),
           "flop_share_saved": _mean(figures["flop_share_saved"][span]),
           "ffn_executed_per_token": float(trace.executed[:, span].sum(axis=0).mean())}
    if trace.quality is not None:
        first, last = predictions if predictions is not None else (start, stop)
        cut = slice(max(0, first), T if last is None else min(last, T))
        nll, dense = trace.quality["nll"][cut], trace.quality["dense_nll"][cut]
        scored = np.isfinite(nll) & np.isfinite(dense)
        out["perplexity_ratio"] = perplexity_ratio(nll[scored], dense[scored]) if scored.any() else math.nan
        out["mean_kl_to_dense"] = _mean(trace.quality["kl_to_dense"][cut])
        if "top1_agree" in trace.quality:
            out["top1_agreement"] = _mean(np.asarray(trace.quality["top1_agree"], dtype=np.float64)[cut])
        out["n_predictions"] = int(len(trace.quality["kl_to_dense"][cut]))
    return SpanFigures(**out)


def answer_and_prompt(trace: RoutingTrace) -> tuple[SpanFigures | None, SpanFigures | None]:
    """(answer, prompt) figures of a generation's trace (module docstring: which positions each takes)."""
    n = trace.n_prompt_tokens if trace.n_prompt_tokens is not None else trace.n_tokens
    answer = span_figures(trace, n, predictions=(n - 1, None))
    prompt = span_figures(trace, 0, n, predictions=(0, n - 1))
    return answer, prompt


def first_token_lift(trace: RoutingTrace) -> tuple[float, float] | None:
    """(param skip without token 0, share of all skipped FFNs that token 0 skipped); None under two tokens."""
    if trace.n_tokens < 2:
        return None
    skipped = (~trace.executed).sum(axis=0)
    total = int(skipped.sum())
    return _mean(trace.compute()["param_skip"][1:]), (float(skipped[0]) / total if total else 0.0)


def first_token_words(trace: RoutingTrace) -> str | None:
    """A sentence on token 0's share of the skipping, when it carries at least FIRST_TOKEN_NOTE_SHARE of it."""
    found = first_token_lift(trace)
    if found is None:
        return None
    without, share = found
    if share < FIRST_TOKEN_NOTE_SHARE:
        return None
    return (f"Token 0 (the attention sink) skips {int((~trace.executed[:, 0]).sum())} of {trace.n_routed} FFNs, "
            f"{share:.0%} of all the FFNs this prompt skipped: without it the param skip is {without:.1%} "
            f"(against {trace.param_skip:.1%} with it).")


def net_cost_words(net_saving: float, what: str = "this prompt") -> str | None:
    """A sentence when routing saved nothing net (the share of FLOPs saved after the router and adapters are
    charged is zero or below); None otherwise."""
    if not net_saving <= 0:  # NaN (nothing measured) says nothing
        return None
    return (f"Routing costs more than dense on {what}: it saved {net_saving:.1%} of the dense model's FLOPs net, "
            "i.e. the router (run at every routed block of every token) and the adapters of the skipped FFNs cost at "
            "least what the skipped FFNs would have. These tokens skipped too few FFNs to pay the router back.")
