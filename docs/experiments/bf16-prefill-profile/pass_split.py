"""Where one prefill pass's time goes, dense against routed, by module: attention, FFN, LM head, and under routing
the router's decision, the hard branch (gather, FFN on the executed tokens, adapter on the others, scatter) and
the adapters inside it.

``OMP_NUM_THREADS=1 .venv/bin/python docs/experiments/bf16-prefill-profile/pass_split.py --checkpoint hero-25
[--dtype bf16] [--reps 3]``

One process, one thread, 4 x 512 held-out tokens of the benchmark's pool. Each module's ``forward`` (and
``HeroRouter.decide``, ``RoutedFFN._branch``) is wrapped in a wall-clock timer summed over the pass; every rep runs
dense then routed, after one warm-up of each; medians over reps. Timers nest (the FFN and the adapters also count
inside the branch). Writes ``pass_split-<checkpoint>-<dtype>.json`` beside this file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from hero_core import load_hero  # noqa: E402
from hero_core.bench.inputs import batch_of, token_pool  # noqa: E402
from hero_core.measures.accounting import flop_ideal  # noqa: E402
from hero_core.method import inject  # noqa: E402
from hero_core.method import router as router_module  # noqa: E402


def timed(totals: dict, name: str, fn):
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        out = fn(*args, **kwargs)
        totals[name] = totals.get(name, 0.0) + time.perf_counter() - started
        return out
    return wrapper


def instrument(hero, totals: dict) -> None:
    router_module.HeroRouter.decide = timed(totals, "decision", router_module.HeroRouter.decide)
    inject.RoutedFFN._branch = timed(totals, "branch", inject.RoutedFFN._branch)
    for index, layer in enumerate(inject.decoder_layers(hero.model)):
        layer.self_attn.forward = timed(totals, "attention", layer.self_attn.forward)
        ffn = inject.routed_unit(hero.model, index).base_layer
        ffn.forward = timed(totals, "ffn", ffn.forward)
    hero.model.lm_head.forward = timed(totals, "lm_head", hero.model.lm_head.forward)
    for adapter in hero.router.adapters:
        adapter.forward = timed(totals, "adapter", adapter.forward)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default="hero-25")
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default="bf16")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    hero = load_hero(args.checkpoint, dtype=args.dtype)
    ids = batch_of(token_pool(hero.tokenizer, 4 * 512), 4, 512)
    totals: dict = {}
    instrument(hero, totals)
    runs: dict = {"dense": [], "routed": []}
    executed = None
    for rep in range(args.reps + 1):
        for variant, rows in runs.items():
            totals.clear()
            call = hero.new_call("dense" if variant == "dense" else "hero", record=variant == "routed")
            started = time.perf_counter()
            with torch.no_grad():
                hero.forward(ids, None, call, use_cache=False)
            wall = time.perf_counter() - started
            if variant == "routed":
                executed = call.passes[-1].executed().cpu().numpy()
            if rep:
                rows.append({"wall": wall, **totals})
    ideal = flop_ideal(executed, np.tile(np.arange(512), 4), hero.profile)["ideal_speedup"]
    report = {"checkpoint": args.checkpoint, "dtype": args.dtype, "shape": "4x512", "reps": args.reps,
              "ffn_skip": round(1 - float(executed.mean()), 4), "flop_ideal": round(ideal, 3)}
    for variant, rows in runs.items():
        keys = sorted({k for row in rows for k in row})
        report[variant] = {k: round(statistics.median(row.get(k, 0.0) for row in rows), 3) for k in keys}
    report["speedup"] = round(report["dense"]["wall"] / report["routed"]["wall"], 3)
    report["of_ideal"] = round(report["speedup"] / ideal, 3)
    out = Path(__file__).with_name(f"pass_split-{args.checkpoint}-{args.dtype}.json")
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
