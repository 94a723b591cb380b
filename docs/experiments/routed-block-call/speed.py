"""Decode step time with each routed block as one compiled call (decision and branch) against the compiled
decision followed by the Python branch (as before), side by side in one run, interleaved rep by rep, in fp32 and
bf16. Every ratio is the median over reps of (step time / the same rep's dense step time).

    OMP_NUM_THREADS=1 python docs/experiments/routed-block-call/speed.py --steps 24 --reps 7 --out speed.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
from functools import partial
from pathlib import Path

import torch


@contextlib.contextmanager
def python_branch():
    """Inside this block every routed block takes the compiled decision and RoutedFFN's Python branch."""
    from hero_core.method.inject import RoutedFFN

    real = RoutedFFN._takes_fused_block
    RoutedFFN._takes_fused_block = lambda *a: False
    try:
        yield
    finally:
        RoutedFFN._takes_fused_block = real


def step_ratios(dtype: str, names: list[str], steps: int, reps: int) -> dict:
    from hero_core import load_hero
    from hero_core.bench.inputs import batch_of, token_pool
    from hero_core.bench.sections import decode_step_seconds
    from hero_core.method.call_state import RoutingCall
    from hero_core.method.model import load_checkpoints

    hero = load_hero(names[0], dtype=dtype)
    routers = load_checkpoints(names, hero.backbone)
    ids = batch_of(token_pool(hero.tokenizer, 64), 1, 64)  # the benchmark's held-out text, 64 prompt tokens
    calls = {"router_only_tau0": (hero, 0.0), **{name: (h, h.config.tau) for name, h in routers.items()}}
    timed = {"dense": []} | {f"{name}/{form}": [] for name in calls for form in ("block call", "python branch")}
    for _ in range(reps + 1):  # the first rep warms up and is dropped
        timed["dense"].append(decode_step_seconds(hero, lambda: hero.new_call("dense", record=False), ids, steps))
        for key in list(timed)[1:]:
            name, form = key.split("/")
            h, tau = calls[name]
            make = partial(RoutingCall, router=h.router, variant=h.config.variant, tau=tau, record=False)
            with python_branch() if form == "python branch" else contextlib.nullcontext():
                timed[key].append(decode_step_seconds(h, make, ids, steps))
    dense = timed.pop("dense")[1:]
    return {"dense_step_ms": 1e3 * statistics.median(dense),
            "step_over_dense": {k: statistics.median(x / y for x, y in zip(v[1:], dense)) for k, v in timed.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--dtypes", default="fp32,bf16")
    parser.add_argument("--checkpoints", default="hero-10-r4,hero-25")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from hero_core.method.fused_router import warm_up

    assert warm_up() == "fused", "the compiled step is not available: nothing to compare"
    result = {"steps": args.steps, "reps": args.reps, "threads": 1}
    for dtype in args.dtypes.split(","):
        result[dtype] = step_ratios(dtype, args.checkpoints.split(","), args.steps, args.reps)
        print(f"{dtype}: dense step {result[dtype]['dense_step_ms']:.1f} ms")
        for key, ratio in result[dtype]["step_over_dense"].items():
            print(f"  {key:<34s} step / dense x{ratio:.3f}  (speed-up x{1 / ratio:.3f})")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
