"""Log-likelihood scoring as lm-evaluation-harness does it, multiple-choice accuracy and Retain.

Metrics (docs/method.md, "Metrics")
    accuracy       BIG-bench ``multiple_choice_grade``: the target score of the choice with the highest
                   summed log-likelihood given the prompt (lm-evaluation-harness ``acc``).
    Retain         per suite, mean over its tasks of ``routed score / dense score``, in percent
                   (:func:`retain`); dense is always evaluated alongside as the reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from hero_core.eval.benchmarks import bigbench
from hero_core.eval.methods import Method
from hero_core.measures.accounting import ComputeTally

DEFAULT_BATCH_TOKENS = 2048  # tokens per forward batch: logits are B*T*V floats (~400 MB at V = 49k)


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
            tally.add_rows(fwd.executed, [len(ids) for ids in batch])
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
    ``picks`` holds the chosen choice index of each example, ``grades`` its score (the per-example values
    whose mean is ``accuracy``: what a bootstrap over examples resamples, :mod:`hero_core.eval.suites.retain`)."""
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
            "chance": float(np.mean([ex.chance for ex in examples])) if n else 0.0, "n": n, "picks": picks,
            "grades": [float(g) for g in grades]}


def retain(routed: dict[str, float], dense: dict[str, float]) -> float | None:
    """Retain (%): mean over tasks of routed score / dense score (tasks with a dense score of 0 are left
    out: their ratio is undefined). None when no task is left."""
    ratios = [routed[t] / dense[t] for t in routed if t in dense and dense[t] > 0]
    return 100.0 * float(np.mean(ratios)) if ratios else None
