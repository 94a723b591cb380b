"""What the paired probes of this folder share (decision_precision.py, memory_read.py): dense and two routed runs of
the same checkpoint on the bf16 backbone, timed in turn on a 4 x 512 prefill and compared on held-out texts.

A run is named by a ``setup`` callable that puts its variant in place before each pass (None: the dense model).
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from hero_core.bench.inputs import batch_of, token_pool  # noqa: E402
from hero_core.data.texts import domain_texts  # noqa: E402
from hero_core.measures.accounting import flop_ideal  # noqa: E402

Runs = dict[str, Callable[[], None] | None]  # "dense" first, then two routed runs


def routed_pass(hero, ids: torch.Tensor, setup) -> tuple[torch.Tensor, float, np.ndarray | None]:
    """(logits, seconds, executed or None for dense) of one pass."""
    if setup is not None:
        setup()
    call = hero.new_call("dense" if setup is None else "hero", record=True)
    started = time.perf_counter()
    with torch.no_grad():
        logits = hero.forward(ids, None, call, use_cache=False)
    seconds = time.perf_counter() - started
    return logits, seconds, (call.passes[-1].executed().cpu().numpy() if setup is not None else None)


def prefill_timing(hero, runs: Runs, reps: int) -> dict:
    """4 x 512 held-out tokens of the benchmark's pool, every run in turn per rep (the first rep warms up); speed-ups
    are medians of per-rep paired ratios over dense, set against each run's own FLOP ideal."""
    ids = batch_of(token_pool(hero.tokenizer, 4 * 512), 4, 512)
    seconds = {name: [] for name in runs}
    executed = {}
    for rep in range(reps + 1):
        for name, setup in runs.items():
            _, took, executed[name] = routed_pass(hero, ids, setup)
            if rep:
                seconds[name].append(took)
    positions = np.tile(np.arange(512), 4)
    out = {"shape": "4x512", "reps": reps, "dense_s_median": round(statistics.median(seconds["dense"]), 3)}
    for name in list(runs)[1:]:
        paired = [d / r for d, r in zip(seconds["dense"], seconds[name])]
        ideal = flop_ideal(executed[name], positions, hero.profile)["ideal_speedup"]
        out[name] = {"s_median": round(statistics.median(seconds[name]), 3),
                     "speedup_paired_median": round(statistics.median(paired), 3),
                     "speedup_paired_range": [round(min(paired), 3), round(max(paired), 3)],
                     "flop_ideal": round(ideal, 3), "of_ideal": round(statistics.median(paired) / ideal, 3),
                     "ffn_skip": round(1 - float(executed[name].mean()), 4)}
    return out


def quality(hero, runs: Runs, n_texts: int) -> dict:
    """``n_texts`` held-out code and reasoning texts (their first 256 tokens): each routed run's perplexity over
    dense's and share of FFNs skipped, and the share of (token, block) decisions that differ between the two."""
    out = {}
    routed = list(runs)[1:]
    for domain in ("code", "reasoning"):
        token_ids = [ids[:256] for ids in hero.tokenizer(domain_texts(domain, "eval", 2 * n_texts),
                                                           add_special_tokens=False)["input_ids"] if len(ids) >= 64]
        nll = dict.fromkeys(runs, 0.0)
        executed = {name: [] for name in routed}
        n = 0
        for ids in token_ids[:n_texts]:
            x = torch.tensor([ids])
            n += len(ids) - 1
            for name, setup in runs.items():
                logits, _, ran = routed_pass(hero, x, setup)
                nll[name] += F.cross_entropy(logits[0, :-1].float(), x[0, 1:], reduction="sum").item()
                if ran is not None:
                    executed[name].append(ran.ravel())
        first, second = (np.concatenate(executed[name]) for name in routed)
        out[domain] = {"texts": min(n_texts, len(token_ids)), "tokens": n,
                       "decisions_that_differ": round(float((first != second).mean()), 4),
                       **{name: {"ppl_ratio": round(math.exp((nll[name] - nll["dense"]) / n), 4),
                                 "ffn_skip": round(1 - float(ran.mean()), 4)}
                          for name, ran in ((routed[0], first), (routed[1], second))}}
    return out
