"""The compiled decode step reading the router's four large matrices in bf16 (as shipped) against fp32, side by
side in one process: decode speed over dense, and how far the decisions move from the module path's fp32.

Needs commit c289a86, where the change lived (since reverted): ``git checkout c289a86``.

    OMP_NUM_THREADS=1 .venv/bin/python docs/experiments/bf16-decode-weights/ab.py --dtype fp32 [--reps 10]
    OMP_NUM_THREADS=1 .venv/bin/python docs/experiments/bf16-decode-weights/ab.py --dtype bf16 [--out FILE]

* **speed**: the benchmark's decode loop (batch 1, 64 prompt tokens of its held-out pool, 32 greedy steps, no early
  stop, prefill excluded), one thread; every rep runs dense, then each checkpoint and the router alone (tau = 0)
  with bf16 and with fp32 decode weights, in turn. Ratios are medians of per-rep paired ratios over dense.
* **decisions**: greedy chat answers (``--tokens``) to the first ``--prompts`` prompts of the answers suite, with the
  module path at every step (the reference: fp32 router) and with the compiled step in each storage; decode
  decisions compared while both runs have read the same tokens.

Writes ``ab-<dtype>.json`` beside this file (or ``--out``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from hero_core import load_hero  # noqa: E402
from hero_core.bench.inputs import batch_of, token_pool  # noqa: E402
from hero_core.bench.sections import decode_loop  # noqa: E402
from hero_core.core import packed_router  # noqa: E402
from hero_core.eval.answers import load_rows, select_rows  # noqa: E402

SHIPPED = packed_router.stored_for_decode


def use_storage(routers, storage: str) -> None:
    """Make the compiled step read bf16 (as shipped) or fp32 decode weights; drop the packed weights built so far."""
    packed_router.stored_for_decode = SHIPPED if storage == "bf16" else (lambda router, matrix: matrix)
    for router in routers:
        router.__dict__.pop("_inference_weights", None)


def speed(hero, routers: dict, reps: int) -> dict:
    prompts = batch_of(token_pool(hero.tokenizer, 4096), 1, 64, offset=7)
    runs = {"dense": (None, None, None)}
    for name, router in routers.items():
        for storage in ("bf16", "fp32"):
            runs[f"{name} {storage}"] = (router, storage, None)
    first = next(iter(routers.values()))
    for storage in ("bf16", "fp32"):
        runs[f"router only {storage}"] = (first, storage, 0.0)
    seconds = {name: [] for name in runs}
    for rep in range(reps + 1):
        for name, (router, storage, tau) in runs.items():
            if router is not None:
                hero.router = router
                use_storage(routers.values(), storage)

            def call(router=router, tau=tau):
                if router is None:
                    return hero.new_call("dense", record=False)
                c = hero.new_call("hero", record=False)
                return c if tau is None else dataclasses.replace(c, tau=tau)

            took, _ = decode_loop(hero, call, prompts, 32)
            if rep:  # rep 0 warms up
                seconds[name].append(took)
    out = {"dense_ms_per_step": round(1000 * statistics.median(seconds["dense"]) / 32, 2)}
    for name in list(runs)[1:]:
        paired = [r / d for r, d in zip(seconds[name], seconds["dense"])]
        out[name] = {"step_over_dense_median": round(statistics.median(paired), 4),
                     "range": [round(min(paired), 4), round(max(paired), 4)],
                     "speedup_median": round(statistics.median([1 / p for p in paired]), 4)}
    return out


def decisions(hero, prompts: int, tokens: int) -> dict:
    rows = select_rows(load_rows(), prompts)

    def answers(path: str, storage: str):
        os.environ["HERO_DECODE_PATH"] = path
        use_storage([hero.router], storage)
        return [hero.generate(r["prompt"], max_new_tokens=tokens, chat_template=True) for r in rows]

    reference = answers("module", "fp32")
    out = {}
    for storage in ("fp32", "bf16"):
        flips = compared = same = 0
        diffs = []
        for (text_ref, ref), (text_new, new) in zip(reference, answers("fused", storage)):
            same += text_ref == text_new
            n = next((i for i, (a, b) in enumerate(zip(ref.tokens, new.tokens)) if a != b),
                     min(len(ref.tokens), len(new.tokens)))
            g_ref, g_new = ref.gate[:, ref.n_prompt_tokens:n], new.gate[:, ref.n_prompt_tokens:n]
            diffs.append(np.abs(g_ref - g_new).ravel())
            flips += int(((g_ref >= ref.tau) != (g_new >= new.tau)).sum())
            compared += g_ref.size
        d = np.concatenate(diffs)
        out[f"compiled step, {storage} weights"] = {
            "decode_decisions_compared": compared, "flipped": flips, "flipped_share": round(flips / compared, 5),
            "same_answer_text": same, "answers": len(rows),
            "gate_abs_diff": {"median": float(np.median(d)), "p99": float(np.quantile(d, 0.99)), "max": float(d.max())}}
    os.environ["HERO_DECODE_PATH"] = "fused"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--checkpoints", default="hero-10-r4,hero-25")
    parser.add_argument("--prompts", type=int, default=24)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--out", type=Path, default=None, help="default: ab-<dtype>.json beside this file")
    args = parser.parse_args()
    torch.set_num_threads(1)
    names = args.checkpoints.split(",")
    hero = load_hero(names[0], dtype=args.dtype)
    routers = {names[0]: hero.router}
    for name in names[1:]:
        routers[name] = load_hero(name, dtype=args.dtype).router  # the same weights' routers; one backbone times all
    result = {"dtype": args.dtype, "reps": args.reps, "speed": speed(hero, routers, args.reps)}
    hero.router = routers[names[0]]
    result["decisions"] = decisions(hero, args.prompts, args.tokens) if args.prompts else None
    use_storage(routers.values(), "bf16")
    print(json.dumps(result, indent=2))
    (args.out or Path(__file__).with_name(f"ab-{args.dtype}.json")).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
