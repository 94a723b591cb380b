"""A prefill's decision in fp32 against bf16 autocast, on the bf16 backbone: time and quality, side by side.

``OMP_NUM_THREADS=1 .venv/bin/python docs/experiments/bf16-prefill-profile/decision_precision.py --checkpoint hero-40
[--reps 8] [--texts 12]``

Both runs use the product's own code: the decision's precision is chosen by
``hero_core.core.inject.decision_precision`` from the router's recorded training precision, so setting
``extra["compute_dtype"]`` to ``float32`` gives the previous behaviour (every decision in fp32) and ``bfloat16``
(what every bundled checkpoint records) the new one.

* **time**: 4 x 512 held-out tokens of the benchmark's pool, one thread; every rep times dense, fp32 decisions and
  bf16-autocast decisions in turn (the first rep is a warm-up); speed-ups are medians of per-rep paired ratios,
  set against the FLOP ideal of each run's own decisions.
* **quality**: ``--texts`` held-out code and reasoning texts (their first 256 tokens), perplexity of each routed run
  over the dense model's, the share of FFNs skipped, and the share of (token, block) decisions that differ.

Writes ``decision_precision-<checkpoint>.json`` beside this file.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from hero_core import load_hero  # noqa: E402
from hero_core.bench.inputs import batch_of, token_pool  # noqa: E402
from hero_core.core.accounting import flop_ideal  # noqa: E402
from hero_core.core.data import domain_texts  # noqa: E402

RUNS = {"dense": None, "fp32 decisions": "float32", "bf16 autocast decisions": "bfloat16"}


def routed_pass(hero, ids: torch.Tensor, trained_in: str | None) -> tuple[torch.Tensor, float, np.ndarray | None]:
    """(logits, seconds, executed or None for dense) of one pass; ``trained_in`` picks the decision precision."""
    if trained_in is not None:
        hero.router.config.extra["compute_dtype"] = trained_in
    call = hero.new_call("dense" if trained_in is None else "hero", record=True)
    started = time.perf_counter()
    with torch.no_grad():
        logits = hero.forward(ids, None, call, use_cache=False)
    seconds = time.perf_counter() - started
    executed = call.passes[-1].executed().cpu().numpy() if trained_in is not None else None
    return logits, seconds, executed


def timing(hero, reps: int) -> dict:
    ids = batch_of(token_pool(hero.tokenizer, 4 * 512), 4, 512)
    seconds = {name: [] for name in RUNS}
    executed = {}
    for rep in range(reps + 1):
        for name, trained_in in RUNS.items():
            _, took, executed[name] = routed_pass(hero, ids, trained_in)
            if rep:
                seconds[name].append(took)
    positions = np.tile(np.arange(512), 4)
    out = {"shape": "4x512", "reps": reps, "dense_s_median": round(statistics.median(seconds["dense"]), 3)}
    for name in list(RUNS)[1:]:
        paired = [d / r for d, r in zip(seconds["dense"], seconds[name])]
        ideal = flop_ideal(executed[name], positions, hero.profile)["ideal_speedup"]
        out[name] = {"s_median": round(statistics.median(seconds[name]), 3),
                     "speedup_paired_median": round(statistics.median(paired), 3),
                     "speedup_paired_range": [round(min(paired), 3), round(max(paired), 3)],
                     "flop_ideal": round(ideal, 3), "of_ideal": round(statistics.median(paired) / ideal, 3),
                     "ffn_skip": round(1 - float(executed[name].mean()), 4)}
    return out


def quality(hero, n_texts: int) -> dict:
    out = {}
    for domain in ("code", "reasoning"):
        token_ids = [ids[:256] for ids in hero.tokenizer(domain_texts(domain, "eval", 2 * n_texts),
                                                           add_special_tokens=False)["input_ids"] if len(ids) >= 64]
        nll = dict.fromkeys(RUNS, 0.0)
        executed = {name: [] for name in list(RUNS)[1:]}
        n = 0
        for ids in token_ids[:n_texts]:
            x = torch.tensor([ids])
            n += len(ids) - 1
            for name, trained_in in RUNS.items():
                logits, _, ran = routed_pass(hero, x, trained_in)
                nll[name] += F.cross_entropy(logits[0, :-1].float(), x[0, 1:], reduction="sum").item()
                if ran is not None:
                    executed[name].append(ran.ravel())
        fp32, bf16 = (np.concatenate(executed[name]) for name in list(RUNS)[1:])
        out[domain] = {"texts": min(n_texts, len(token_ids)), "tokens": n,
                       "decisions_that_differ": round(float((fp32 != bf16).mean()), 4),
                       **{name: {"ppl_ratio": round(math.exp((nll[name] - nll["dense"]) / n), 4),
                                 "ffn_skip": round(1 - float(ran.mean()), 4)}
                          for name, ran in (("fp32 decisions", fp32), ("bf16 autocast decisions", bf16))}}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default="hero-40")
    parser.add_argument("--reps", type=int, default=8)
    parser.add_argument("--texts", type=int, default=12)
    args = parser.parse_args()
    torch.set_num_threads(1)
    hero = load_hero(args.checkpoint, dtype="bf16")
    report = {"checkpoint": args.checkpoint, "backbone": "bf16", "threads": 1,
              "timing": timing(hero, args.reps), "quality": quality(hero, args.texts)}
    out = Path(__file__).with_name(f"decision_precision-{args.checkpoint}.json")
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
