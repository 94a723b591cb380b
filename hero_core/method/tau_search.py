"""Runs at several thresholds of one input, side by side: the realised param skip at a tau, the one tau search
(matched compute, calibration to a budget) and a tau sweep.

Matching compute means finding the tau at which a router realises a given param skip on this very input
(Compare, Learn, the twins of the results, a study's calibration): one forward pass per threshold tried. The
search starts from the router's own gates (the tau that would skip the wanted share of one pass's gates, and a
second guess beside it in the same batch: on a CPU a pass over a short input costs little more than one read of
the weights, so thresholds run as rows of one batch, the FFN running where gate >= its row's tau), then
interpolates inside the bracket those passes found. It stops within half a decision of the target.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from hero_core.measures.accounting import mean_param_skip, search_increasing
from hero_core.measures.metrics import kept_rows, log_probs, quality_of_log_probs
from hero_core.method.call_state import routing_call
from hero_core.method.config import check_tau
from hero_core.method.trace import RoutingTrace, quality_fields

# Tokens of one batched forward pass up to which several thresholds run side by side (the tau search, a tau sweep).
# On the 135M backbone on one CPU thread a pass over 20 tokens took 0.15 s and one over 8 x 20 rows 0.4 s (reading
# the weights is most of a short pass); far above this size the arithmetic dominates and rows side by side cost
# about what passes one after another do.
SIDE_BY_SIDE_TOKENS = 160


# The one range every tau search brackets (matched_tau: the app's matched compute, the twins, a study's and the
# scripts' calibration). tau must lie strictly inside (0, 1) (config.check_tau); a thousandth from either end
# reaches every skip a trained router can realise (gates are sigmoids, so below 0.001 or above 0.999 they
# saturate and no further decision moves), where the former 0.02 .. 0.98 of the calibration cut off the
# extreme budgets before the gates did.
TAU_RANGE = (1e-3, 1.0 - 1e-3)


def realised_skips(hero, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, variant: str,
                   taus: Sequence[float], *, policy=None, memory_read: str = "learned") -> list[float]:
    """The realised param skip of ``hero`` (a HeroModel: this module is below it) on ``input_ids`` (B, T) at each
    tau in ``taus`` (:func:`hero_core.measures.accounting.mean_param_skip` over the real tokens), the taus side by
    side as rows of one batch. ``policy`` (see :mod:`hero_core.eval.baselines`) replaces the router's decisions."""
    return _skips_and_gates(hero, input_ids, attention_mask, variant, taus, policy=policy,
                            memory_read=memory_read)[0]


def _skips_and_gates(hero, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, variant: str,
                     taus: Sequence[float], *, policy=None,
                     memory_read: str = "learned") -> tuple[list[float], np.ndarray]:
    """:func:`realised_skips`, and the gates of the first tau's row on the real tokens (R, N)."""
    real = attention_mask.reshape(-1).bool().cpu().numpy() if attention_mask is not None else None
    rows, width = input_ids.shape
    k = len(taus)
    call = hero.new_call(variant, taus[0], policy=policy, memory_read=memory_read)
    if k > 1:  # the FFN runs where gate >= tau: a tau per token row, as a tensor
        call.tau = torch.tensor(list(taus), device=input_ids.device).repeat_interleave(rows * width)
    mask = attention_mask.repeat(k, 1) if attention_mask is not None else None
    with torch.no_grad(), routing_call(call):  # the decisions only: the backbone without its LM head
        hero.model.base_model(input_ids=input_ids.repeat(k, 1), attention_mask=mask, use_cache=False)
    executed = call.passes[-1].executed().cpu().numpy().reshape(-1, k, rows * width)  # (R, k, B*T)
    gates = torch.stack([r.fields["gate"][:rows * width] for r in call.passes[-1].records]).float().cpu().numpy()
    skips = [mean_param_skip(executed[:, i, real] if real is not None else executed[:, i], hero.profile)
             for i in range(k)]
    return skips, (gates[:, real] if real is not None else gates)


def tau_from_gates(gates: np.ndarray, param_skip: float, level: float) -> float:
    """The tau that skips the share ``param_skip`` of these gates' decisions (each skipped one is worth ``level``
    of param skip): midway between the gates that would be the last skipped and the first run. Exact if the gates
    did not depend on the decisions; they do (a skipped FFN changes the residual stream later gates read), so this
    is the search's first guess, not its answer."""
    ordered = np.sort(gates.reshape(-1))
    n_skipped = int(round(param_skip / level)) if level > 0 else 0
    lo, hi = TAU_RANGE
    if n_skipped <= 0:
        return lo
    if n_skipped >= ordered.size:
        return hi
    return float(min(max((ordered[n_skipped - 1] + ordered[n_skipped]) / 2, lo), hi))


def realised_skip(hero, input_ids: torch.Tensor, variant: str, tau: float, *,
                  attention_mask: torch.Tensor | None = None, policy=None, memory_read: str = "learned") -> float:
    """The realised param skip of ``variant`` at threshold ``tau`` on token blocks ``input_ids`` (B, T):
    :func:`realised_skips` at one tau."""
    return realised_skips(hero, input_ids.to(hero.device),
                          None if attention_mask is None else attention_mask.to(hero.device), variant, [tau],
                          policy=policy, memory_read=memory_read)[0]


def matched_tau(hero, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, variant: str,
                param_skip: float, *, iters: int = 12, memory_read: str = "learned") -> tuple[float, float]:
    """The tau whose run of ``hero`` on this very input realises the param skip closest to ``param_skip``: (tau,
    realised). The one tau calibration: a prompt's matched compute, a twin's match, a checkpoint's budget on its
    calibration blocks.

    Skip grows with tau, but not exactly monotonically (later gates read a residual stream that earlier decisions
    changed), so the search keeps the best tau seen; ``iters``: the resolution, 2 ** -iters of the tau range."""
    input_ids = input_ids.to(hero.device)
    attention_mask = None if attention_mask is None else attention_mask.to(hero.device)

    def realised_many(taus: list[float]) -> list[float]:
        return realised_skips(hero, input_ids, attention_mask, variant, taus, memory_read=memory_read)

    # One decision more or less moves the mean by one level: within half a level, no tau can do better.
    n_tokens = int(attention_mask.sum()) if attention_mask is not None else int(input_ids.numel())
    level = hero.profile.ffn_params / hero.profile.total_params / max(n_tokens, 1)
    (lo, hi), tol = TAU_RANGE, level / 2 - 1e-12
    all_skipped = hero.config.n_routed * hero.profile.ffn_params / hero.profile.total_params
    f_lo, f_hi = 0.0, all_skipped
    # A first guess from the gates themselves: one pass at the checkpoint's own tau, then the tau that would skip the
    # wanted share of that pass's gates. The skip it realises falls short of the target (a skipped FFN moves the
    # gates after it the same way), so a second tau twice as far from the first rides in the same batch: the two
    # usually bracket the target tightly, and the interpolating search below finishes in a few passes (a Compare
    # of four checkpoints on a 77-token prompt: see docs/experiments/app-latency).
    def seen(taus: list[float], skips: list[float]) -> None:
        nonlocal best, lo, hi, f_lo, f_hi
        for tau, skip in zip(taus, skips, strict=True):
            if best is None or abs(skip - param_skip) < abs(best[1] - param_skip):
                best = (tau, skip)
            if skip < param_skip and tau > lo:
                lo, f_lo = tau, skip
            elif skip >= param_skip and tau < hi:
                hi, f_hi = tau, skip

    best: tuple[float, float] | None = None
    first = _inside_tau_range(hero.config.tau)
    (skip,), gates = _skips_and_gates(hero, input_ids, attention_mask, variant, [first], memory_read=memory_read)
    seen([first], [skip])
    if abs(skip - param_skip) <= tol:
        return best
    guess = tau_from_gates(gates, param_skip, level)
    candidates = [t for t in dict.fromkeys([guess, _inside_tau_range(2 * guess - first)]) if lo < t < hi]
    if candidates:
        seen(candidates, realised_many(candidates))
    if abs(best[1] - param_skip) <= tol:
        return best
    found = search_increasing(lambda t: realised_many([t])[0], param_skip, lo, hi, iters, f_lo=f_lo, f_hi=f_hi,
                              tol=tol)
    return found if abs(found[1] - param_skip) < abs(best[1] - param_skip) else best


def _inside_tau_range(tau: float) -> float:
    """``tau`` moved inside :data:`TAU_RANGE` (a checkpoint's trained tau is a fine first guess wherever it is)."""
    return float(min(max(tau, TAU_RANGE[0]), TAU_RANGE[1]))


def traces_at_taus(hero, prompt: str, taus: Sequence[float], variant: str = "hero", *,
                   chat_template: bool = False, max_tokens: int | None = None,
                   quality: bool = False) -> list[RoutingTrace]:
    """The traces of ``prompt`` at each tau in ``taus`` (what one :meth:`HeroModel.trace` call per tau gives), the
    thresholds side by side in batched passes of up to SIDE_BY_SIDE_TOKENS tokens; ``quality`` scores every row
    against one dense pass of the prompt (shared through the backbone's dense reference)."""
    taus = [check_tau(float(t)) for t in taus]
    enc = hero.encode([prompt], chat_template=chat_template, max_tokens=max_tokens)
    keep = enc.attention_mask[0].bool()
    token_ids = enc.input_ids[0][keep]
    dense = None
    if quality:
        dense_log = hero.dense_log_probs(enc)
        dense = (kept_rows(dense_log[0], keep), kept_rows(dense_log[0], keep).exp())
    width = enc.input_ids.shape[1]
    # one token a row is a decode step, whose compiled path takes one tau: one threshold a pass there
    per_pass = max(1, SIDE_BY_SIDE_TOKENS // width) if width > 1 else 1
    traces = []
    for start in range(0, len(taus), per_pass):
        chunk = taus[start:start + per_pass]
        call = hero.new_call(variant, chunk[0])
        if len(chunk) > 1:  # the FFN runs where gate >= tau: a tau per token row, as a tensor
            call.tau = torch.tensor(chunk, device=enc.input_ids.device).repeat_interleave(width)
        with torch.no_grad():
            logits = hero.forward(enc.input_ids.repeat(len(chunk), 1), enc.attention_mask.repeat(len(chunk), 1),
                                  call, use_cache=False)
        for row, tau in enumerate(chunk):
            trace = hero.trace_of(call, row, token_ids.tolist(), enc.notices[0], tau_rule="given")
            trace.tau = tau
            if dense is not None:
                routed_log = kept_rows(log_probs(logits[row:row + 1])[0], keep)
                trace.quality = quality_fields(quality_of_log_probs(dense[0], routed_log, token_ids, dense[1]))
            traces.append(trace)
    return traces
