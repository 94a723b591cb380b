"""Evaluation: BIG-bench multiple choice with Retain, HumanEval, generated reasoning, per-domain quality.

Suites (``evaluate(..., suites=[...])``)
    ``main``       seven BIG-bench tasks fixed by the selection rule (:func:`hero_core.bigbench.select_tasks`,
                   dense results only, stored in ``hero_core/eval_tasks.json``): the headline Retain.
    ``extended``   every selected reasoning and code BIG-bench task (may overlap ``main``).
    ``humaneval``  pass@1, greedy, completions run in a subprocess (:mod:`hero_core.humaneval`); chat
                   prompt style when the model has a chat template (``--humaneval-style``).
    ``reasoning``  exact match of generated answers ("The answer is X", else the last number) on
                   held-out generated problems (``data.reasoning_problems``), three-shot.
    ``domains``    NLL, perplexity, top-1 agreement and KL(dense || routed) on held-out chat / code /
                   reasoning text, with param skip, net param skip, FLOP share saved, per-layer skip rates.

Metrics (docs/method.md, "Metrics")
    accuracy       BIG-bench ``multiple_choice_grade``: the target score of the choice with the highest
                   summed log-likelihood given the prompt (lm-evaluation-harness ``acc``).
    Retain         per suite, mean over its tasks of ``routed score / dense score``, in percent
                   (:func:`retain`); dense is always evaluated alongside as the reference.
    param skip     paper's metric, averaged over every token the model processed in that suite
                   (prompts, choices, generated tokens); plus its net form and the FLOP share saved
                   (:mod:`hero_core.accounting`).

Methods
    A *method* is what gets evaluated: anything with the small :class:`Method` interface, a forward
    over a right-padded batch that returns logits and which FFNs each token ran. Two are built in:

    * :class:`HeroMethod` ``(hero, variant, tau)``: a HeRo checkpoint with one of its variants
      (``dense`` runs the backbone unchanged);
    * :class:`CallableMethod` ``(name, fn, tokenizer, profile)``: wraps a plain function
      ``fn(input_ids (B,T), attention_mask (B,T)) -> (logits (B,T,V), executed (B,R,T) bool | None)``,
      e.g. a baseline routing policy; greedy generation recomputes the full sequence each step.

    Pass extra methods with ``evaluate(hero, methods=[...])``, e.g. a baseline policy at matched skip::

        from hero_core import baselines
        static = HeroMethod(hero, "hero", policy=baselines.static_pruning({3, 7}), name="static")
        evaluate(hero, ["hero", "no_history"], ["main"], limit=50, methods=[static])

Command line (``python -m hero_core eval --help``)::

    python -m hero_core eval --checkpoint hero-25 --variants hero,no_history,dense \
        --suites main,extended,humaneval,reasoning,domains --limit 50 --out results.json
    python -m hero_core eval --fetch-bigbench          # once: download BIG-bench, extract candidates
    python -m hero_core eval --select-tasks            # once, dense only: rewrite eval_tasks.json
    python -m hero_core eval --lm-eval-task hero_core/lm_eval_tasks/hero_reasoning_mc.yaml --variants hero,dense

Data hygiene: BIG-bench and HumanEval are evaluation-only (never read by training); reasoning and
domain texts come from the ``eval`` split of :mod:`hero_core.data`, disjoint from ``train`` by a hash
of each item. Few-shot exemplars of the reasoning suite come from the ``train`` split, so no
evaluation question appears in a prompt other than its own.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from . import bigbench, humaneval
from .accounting import ComputeProfile, token_compute
from .config import INFERENCE_VARIANTS

log = logging.getLogger(__name__)

SUITES = ("main", "extended", "humaneval", "reasoning", "domains")
EVAL_TASKS_FILE = Path(__file__).parent / "eval_tasks.json"
LM_EVAL_TASKS_DIR = Path(__file__).parent / "lm_eval_tasks"
DEFAULT_BATCH_TOKENS = 2048  # tokens per forward batch: logits are B*T*V floats (~400 MB at V = 49k)
DEFAULT_DOMAIN_TOKENS = 512  # domain texts are cut here
REASONING_SHOTS = 3
REASONING_STOPS = ("\nQuestion:", "\n\n")


# == methods ========================================================================================
@dataclass
class Forward:
    logits: torch.Tensor  # (B, T, V)
    executed: np.ndarray | None  # (B, R, T) bool: FFN ran; None when every FFN ran (dense)


@dataclass
class Generation:
    text: str  # generated continuation, cut before the first stop sequence
    executed: np.ndarray | None  # (R, T) over every token fed through the model; None for dense
    n_tokens: int  # T


@dataclass
class SharedForward:
    """Scores of several continuations of one context (the context run once)."""

    first: torch.Tensor  # (V,) logits after the context: predict each continuation's first token
    tails: list[torch.Tensor]  # per continuation c: (len(c) - 1, V) logits predicting its later tokens
    executed: np.ndarray | None  # (R, n) over the n real tokens fed (context, then continuation tokens)
    positions: np.ndarray  # (n,) position of each fed token in its sequence


class Method:
    """What :func:`evaluate` runs. Subclasses implement :meth:`forward`; :meth:`generate` has a
    (slow, cache-free) default built on it.

    Attributes: ``name`` (label in results), ``tokenizer``, ``profile`` (a
    :class:`~hero_core.accounting.ComputeProfile`, or None: no param-skip figures), ``routed`` (whether
    router/adapter work is charged in the net figures), ``max_tokens`` (longest input).
    """

    name: str = "method"
    tokenizer: Any = None
    profile: ComputeProfile | None = None
    routed: bool = True
    max_tokens: int = 2048

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Forward:
        raise NotImplementedError

    def generate(self, prompt: str, max_new_tokens: int, stop: Sequence[str] = ()) -> Generation:
        """Greedy decoding by re-running the whole sequence each step (no KV cache)."""
        ids = self.tokenizer(prompt, add_special_tokens=True)["input_ids"][-max(1, self.max_tokens - max_new_tokens):]
        eos = self.tokenizer.eos_token_id
        executed, fed = None, 0
        new: list[int] = []
        for _ in range(max_new_tokens):
            batch = torch.tensor([ids + new])
            out = self.forward(batch, torch.ones_like(batch))
            executed, fed = (None if out.executed is None else out.executed[0]), batch.shape[1]
            next_id = int(out.logits[0, -1].argmax())
            if next_id == eos:
                break
            new.append(next_id)
            if _stopped(self.tokenizer.decode(new, skip_special_tokens=True), stop):
                break
        # the last forward covered every token fed (its routing of earlier tokens is that of earlier steps)
        return Generation(_cut(self.tokenizer.decode(new, skip_special_tokens=True), stop), executed, fed)


class HeroMethod(Method):
    """A HeRo model run as one variant (``dense`` = the unchanged backbone), optionally with a routing
    ``policy`` from :mod:`hero_core.baselines` replacing the router's hard decision.

    With a policy, log-likelihoods are scored on full sequences (a policy may look at a whole pass,
    e.g. expert choice), while generation still decodes with the KV cache, one token per pass."""

    def __init__(self, hero, variant: str = "hero", tau: float | None = None, name: str | None = None, *,
                 policy: Callable | None = None) -> None:
        if variant not in INFERENCE_VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; choose one of {', '.join(INFERENCE_VARIANTS)}")
        self.hero = hero
        self.variant = variant
        self.tau = tau
        self.policy = policy
        self.name = name or (variant if tau is None else f"{variant}@tau={tau:g}")
        self.tokenizer = hero.tokenizer
        self.profile = hero.profile
        self.routed = variant != "dense"
        self.max_tokens = hero.max_tokens
        self.shares_prefix = policy is None

    def _call(self):
        extra = {"policy": self.policy} if self.policy is not None else {}
        return self.hero.new_call(self.variant, self.tau, record=self.routed, **extra)

    def _executed(self, call, B: int, T: int, passes: slice = slice(None)) -> np.ndarray | None:
        if not self.routed:
            return None
        blocks = [torch.stack([r.executed for r in p.records]).view(-1, B, T) for p in call.passes[passes]]
        return torch.cat(blocks, dim=2).permute(1, 0, 2).cpu().numpy()  # (B, R, T)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Forward:
        call = self._call()
        device = self.hero.device
        with torch.no_grad():
            logits = self.hero.forward(input_ids.to(device), attention_mask.to(device), call, use_cache=False)
        B, T = input_ids.shape
        return Forward(logits.float().cpu(), self._executed(call, B, T))

    def forward_shared(self, context: list[int], continuations: list[list[int]]) -> SharedForward:
        """Fast path of :func:`loglikelihood`: the context once (KV cache), then every continuation that has
        more than one token as a right-padded batch on copies of the cache. Routing is per token with no
        state across tokens, so every token is routed exactly as in a full forward."""
        from transformers import DynamicCache

        hero, device = self.hero, self.hero.device
        call = self._call()
        cache = DynamicCache(config=hero.model.config)
        n_ctx = len(context)
        with torch.no_grad():
            first = hero.forward(torch.tensor([context], device=device), None, call, cache=cache, use_cache=True,
                                 logits_to_keep=1)[0, -1].float().cpu()  # only the last position is scored
            feed = [i for i, c in enumerate(continuations) if len(c) > 1]
            tails = [torch.empty(0, first.shape[-1]) for _ in continuations]
            lengths: list[int] = []
            if feed:
                lengths = [len(continuations[i]) - 1 for i in feed]
                width = max(lengths)
                pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
                ids = torch.full((len(feed), width), pad, dtype=torch.long)
                mask = torch.zeros((len(feed), n_ctx + width), dtype=torch.long)
                mask[:, :n_ctx] = 1
                for row, i in enumerate(feed):
                    ids[row, : lengths[row]] = torch.tensor(continuations[i][:-1])
                    mask[row, n_ctx: n_ctx + lengths[row]] = 1
                cache.batch_repeat_interleave(len(feed))
                logits = hero.forward(ids.to(device), mask.to(device), call, cache=cache, use_cache=True).float().cpu()
                for row, i in enumerate(feed):
                    tails[i] = logits[row, : lengths[row]]
        positions = [np.arange(n_ctx)] + [n_ctx + np.arange(n) for n in lengths]
        executed = None
        if self.routed:
            parts = [self._executed(call, 1, n_ctx, slice(0, 1))[0]]
            if feed:
                cont = self._executed(call, len(feed), max(lengths), slice(1, 2))  # (k, R, width)
                parts += [cont[row][:, :n] for row, n in enumerate(lengths)]
            executed = np.concatenate(parts, axis=1)
        return SharedForward(first, tails, executed, np.concatenate(positions))

    def generate(self, prompt: str, max_new_tokens: int, stop: Sequence[str] = ()) -> Generation:
        """Greedy decoding with the KV cache, routed token by token, stopping at ``stop`` strings."""
        from transformers import DynamicCache

        hero = self.hero
        enc = hero.encode([prompt], max_tokens=max(1, hero.max_tokens - max_new_tokens))
        call = self._call()
        cache = DynamicCache(config=hero.model.config)
        eos = self.tokenizer.eos_token_id
        new: list[int] = []
        with torch.no_grad():
            logits = hero.forward(enc.input_ids, None, call, cache=cache, use_cache=True)
            for _ in range(max_new_tokens):
                next_id = int(logits[0, -1].argmax())
                if next_id == eos:
                    break
                new.append(next_id)
                if len(new) == max_new_tokens or _stopped(self.tokenizer.decode(new, skip_special_tokens=True), stop):
                    break
                step = torch.tensor([[next_id]], device=hero.device)
                logits = hero.forward(step, None, call, cache=cache, use_cache=True)
        executed = None
        if self.routed:  # one pass per fed chunk: the prompt, then one token per step
            executed = np.concatenate([self._executed(call, 1, p.shape[1], slice(i, i + 1))[0]
                                       for i, p in enumerate(call.passes)], axis=1)
        n_fed = enc.input_ids.shape[1] + max(0, len(call.passes) - 1)
        return Generation(_cut(self.tokenizer.decode(new, skip_special_tokens=True), stop), executed, n_fed)


class CallableMethod(Method):
    """Wrap ``fn(input_ids, attention_mask) -> (logits (B,T,V), executed (B,R,T) bool or None)``.

    ``profile`` enables param-skip figures (use ``hero.profile`` for a policy on the same backbone);
    ``routed`` says whether router/adapter work is charged in the net figures."""

    def __init__(self, name: str, fn: Callable[[torch.Tensor, torch.Tensor], tuple], tokenizer, *,
                 profile: ComputeProfile | None = None, routed: bool = True, max_tokens: int = 2048) -> None:
        self.name, self.fn, self.tokenizer = name, fn, tokenizer
        self.profile, self.routed, self.max_tokens = profile, routed, max_tokens

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Forward:
        with torch.no_grad():
            logits, executed = self.fn(input_ids, attention_mask)
        if executed is not None:
            executed = np.asarray(executed.cpu() if isinstance(executed, torch.Tensor) else executed, dtype=bool)
        return Forward(logits.float().cpu(), executed)


def _stopped(text: str, stop: Sequence[str]) -> bool:
    return any(s in text for s in stop)


def _cut(text: str, stop: Sequence[str]) -> str:
    return humaneval.truncate(text, tuple(stop)) if stop else text


# == compute accounting ============================================================================
@dataclass
class ComputeTally:
    """Accumulates per-token compute figures over many forwards (token-weighted means)."""

    profile: ComputeProfile | None
    routed: bool
    n_tokens: int = 0
    sums: dict[str, float] = field(default_factory=lambda: {"param_skip": 0.0, "net_param_skip": 0.0,
                                                            "flop_share_saved": 0.0})
    executed_per_layer: np.ndarray | None = None  # (R,) count of tokens that ran each FFN
    ffn_executed: float = 0.0

    def add(self, executed: np.ndarray | None, n_tokens: int, positions: np.ndarray | None = None) -> None:
        """``executed`` (R, n) bool for n tokens, or None (every FFN ran)."""
        if n_tokens == 0:
            return
        self.n_tokens += n_tokens
        if executed is None:
            return
        executed = np.asarray(executed, dtype=bool)
        if self.executed_per_layer is None:
            self.executed_per_layer = np.zeros(executed.shape[0])
        self.executed_per_layer += executed.sum(axis=1)
        self.ffn_executed += float(executed.sum())
        if self.profile is not None:
            figures = token_compute(executed, self.profile, positions=positions, routed=self.routed)
            for key in self.sums:
                self.sums[key] += float(figures[key].sum())

    def summary(self) -> dict[str, Any]:
        n = max(self.n_tokens, 1)
        if self.executed_per_layer is None:  # dense: nothing skipped, no router work
            R = self.profile.n_layers if self.profile is not None else 0
            return {"tokens": self.n_tokens, "param_skip": 0.0, "net_param_skip": 0.0, "flop_share_saved": 0.0,
                    "ffn_executed_per_token": float(R), "layer_skip_rates": [0.0] * R}
        out: dict[str, Any] = {"tokens": self.n_tokens}
        if self.profile is not None:
            out.update({k: v / n for k, v in self.sums.items()})
        out["ffn_executed_per_token"] = self.ffn_executed / n
        out["layer_skip_rates"] = (1.0 - self.executed_per_layer / n).round(6).tolist()
        return out


def _tally_rows(tally: ComputeTally, executed: np.ndarray | None, lengths: Sequence[int]) -> None:
    """Add each row's real tokens (right padding) of a batch's executed (B, R, T) to ``tally``."""
    for b, n in enumerate(lengths):
        tally.add(None if executed is None else executed[b][:, :n], n, np.arange(n))


# == log-likelihood scoring ========================================================================
def encode_pair(tokenizer, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """lm-evaluation-harness's split: trailing spaces of the context move to the continuation; the
    continuation tokens are those of ``tokenize(context + continuation)`` after ``tokenize(context)``."""
    spaces = len(context) - len(context.rstrip())
    if spaces:
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    whole = tokenizer(context + continuation, add_special_tokens=True)["input_ids"]
    ctx = tokenizer(context, add_special_tokens=True)["input_ids"]
    return whole[: len(ctx)], whole[len(ctx):]


def loglikelihood(method: Method, requests: Sequence[tuple[str, str]], *, batch_tokens: int = DEFAULT_BATCH_TOKENS,
                  tally: ComputeTally | None = None, progress: bool = False, desc: str = "scoring",
                  shared_prefix: bool | None = None) -> list[tuple[float, int]]:
    """Summed log-probability of each continuation given its context: ``[(logprob, n_tokens), ...]``.

    Contexts and continuations are split into tokens as lm-evaluation-harness does (:func:`encode_pair`);
    rows longer than ``method.max_tokens`` lose tokens on the left. Two ways to run them, with equal
    results (a test checks it):

    * **shared prefix** (default when the method has ``forward_shared``, e.g. :class:`HeroMethod`):
      each distinct context runs once and its continuations run on copies of its KV cache; about
      2.5x fewer tokens on BIG-bench, whose prompts are long and choices short;
    * **rows** (any method): each request is the row ``(context + continuation)[:-1]``; identical
      rows run once (single-token choices of one prompt share a row); rows are sorted by length and
      batched up to ``batch_tokens`` tokens.

    Compute figures of every token fed are added to ``tally``."""
    plans = []  # per request: (context ids, continuation ids), truncated
    for context, continuation in requests:
        ctx, cont = encode_pair(method.tokenizer, context, continuation)
        if not cont:
            raise ValueError(f"empty continuation for context {context[-60:]!r}")
        if not ctx:  # nothing to condition on: start from the end-of-text token, as lm-eval does
            ctx = [method.tokenizer.eos_token_id]
        plans.append((ctx, cont))
    if shared_prefix is None:
        shared_prefix = callable(getattr(method, "forward_shared", None)) and getattr(method, "shares_prefix", True)
    run = _loglikelihood_shared if shared_prefix else _loglikelihood_rows
    return run(method, plans, batch_tokens=batch_tokens, tally=tally, progress=progress, desc=desc)


def _loglikelihood_shared(method: Method, plans: list[tuple[list[int], list[int]]], *, batch_tokens: int,
                          tally: ComputeTally | None, progress: bool, desc: str) -> list[tuple[float, int]]:
    from tqdm import tqdm

    groups: dict[tuple[int, ...], list[int]] = {}
    for i, (ctx, _) in enumerate(plans):
        groups.setdefault(tuple(ctx), []).append(i)
    out: list[tuple[float, int]] = [(0.0, 0)] * len(plans)
    for ctx, members in tqdm(groups.items(), desc=desc, disable=not progress, leave=False):
        conts = list(dict.fromkeys(tuple(plans[i][1]) for i in members))
        longest = max(len(c) for c in conts)
        cut = min(len(ctx) - 1, max(0, len(ctx) + longest - 1 - method.max_tokens))
        shared = method.forward_shared(list(ctx[cut:]), [list(c) for c in conts])
        if tally is not None:
            tally.add(shared.executed, len(shared.positions), shared.positions + cut)
        first = F.log_softmax(shared.first, dim=-1)
        scores = {}
        for c, tail in zip(conts, shared.tails, strict=True):
            total = float(first[c[0]])
            if len(c) > 1:
                total += float(F.log_softmax(tail, dim=-1)[torch.arange(len(c) - 1), torch.tensor(c[1:])].sum())
            scores[c] = total
        for i in members:
            cont = tuple(plans[i][1])
            out[i] = (scores[cont], len(cont))
    return out


def _loglikelihood_rows(method: Method, plans: list[tuple[list[int], list[int]]], *, batch_tokens: int,
                        tally: ComputeTally | None, progress: bool, desc: str) -> list[tuple[float, int]]:
    from tqdm import tqdm

    rows: dict[tuple[int, ...], list[tuple[int, int]]] = {}  # row ids -> [(request, predicting position)]
    for r, (ctx, cont) in enumerate(plans):
        whole = ctx + cont
        cut = max(0, len(whole) - 1 - method.max_tokens)
        rows.setdefault(tuple(whole[cut:-1]), []).append((r, len(ctx) - 1 - cut))
    order = sorted(rows, key=len, reverse=True)
    out: list[tuple[float, int]] = [(0.0, 0)] * len(plans)
    pad = method.tokenizer.pad_token_id if method.tokenizer.pad_token_id is not None else 0
    bar = tqdm(total=len(order), desc=desc, disable=not progress, leave=False)
    i = 0
    while i < len(order):
        width = len(order[i])
        n = max(1, min(len(order) - i, batch_tokens // max(width, 1)))
        batch = order[i: i + n]
        input_ids = torch.full((n, width), pad, dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.long)
        for b, ids in enumerate(batch):
            input_ids[b, : len(ids)] = torch.tensor(ids)
            mask[b, : len(ids)] = 1
        fwd = method.forward(input_ids, mask)
        if tally is not None:
            _tally_rows(tally, fwd.executed, [len(ids) for ids in batch])
        for b, ids in enumerate(batch):
            first = max(0, min(start for _, start in rows[ids]))  # every request ends at the row's last token
            logprobs = F.log_softmax(fwd.logits[b, first: len(ids)].float(), dim=-1)
            for r, start in rows[ids]:
                cont = plans[r][1]
                positions = torch.arange(start, start + len(cont))
                kept = positions >= 0  # tokens whose predicting position was cut away are not scored
                target = torch.tensor(cont)[kept]
                out[r] = (float(logprobs[positions[kept] - first, target].sum()), len(cont))
        bar.update(n)
        i += n
    bar.close()
    return out


def score_multiple_choice(method: Method, examples: Sequence[bigbench.MCExample], *,
                          batch_tokens: int = DEFAULT_BATCH_TOKENS, tally: ComputeTally | None = None,
                          progress: bool = False, desc: str = "multiple choice",
                          shared_prefix: bool | None = None) -> dict[str, Any]:
    """Accuracy (BIG-bench multiple_choice_grade) and length-normalised accuracy of ``examples``;
    ``picks`` holds the chosen choice index of each example."""
    requests = [(ex.context, choice) for ex in examples for choice in ex.choices]
    scored = loglikelihood(method, requests, batch_tokens=batch_tokens, tally=tally, progress=progress, desc=desc,
                           shared_prefix=shared_prefix)
    grades, grades_norm, picks = [], [], []
    k = 0
    for ex in examples:
        lps = np.array([s for s, _ in scored[k: k + len(ex.choices)]])
        norm = lps / np.array([max(len(c), 1) for c in ex.choices])  # per character, as lm-eval acc_norm
        k += len(ex.choices)
        pick = int(np.argmax(lps))
        picks.append(pick)
        grades.append(ex.scores[pick])
        grades_norm.append(ex.scores[int(np.argmax(norm))])
    n = len(examples)
    return {"accuracy": float(np.mean(grades)) if n else 0.0,
            "accuracy_norm": float(np.mean(grades_norm)) if n else 0.0,
            "chance": float(np.mean([ex.chance for ex in examples])) if n else 0.0, "n": n, "picks": picks}


def retain(routed: dict[str, float], dense: dict[str, float]) -> float | None:
    """Retain (%): mean over tasks of routed score / dense score (tasks with a dense score of 0 are left
    out: their ratio is undefined). None when no task is left."""
    ratios = [routed[t] / dense[t] for t in routed if t in dense and dense[t] > 0]
    return 100.0 * float(np.mean(ratios)) if ratios else None


# == suites ========================================================================================
def load_eval_tasks(path: Path | None = None) -> dict[str, Any]:
    """The committed task selection (``hero_core/eval_tasks.json`` unless ``path`` is given)."""
    path = Path(path) if path is not None else EVAL_TASKS_FILE
    if not path.is_file():
        raise ValueError(f"no task selection at {path}; run `python -m hero_core eval --select-tasks` once "
                         f"(dense model) to fix the BIG-bench suites")
    return json.loads(path.read_text(encoding="utf-8"))


def evaluate_bigbench(method: Method, tasks: Sequence[str], limit: int | None, *, progress: bool = False,
                      batch_tokens: int = DEFAULT_BATCH_TOKENS) -> dict[str, Any]:
    """Accuracy of each BIG-bench task on its first ``limit`` examples, and compute over all of them."""
    bigbench.ensure_tasks(list(tasks))
    tally = ComputeTally(method.profile, method.routed)
    per_task = {}
    for name in tasks:
        task = bigbench.load_task(name)
        task_tally = ComputeTally(method.profile, method.routed)
        result = score_multiple_choice(method, task.head(limit), batch_tokens=batch_tokens, tally=task_tally,
                                       progress=progress, desc=f"{method.name} · {name}")
        result.pop("picks")
        result["compute"] = _compact(task_tally.summary())
        per_task[name] = result
        _merge(tally, task_tally)
    accuracies = [r["accuracy"] for r in per_task.values()]
    return {"tasks": per_task, "mean_accuracy": float(np.mean(accuracies)) if accuracies else None,
            "compute": tally.summary()}


def _merge(into: ComputeTally, other: ComputeTally) -> None:
    into.n_tokens += other.n_tokens
    for key in into.sums:
        into.sums[key] += other.sums[key]
    into.ffn_executed += other.ffn_executed
    if other.executed_per_layer is not None:
        into.executed_per_layer = other.executed_per_layer.copy() if into.executed_per_layer is None \
            else into.executed_per_layer + other.executed_per_layer


def _compact(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k != "layer_skip_rates"}


def evaluate_humaneval(method: Method, limit: int | None, *, max_new_tokens: int = 300, style: str = "auto",
                       timeout_s: float = humaneval.DEFAULT_TIMEOUT_S, progress: bool = False,
                       keep_completions: bool = True) -> dict[str, Any]:
    """HumanEval pass@1 with greedy decoding. ``style`` is ``completion`` (raw prompt, the original
    protocol), ``chat`` (instruction + pre-filled code fence) or ``auto`` (chat when the tokenizer has
    a chat template); see :mod:`hero_core.humaneval`."""
    from tqdm import tqdm

    if style == "auto":
        style = "chat" if getattr(method.tokenizer, "chat_template", None) else "completion"
    template = None
    if style == "chat":
        def template(text: str) -> str:
            return method.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                        add_generation_prompt=True)
    problems = humaneval.load_problems(limit)
    tally = ComputeTally(method.profile, method.routed)
    rows = []
    for problem in tqdm(problems, desc=f"{method.name} · humaneval", disable=not progress, leave=False):
        prompt = humaneval.build_prompt(problem, style, template)
        gen = method.generate(prompt, max_new_tokens, humaneval.stop_sequences(style))
        tally.add(gen.executed, gen.n_tokens)
        completion = humaneval.completion_from(gen.text, style)
        result = humaneval.check_completion(problem, completion, timeout_s=timeout_s)
        row = {"task_id": problem.task_id, "status": result.status, "detail": result.detail}
        if keep_completions:
            row["completion"] = completion
        rows.append(row)
    passed = sum(r["status"] == "passed" for r in rows)
    return {"pass@1": passed / len(rows) if rows else None, "n": len(rows), "passed": passed, "style": style,
            "compute": tally.summary(), "problems": rows}


_ANSWER = re.compile(r"[Tt]he answer is[:\s]*\$?\s*(-?[\d,]*\.?\d+|[A-Za-z][\w'-]*)")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def parse_answer(text: str) -> str | None:
    """The answer in generated text: 'The answer is X' (first occurrence), else the last number."""
    match = _ANSWER.search(text)
    if match:
        return match.group(1)
    numbers = _NUMBER.findall(text)
    return numbers[-1] if numbers else None


def normalize_answer(answer: str | None) -> str:
    if answer is None:
        return ""
    text = answer.strip().rstrip(".").replace(",", "").lower()
    try:
        value = float(text)
        return str(int(value)) if value == int(value) else str(value)
    except ValueError:
        return text


def answers_match(predicted: str | None, answer: str) -> bool:
    return normalize_answer(predicted) == normalize_answer(answer) and predicted is not None


def reasoning_exemplars(shots: int = REASONING_SHOTS) -> list[str]:
    """``shots`` worked *train*-split problems, cycling through the problem kinds (arithmetic story,
    expression, ordering) so each kind is shown once before any repeats."""
    from .data import reasoning_problems

    pool = reasoning_problems(max(60, 10 * shots), "train", seed=12345)
    kinds = sorted({p.kind for p in pool})
    by_kind = {k: [p for p in pool if p.kind == k] for k in kinds}
    return [by_kind[kinds[i % len(kinds)]][i // len(kinds)].text for i in range(shots)]


def reasoning_prompt(question: str, shots: int = REASONING_SHOTS) -> str:
    """Few-shot prompt: ``shots`` worked train-split problems, then ``Question: ...\\nAnswer:``."""
    return "\n\n".join(reasoning_exemplars(shots) + [f"Question: {question}\nAnswer:"])


def evaluate_reasoning(method: Method, limit: int | None, *, shots: int = REASONING_SHOTS,
                       max_new_tokens: int = 96, progress: bool = False) -> dict[str, Any]:
    """Exact match of the generated answer on held-out generated problems (``data.reasoning_problems``)."""
    from tqdm import tqdm

    from .data import reasoning_problems

    problems = reasoning_problems(limit or 100, "eval")
    tally = ComputeTally(method.profile, method.routed)
    rows = []
    for problem in tqdm(problems, desc=f"{method.name} · reasoning", disable=not progress, leave=False):
        gen = method.generate(reasoning_prompt(problem.question, shots), max_new_tokens, REASONING_STOPS)
        tally.add(gen.executed, gen.n_tokens)
        predicted = parse_answer(gen.text)
        rows.append({"kind": problem.kind, "answer": problem.answer, "predicted": predicted,
                     "correct": answers_match(predicted, problem.answer), "generated": gen.text})
    correct = sum(r["correct"] for r in rows)
    by_kind: dict[str, list[bool]] = {}
    for r in rows:
        by_kind.setdefault(r["kind"], []).append(r["correct"])
    return {"exact_match": correct / len(rows) if rows else None, "n": len(rows), "correct": correct,
            "by_kind": {k: float(np.mean(v)) for k, v in by_kind.items()}, "compute": tally.summary(),
            "problems": rows}


def evaluate_domains(hero, methods: Sequence[Method], reference: Method, limit: int | None, *,
                     max_tokens: int = DEFAULT_DOMAIN_TOKENS, batch_size: int = 2, progress: bool = False,
                     domains: Sequence[str] = ("chat", "code", "reasoning")) -> dict[str, dict[str, Any]]:
    """Per domain and method: NLL, perplexity, top-1 agreement and KL(dense || routed), plus compute.

    Each batch of held-out texts is run once through ``reference`` (dense) and then every method, so
    dense logits never need storing. Returns ``{method: {domain: figures}}``."""
    from tqdm import tqdm

    from .data import domain_texts

    out: dict[str, dict[str, Any]] = {m.name: {} for m in methods}
    for domain in domains:
        texts = domain_texts(domain, "eval", limit or 20, hero=hero)
        acc = {m.name: {"nll": 0.0, "nll_dense": 0.0, "kl": 0.0, "agree": 0.0, "n_pred": 0, "n_pos": 0,
                        "tally": ComputeTally(m.profile, m.routed)} for m in methods}
        for i in tqdm(range(0, len(texts), batch_size), desc=f"domain {domain}", disable=not progress, leave=False):
            enc = hero.encode(texts[i: i + batch_size], max_tokens=max_tokens)
            ids, mask = enc.input_ids.cpu(), enc.attention_mask.cpu()
            lengths = mask.sum(1).tolist()
            dense = reference.forward(ids, mask).logits
            for m in methods:
                fwd = Forward(dense, None) if m is reference else m.forward(ids, mask)
                a = acc[m.name]
                _tally_rows(a["tally"], fwd.executed, lengths)
                for b, n in enumerate(lengths):
                    d, r, t = dense[b, :n], fwd.logits[b, :n], ids[b, :n]
                    a["nll"] += float(F.cross_entropy(r[:-1], t[1:], reduction="sum"))
                    a["nll_dense"] += float(F.cross_entropy(d[:-1], t[1:], reduction="sum"))
                    p_log, q_log = F.log_softmax(d, -1), F.log_softmax(r, -1)
                    a["kl"] += float((p_log.exp() * (p_log - q_log)).sum())
                    a["agree"] += float((d.argmax(-1) == r.argmax(-1)).sum())
                    a["n_pred"] += n - 1
                    a["n_pos"] += n
        for m in methods:
            a = acc[m.name]
            nll = a["nll"] / max(a["n_pred"], 1)
            nll_dense = a["nll_dense"] / max(a["n_pred"], 1)
            out[m.name][domain] = {
                "texts": len(texts), "tokens": a["n_pos"], "nll": nll, "perplexity": math.exp(nll),
                "nll_dense": nll_dense, "perplexity_dense": math.exp(nll_dense),
                "perplexity_retention": math.exp(nll_dense - nll), "kl_from_dense": a["kl"] / max(a["n_pos"], 1),
                "top1_agreement": a["agree"] / max(a["n_pos"], 1), "compute": a["tally"].summary()}
    return out


# == the whole evaluation ==========================================================================
def evaluate(hero, variants: Sequence[str] = ("hero", "dense"), suites: Sequence[str] = ("main",),
             limit: int | None = 50, *, tau: float | None = None, methods: Sequence[Method] = (),
             progress: bool = False, tasks_file: Path | None = None,
             humaneval_tokens: int = 300, humaneval_style: str = "auto", reasoning_tokens: int = 96,
             domain_tokens: int = DEFAULT_DOMAIN_TOKENS,
             keep_samples: bool = True) -> dict[str, Any]:
    """Evaluate ``variants`` of ``hero`` (and any extra ``methods``) on ``suites``.

    The dense model is always evaluated as the reference (reported under ``dense``); every suite of
    every other method gets its Retain against it. ``limit`` caps examples per BIG-bench task,
    HumanEval problems, reasoning problems and texts per domain (None = all; domains default to 20).
    Returns a JSON-ready dict: ``{"config", "results": {method: {suite: ...}}, "summary": [...]}``."""
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        raise ValueError(f"unknown suites {unknown}; choose from {', '.join(SUITES)}")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")
    reference = HeroMethod(hero, "dense")
    runs: list[Method] = [reference] + [HeroMethod(hero, v, tau) for v in dict.fromkeys(variants) if v != "dense"]
    runs += list(methods)
    names = [m.name for m in runs]
    if len(set(names)) != len(names):
        raise ValueError(f"method names must be distinct, got {names}")
    selection = load_eval_tasks(tasks_file) if {"main", "extended"} & set(suites) else {}
    results: dict[str, dict[str, Any]] = {m.name: {} for m in runs}
    timing: dict[str, dict[str, float]] = {m.name: {} for m in runs}
    for suite in suites:
        if suite == "domains":
            start = time.perf_counter()
            per_method = evaluate_domains(hero, runs, reference, limit, max_tokens=domain_tokens, progress=progress)
            for m in runs:
                results[m.name]["domains"] = per_method[m.name]
                timing[m.name]["domains (all methods)"] = time.perf_counter() - start
            continue
        for m in runs:
            start = time.perf_counter()
            if suite in ("main", "extended"):
                results[m.name][suite] = evaluate_bigbench(m, selection[suite], limit, progress=progress)
            elif suite == "humaneval":
                results[m.name][suite] = evaluate_humaneval(m, limit, max_new_tokens=humaneval_tokens,
                                                            style=humaneval_style, progress=progress,
                                                            keep_completions=keep_samples)
            elif suite == "reasoning":
                results[m.name][suite] = evaluate_reasoning(m, limit, max_new_tokens=reasoning_tokens,
                                                            progress=progress)
            timing[m.name][suite] = time.perf_counter() - start
            if not keep_samples:
                results[m.name][suite].pop("problems", None)
    _add_retain(results, reference.name)
    return {"config": {"backbone": hero.backbone.name, "checkpoint": hero.checkpoint_name, "variants": list(variants),
                       "methods": names, "suites": list(suites), "limit": limit, "tau": tau,
                       "tasks": {s: selection.get(s) for s in ("main", "extended") if s in suites},
                       "seconds": timing},
            "results": results, "summary": summary_rows(results, reference.name)}


def _suite_scores(suite: str, result: dict) -> dict[str, float]:
    if suite in ("main", "extended"):
        return {t: r["accuracy"] for t, r in result["tasks"].items()}
    if suite == "humaneval":
        return {"humaneval": result["pass@1"]} if result["pass@1"] is not None else {}
    if suite == "reasoning":
        return {"reasoning": result["exact_match"]} if result["exact_match"] is not None else {}
    if suite == "domains":  # higher is better: perplexity retention exp(nll_dense - nll)
        return {d: r["perplexity_retention"] for d, r in result.items()}
    return {}


def _add_retain(results: dict[str, dict[str, Any]], reference: str) -> None:
    for suites in results.values():
        for suite, result in suites.items():
            scores = _suite_scores(suite, result)
            dense = _suite_scores(suite, results[reference][suite])
            if suite == "domains":
                continue  # perplexity retention is reported per domain
            result["retain"] = retain(scores, dense)


def summary_rows(results: dict[str, dict[str, Any]], reference: str) -> list[dict[str, Any]]:
    """One row per (method, suite): score, Retain and compute, for tables."""
    rows = []
    for name, suites in results.items():
        for suite, result in suites.items():
            if suite == "domains":
                for domain, r in result.items():
                    rows.append({"method": name, "suite": f"domain:{domain}", "score": r["perplexity"],
                                 "metric": "perplexity", "retain": 100.0 * r["perplexity_retention"],
                                 "top1_agreement": r["top1_agreement"], "kl_from_dense": r["kl_from_dense"],
                                 **_compact(r["compute"])})
                continue
            score, metric = {"main": (result.get("mean_accuracy"), "mean accuracy"),
                             "extended": (result.get("mean_accuracy"), "mean accuracy"),
                             "humaneval": (result.get("pass@1"), "pass@1"),
                             "reasoning": (result.get("exact_match"), "exact match")}[suite]
            rows.append({"method": name, "suite": suite, "score": score, "metric": metric,
                         "retain": result.get("retain"), **_compact(result["compute"])})
    return rows


# == task selection (dense only) ===================================================================
def select_bigbench_tasks(hero, n: int = bigbench.SELECTION_EXAMPLES, out: Path | None = EVAL_TASKS_FILE, *,
                          progress: bool = True) -> dict[str, Any]:
    """Run the selection rule once: dense accuracy of every candidate on its first ``n`` examples,
    :func:`hero_core.bigbench.select_tasks`, and (with ``out``) the record written as JSON."""
    method = HeroMethod(hero, "dense")
    candidates = bigbench.all_candidates()
    bigbench.ensure_tasks(candidates)
    dense: dict[str, dict[str, Any]] = {}
    start = time.perf_counter()
    for name in candidates:
        task = bigbench.load_task(name)
        t0 = time.perf_counter()
        result = score_multiple_choice(method, task.head(n), progress=progress, desc=f"dense · {name}")
        dense[name] = {"pool": bigbench.pool_of(name), "accuracy": result["accuracy"], "chance": result["chance"],
                       "n": result["n"], "accuracy_norm": result["accuracy_norm"],
                       "seconds": round(time.perf_counter() - t0, 1)}
        log.info("%s: dense accuracy %.3f (chance %.3f)", name, result["accuracy"], result["chance"])
    record = selection_record(dense, n, hero.backbone.name, time.perf_counter() - start)
    if out is not None:
        Path(out).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record


def selection_record(dense: dict[str, dict[str, Any]], n: int, backbone: str, seconds: float) -> dict[str, Any]:
    """The selection outcome as stored in ``eval_tasks.json``: the rule, every candidate's dense figures
    (with the margin over chance and its z-score under chance, for reading the evidence), the suites."""
    for r in dense.values():
        r["margin"] = r["accuracy"] - r["chance"]
        spread = math.sqrt(max(r["chance"] * (1 - r["chance"]), 1e-12) / max(r["n"], 1))
        r["z_vs_chance"] = round(r["margin"] / spread, 2)
    chosen = bigbench.select_tasks(dense)
    return {
        "rule": (f"dense accuracy on the first {n} examples (fixed shuffled order) at least "
                 f"{100 * bigbench.SELECTION_MARGIN:.0f} points above BIG-bench chance; main = the "
                 f"{bigbench.MAIN_SUITE_SIZE} passing commonsense tasks with the largest margin (filled from "
                 f"reasoning, then code, by margin, if fewer pass); extended = every passing reasoning and code "
                 f"task (it may overlap main). Decided on dense results only, before any routed model was scored."),
        "examples_per_task": n, "margin": bigbench.SELECTION_MARGIN, "backbone": backbone,
        "bigbench_version": bigbench.BIGBENCH_VERSION, "scoring": "sum of continuation token log-probs (lm-eval acc)",
        "main": chosen["main"], "extended": chosen["extended"], "passed": chosen["passed"], "failed": chosen["failed"],
        "candidates": {pool: list(names) for pool, names in bigbench.CANDIDATE_POOLS.items()},
        "dense": dense, "seconds": round(seconds, 1),
    }


# == lm-evaluation-harness =========================================================================
def lm_eval_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("lm_eval") is not None


def _lm_eval_config(task_yaml: Path) -> dict[str, Any]:
    """Load a task YAML with lm-eval's loader and make relative ``data_files`` absolute (relative to the
    YAML), so a task directory works from any working directory."""
    try:  # lm-eval's own loader (handles !function and include:) moved within 0.4.x
        from lm_eval.tasks._yaml_loader import load_yaml

        config = dict(load_yaml(task_yaml))
    except ImportError:
        from lm_eval.utils import load_yaml_config

        config = dict(load_yaml_config(yaml_path=str(task_yaml)))
    kwargs = dict(config.get("dataset_kwargs") or {})
    files = kwargs.get("data_files")
    if files is not None:
        def fix(p: str) -> str:
            return p if os.path.isabs(p) else str((task_yaml.parent / p).resolve())

        kwargs["data_files"] = ({k: fix(v) if isinstance(v, str) else [fix(x) for x in v] for k, v in files.items()}
                                if isinstance(files, dict) else fix(files) if isinstance(files, str)
                                else [fix(x) for x in files])
        config["dataset_kwargs"] = kwargs
    return config


def run_lm_eval(hero, task_yaml: str | os.PathLike, variant: str = "hero", *, tau: float | None = None,
                limit: int | None = None, batch_size: int = 8) -> dict[str, Any]:
    """Run an lm-evaluation-harness task (a local YAML) on ``hero`` routed as ``variant``.

    The wrapped HF model is handed to ``HFLM(pretrained=model, tokenizer=tok)`` and every forward lm-eval
    makes runs inside one routing call, so the harness scores the routed model; datasets stay offline
    (``HF_DATASETS_OFFLINE=1``). Returns the task's metrics and the compute over all scored tokens."""
    if not lm_eval_available():
        raise ValueError("lm-evaluation-harness is not installed: pip install lm-eval==0.4.13")
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM

    from .routing import routing_call

    task_yaml = Path(task_yaml)
    if not task_yaml.is_file():
        raise ValueError(f"no lm-eval task file at {task_yaml}")
    config = _lm_eval_config(task_yaml)
    lm = HFLM(pretrained=hero.model, tokenizer=hero.tokenizer, batch_size=batch_size,
              device=str(hero.device), max_length=hero.max_tokens)
    method = HeroMethod(hero, variant, tau)
    call = hero.new_call(variant, tau, record=method.routed)
    with routing_call(call), torch.no_grad():
        output = simple_evaluate(model=lm, tasks=[config], limit=limit, log_samples=False, bootstrap_iters=0,
                                 verbosity="WARNING")
    tally = ComputeTally(method.profile, method.routed)
    for p in call.passes:
        B, T = p.shape
        active = p.active.cpu().numpy() if p.active is not None else np.ones((B, T), dtype=bool)
        executed = None
        if method.routed and p.records:
            executed = torch.stack([r.executed for r in p.records]).view(-1, B, T).cpu().numpy()
        for b in range(B):
            keep = active[b]
            tally.add(None if executed is None else executed[:, b, keep], int(keep.sum()),
                      np.flatnonzero(keep))
    task_name = config.get("task", task_yaml.stem)
    metrics = {k: v for k, v in output["results"].get(task_name, {}).items() if isinstance(v, (int, float))}
    return {"task": task_name, "variant": method.name, "limit": limit, "metrics": metrics,
            "compute": _compact(tally.summary())}


def write_reasoning_mc_task(directory: Path = LM_EVAL_TASKS_DIR, n: int = 40, seed: int = 7) -> Path:
    """Write the project's own small lm-eval multiple-choice task (YAML + JSONL) from held-out
    generated reasoning problems: four choices, the true answer and three near misses."""
    import random

    from .data import reasoning_problems

    rng = random.Random(f"mc-{seed}")
    rows = []
    for p in reasoning_problems(n, "eval", seed=seed):
        if p.answer.lstrip("-").isdigit():
            value = int(p.answer)
            pool = sorted({value + d for d in (-10, -3, -2, -1, 1, 2, 3, 10)} - {value})
            wrong = [str(v) for v in rng.sample(pool, 3)]
        else:
            names = [w.strip(".,?") for w in p.question.split() if w[:1].isupper() and w.strip(".,?") != p.answer]
            names = [w for w in dict.fromkeys(names) if w not in ("Who", "The", "Then", "How", "Compute", "First")]
            wrong = names[:3]
            if len(wrong) < 3:
                continue
        choices = [p.answer] + wrong
        rng.shuffle(choices)
        rows.append({"question": p.question, "choices": choices, "label": choices.index(p.answer), "kind": p.kind})
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / "hero_reasoning_mc.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (directory / "hero_reasoning_mc.yaml").write_text(
        "# HeRo Lens' own multiple-choice task for lm-evaluation-harness: held-out generated reasoning\n"
        "# problems (hero_core.data, eval split), the true answer among three near misses.\n"
        "# Regenerate with hero_core.evaluate.write_reasoning_mc_task(). data_files are relative to this\n"
        "# file; hero_core.evaluate.run_lm_eval makes them absolute.\n"
        "task: hero_reasoning_mc\n"
        "dataset_path: json\n"
        "dataset_kwargs:\n"
        "  data_files:\n"
        "    test: hero_reasoning_mc.jsonl\n"
        "test_split: test\n"
        "output_type: multiple_choice\n"
        "doc_to_text: \"Question: {{question}}\\nAnswer:\"\n"
        "doc_to_choice: \"{{choices}}\"\n"
        "doc_to_target: label\n"
        "metric_list:\n"
        "  - metric: acc\n"
        "    aggregation: mean\n"
        "    higher_is_better: true\n"
        "metadata:\n"
        "  version: 1.0\n", encoding="utf-8")
    return data


def write_bigbench_lm_eval_task(task: bigbench.MCTask, directory: Path, limit: int | None = None) -> Path:
    """Write a BIG-bench task as a local lm-eval task (YAML + JSONL) with the exact prompts used here,
    so the harness and :func:`score_multiple_choice` can be compared on the same examples."""
    directory.mkdir(parents=True, exist_ok=True)
    safe = task.name.replace("/", "__")
    rows = [{"context": e.context, "choices": list(e.choices), "label": e.target} for e in task.head(limit)]
    (directory / f"{safe}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    path = directory / f"{safe}.yaml"
    path.write_text(
        f"task: bigbench_{safe}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {safe}.jsonl\n"
        "test_split: test\noutput_type: multiple_choice\ndoc_to_text: \"{{context}}\"\n"
        "doc_to_choice: \"{{choices}}\"\ndoc_to_target: label\ntarget_delimiter: \"\"\n"
        "metric_list:\n  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n"
        "metadata:\n  version: 1.0\n", encoding="utf-8")
    return path


# == command line ==================================================================================
def add_arguments(p: argparse.ArgumentParser) -> None:
    """``python -m hero_core eval``: the suites, task selection, BIG-bench fetching and lm-eval runs."""
    p.description = __doc__.split("\n\n")[0]
    p.add_argument("--checkpoint", default=None, help="bundled name (hero-25, …) or checkpoint directory")
    p.add_argument("--backbone", default=None, help="local HF model directory (default: embedded SmolLM2-135M)")
    p.add_argument("--quantization", choices=["nf4"], default=None)
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    p.add_argument("--variants", default="hero,dense",
                   help=f"comma-separated, from {', '.join(INFERENCE_VARIANTS)} (dense always runs as reference)")
    p.add_argument("--suites", default="main", help=f"comma-separated, from {', '.join(SUITES)}")
    p.add_argument("--limit", type=int, default=50, help="examples per task / problems / texts per domain")
    p.add_argument("--tau", type=float, default=None, help="gate threshold (default: the checkpoint's)")
    p.add_argument("--humaneval-tokens", type=int, default=300, help="max new tokens per HumanEval completion")
    p.add_argument("--humaneval-style", choices=("auto",) + humaneval.PROMPT_STYLES, default="auto",
                   help="completion: raw prompt (original protocol); chat: instruction + code fence; "
                        "auto: chat when the model has a chat template")
    p.add_argument("--no-samples", action="store_true", help="leave generated completions out of the JSON")
    p.add_argument("--out", type=Path, default=None, help="write the results JSON here")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (use 1 when another job shares the cores: oversubscription is ~7x slower)")
    p.add_argument("--select-tasks", action="store_true",
                   help="run the BIG-bench task-selection rule on the dense model and write hero_core/eval_tasks.json")
    p.add_argument("--selection-examples", type=int, default=bigbench.SELECTION_EXAMPLES)
    p.add_argument("--fetch-bigbench", action="store_true", help="download BIG-bench once and extract the candidates")
    p.add_argument("--lm-eval-task", type=Path, default=None,
                   help="an lm-evaluation-harness task YAML to run on each variant (needs lm-eval installed)")


def run_cli(args) -> int:
    progress = not args.quiet
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be at least 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    if args.fetch_bigbench:
        paths = bigbench.ensure_tasks(bigbench.all_candidates())
        print(f"BIG-bench {bigbench.BIGBENCH_VERSION}: {len(paths)} candidate tasks under {bigbench.tasks_dir()}")
        if not (args.select_tasks or args.lm_eval_task):
            return 0
    from .cli import _load

    hero = _load(args)
    if args.select_tasks:
        record = select_bigbench_tasks(hero, n=args.selection_examples,
                                       out=args.out if args.out is not None else EVAL_TASKS_FILE, progress=progress)
        for name, r in record["dense"].items():
            print(f"{name:42s} {r['pool']:11s} acc {100 * r['accuracy']:5.1f}  chance {100 * r['chance']:5.1f}  "
                  f"{'pass' if name in record['passed'] else '-'}")
        print(f"main: {', '.join(record['main'])}\nextended: {', '.join(record['extended'])}")
        return 0
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in variants:
        if v not in INFERENCE_VARIANTS:
            raise ValueError(f"unknown variant {v!r}; choose from {', '.join(INFERENCE_VARIANTS)}")
    if args.lm_eval_task is not None:
        output = {"lm_eval": [run_lm_eval(hero, args.lm_eval_task, v, tau=args.tau, limit=args.limit)
                              for v in variants]}
        print(json.dumps(output, indent=2))
        if args.out:
            args.out.write_text(json.dumps(output, indent=2) + "\n", encoding="utf-8")
        return 0
    suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    result = evaluate(hero, variants, suites, args.limit, tau=args.tau, progress=progress,
                      humaneval_tokens=args.humaneval_tokens, humaneval_style=args.humaneval_style,
                      keep_samples=not args.no_samples)
    _print_summary(result)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"results written to {args.out}")
    return 0


def _print_summary(result: dict) -> None:
    print(f"{'method':14s} {'suite':18s} {'score':>8s} {'retain %':>9s} {'param skip %':>13s} {'net %':>7s} "
          f"{'FLOPs saved %':>14s}")
    for row in result["summary"]:
        def pct(v):
            return f"{100 * v:.2f}" if isinstance(v, (int, float)) else "-"

        retain_text = f"{row['retain']:.2f}" if isinstance(row.get("retain"), (int, float)) else "-"
        score = f"{row['score']:.4f}" if isinstance(row.get("score"), (int, float)) else "-"
        print(f"{row['method']:14s} {row['suite']:18s} {score:>8s} {retain_text:>9s} "
              f"{pct(row.get('param_skip')):>13s} {pct(row.get('net_param_skip')):>7s} "
              f"{pct(row.get('flop_share_saved')):>14s}")
