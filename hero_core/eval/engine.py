"""The one loop that runs texts under several methods against a reference (usually dense).

:func:`run_texts` tokenises each batch of texts once, runs the reference on it once, then every method in
the order given, and reduces each method's logits to what the caller asked for before the next method
runs, so memory holds one method's logits at a time, never all of them. The evaluations that compare
methods on text go through it: the frontier (:func:`hero_core.eval.frontier.curves.evaluate_points`), the
domains suite (:func:`hero_core.eval.suites.registry.evaluate_domains`), the data-set sweep
(:func:`hero_core.eval.sweep.run.run_item`), the bf16 check
(:func:`hero_core.eval.frontier.results_sections.bf16_check`) and the analyses' item runs
(:func:`hero_core.eval.sweep.item_runs.run_items`). The measures come from :mod:`hero_core.measures.metrics`.

Per (method, text) it gives a :class:`MethodRun`: token count, which FFNs ran, and against the reference the
text's NLL sums, KL sum and top-1 agreements; on request the per-token quality (``keep="tokens"``), the
logits (``keep="logits"``) and, for methods named in ``traced``, the :class:`~hero_core.method.trace.RoutingTrace`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from hero_core.choices import check_distinct
from hero_core.eval.methods import Forward, HeroMethod, Method
from hero_core.measures.metrics import log_probs, quality_of_log_probs
from hero_core.method.trace import RoutingTrace

KEEP = ("logits", "tokens")  # what a run may keep beyond its sums
MAX_MATCHED_SKIP = 0.999  # a matched run's target param skip is capped below 1 (param_skip must be < 1)


@dataclass
class MethodRun:
    """One method on one text. The sums are over the text's positions against the reference (NaN without one):
    NLL of each next token (``n_pred`` = n_tokens - 1 predictions), KL(reference || method) and top-1
    agreement at every position."""

    n_tokens: int
    executed: np.ndarray | None  # (R, n_tokens) bool: FFN ran; None when every FFN ran (dense)
    nll_sum: float = math.nan
    dense_nll_sum: float = math.nan
    kl_sum: float = math.nan
    agree_sum: float = math.nan
    token_quality: dict[str, torch.Tensor] | None = None  # keep="tokens": quality_of_log_probs of this text
    logits: torch.Tensor | None = None  # keep="logits": (n_tokens, V) fp32 on the CPU
    trace: RoutingTrace | None = None  # for the methods named in ``traced``

    @property
    def n_pred(self) -> int:
        return self.n_tokens - 1


@dataclass
class TextRuns:
    """Every method on one text: ``runs`` by method name, in the order the methods were given."""

    index: int  # the text's position in ``texts``
    token_ids: list[int]
    runs: dict[str, MethodRun] = field(default_factory=dict)


def check_methods(methods: Sequence[Method], keep: Collection[str], traced: Collection[str],
                  match_compute: Mapping[str, str], batch_size: int) -> None:
    names = [m.name for m in methods]
    check_distinct("method names", names, "results are keyed by name")
    unknown = set(keep) - set(KEEP)
    if unknown:
        raise ValueError(f"keep takes {KEEP}, got {sorted(unknown)}")
    for m in methods:
        if m.name in traced and not isinstance(m, HeroMethod):
            raise ValueError(f"method {m.name!r} cannot be traced: only a HeroMethod records a RoutingTrace")
    if traced and batch_size != 1:
        raise ValueError("traced methods run one text at a time: use batch_size=1")
    for name, reference in match_compute.items():
        if name not in traced or reference not in traced:
            raise ValueError(f"matched compute reads the reference's trace: trace both {name!r} and {reference!r}")
        if names.index(reference) >= names.index(name):
            raise ValueError(f"{reference!r} must run before {name!r}, which matches its compute")


def run_texts(hero, methods: Sequence[Method], texts: Sequence[str], reference: Method | None = None, *,
              max_tokens: int | None = None, batch_size: int = 1, chat_template: bool = False,
              keep: Collection[str] = (), traced: Collection[str] = (), record_states: bool = False,
              match_compute: Mapping[str, str] | None = None, desc: str = "", progress: bool = False,
              leave: bool = True) -> Iterator[TextRuns]:
    """Run every method on every text and yield one :class:`TextRuns` per text, in order.

    ``hero`` tokenises (every method must share its tokenizer); texts are right-padded into batches of
    ``batch_size`` and cut at ``max_tokens``. ``reference`` runs once per batch (a method that *is* the
    reference reuses that run instead of running again); without one, no sums are computed. Methods named in
    ``traced`` (HeroMethods, one text at a time) run through :meth:`HeroModel.trace_and_logits` and keep their
    trace (``record_states`` as there); ``match_compute`` ``{name: reference name}`` runs a traced method at
    the tau whose param skip on each text is closest to the one the named earlier method realised there."""
    from tqdm import tqdm

    keep, traced, match_compute = set(keep), set(traced), dict(match_compute or {})
    check_methods(methods, keep, traced, match_compute, batch_size)
    for start in tqdm(range(0, len(texts), batch_size), desc=desc, disable=not progress, leave=leave):
        batch = texts[start: start + batch_size]
        enc = hero.encode(batch, chat_template=chat_template, max_tokens=max_tokens)
        ids, mask = enc.input_ids.cpu(), enc.attention_mask.cpu()
        lengths = mask.sum(1).tolist()
        out = [TextRuns(start + b, ids[b, :n].tolist()) for b, n in enumerate(lengths)]
        dense = None if reference is None else reference.forward(ids, mask)
        dense_log = None if dense is None else log_probs(dense.logits)  # once per batch, shared by every method
        for m in methods:
            if m.name in traced:
                text_runs = out[0]
                skip = None
                if m.name in match_compute:
                    skip = min(text_runs.runs[match_compute[m.name]].trace.param_skip, MAX_MATCHED_SKIP)
                text_runs.runs[m.name] = traced_run(m, batch[0], text_runs.token_ids, dense, keep, skip=skip,
                                                    max_tokens=max_tokens, chat_template=chat_template,
                                                    record_states=record_states)
                continue
            fwd = dense if m is reference else m.forward(ids, mask)
            routed_log = None if dense is None else (dense_log if m is reference else log_probs(fwd.logits))
            for b, n in enumerate(lengths):
                run = MethodRun(n, None if fwd.executed is None else fwd.executed[b][:, :n])
                if "logits" in keep:
                    run.logits = fwd.logits[b, :n]
                if dense_log is not None:
                    add_quality(run, quality_of_log_probs(dense_log[b, :n], routed_log[b, :n], ids[b, :n]), keep)
                out[b].runs[m.name] = run
        yield from out


def traced_run(method: HeroMethod, text: str, token_ids: list[int], dense: Forward | None, keep: set[str], *,
               skip: float | None, max_tokens: int | None, chat_template: bool, record_states: bool) -> MethodRun:
    """One text through :meth:`HeroModel.trace_and_logits` (the tau rule and the notices land in the trace)."""
    trace, logits = method.hero.trace_and_logits(
        text, method.variant, tau=method.tau, record_states=record_states, chat_template=chat_template,
        max_tokens=max_tokens, policy=method.policy, param_skip=skip, memory_read=method.memory_read)
    run = MethodRun(trace.n_tokens, trace.executed, trace=trace)
    if "logits" in keep:
        run.logits = logits.cpu()
    if dense is not None:
        if list(trace.token_ids) != token_ids:
            raise ValueError(f"method {method.name!r} tokenises the text differently from the reference")
        # scored where the logits are (the model's device), as the model scores its own quality traces
        ids = torch.tensor(token_ids, device=logits.device)
        add_quality(run, quality_of_log_probs(log_probs(dense.logits[0].to(logits.device)), log_probs(logits), ids),
                    keep)
    return run


def add_quality(run: MethodRun, quality: dict[str, torch.Tensor], keep: set[str]) -> None:
    """The text's sums from its per-token quality (kept too with ``keep="tokens"``)."""
    run.nll_sum = float(quality["nll"].sum())
    run.dense_nll_sum = float(quality["dense_nll"].sum())
    run.kl_sum = float(quality["kl"].sum())
    run.agree_sum = float(quality["top1_agree"].sum())
    if "tokens" in keep:
        run.token_quality = quality
