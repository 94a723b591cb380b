"""Runs at several thresholds of one input, side by side: the realised param skip at a tau, the one tau search
(matched compute, calibration to a budget) and a tau sweep.

Matching compute means finding the tau at which a router realises a given param skip on this very input
(Compare, Learn, the twins of the results): one forward pass per threshold tried. On a CPU a forward pass over a
short input costs little more than one read of the weights, so several thresholds run as rows of one batch (the
FFN runs where gate >= tau: a tau per token row); a long input, where arithmetic dominates, tries one threshold
a pass and interpolates between the bracket's ends. Both stop within half a decision of the target.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .accounting import grid_search_increasing, mean_param_skip, search_increasing
from .call_state import routing_call
from .config import check_tau
from .metrics import kept_rows, log_probs, quality_of_log_probs
from .trace import RoutingTrace, quality_fields

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
    tau in ``taus`` (:func:`hero_core.core.accounting.mean_param_skip` over the real tokens), the taus side by
    side as rows of one batch. ``policy`` (see :mod:`hero_core.eval.baselines`) replaces the router's decisions."""
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
    return [mean_param_skip(executed[:, i, real] if real is not None else executed[:, i], hero.profile)
            for i in range(k)]


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
    width = input_ids.shape[1]
    # one token a row is a decode step, whose compiled path takes one tau: one threshold a pass there
    per_pass = min(8, SIDE_BY_SIDE_TOKENS // input_ids.numel()) if width > 1 else 1
    if per_pass >= 2:
        return grid_search_increasing(realised_many, param_skip, lo, hi, width=per_pass,
                                      resolution=(hi - lo) / 2 ** iters, tol=tol)
    all_skipped = hero.config.n_routed * hero.profile.ffn_params / hero.profile.total_params
    return search_increasing(lambda tau: realised_many([tau])[0], param_skip, lo, hi, iters, f_lo=0.0,
                             f_hi=all_skipped, tol=tol)


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
