"""Decode step time beside a bf16 backbone, with the router's first layer read in bf16 (the default) or in fp32
(as before), side by side in one run, interleaved rep by rep; every ratio is the median of per-rep ratios over a
dense step.

Needs commit 6b025c9, where the change lived (since reverted): ``git checkout 6b025c9``. On a later tree
``new_packed_path`` takes no ``input_dtype`` and both forms read fp32 weights.

    OMP_NUM_THREADS=1 python docs/experiments/bf16-router-weight/speed.py --steps 24 --reps 7 --out speed.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
from pathlib import Path

import torch

PROMPT = ("The history of the printing press begins in the fifteenth century, when movable type made books "
          "cheaper to produce and ideas travelled faster across Europe than ever before.")


@contextlib.contextmanager
def fp32_router_weights():
    """Decode paths built inside this block read every router weight in fp32, as before the change."""
    from hero_core.method import packed_router

    real = packed_router.new_packed_path
    packed_router.new_packed_path = lambda *a, input_dtype=None, **k: real(*a, **k)
    try:
        yield
    finally:
        packed_router.new_packed_path = real


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--checkpoints", default="hero-10-r4,hero-25")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from hero_core import load_hero
    from hero_core.bench.sections import decode_step_seconds
    from hero_core.method.call_state import RoutingCall
    from hero_core.method.fused_router import warm_up
    from hero_core.method.model import load_checkpoints

    assert warm_up() == "fused", "the compiled step is not available: nothing to compare"
    names = args.checkpoints.split(",")
    hero = load_hero(names[0], dtype="bf16")
    routers = load_checkpoints(names, hero.backbone)
    ids = hero.encode([PROMPT]).input_ids

    def routed(h, tau=None):
        return lambda: RoutingCall(router=h.router, variant=h.config.variant,
                                   tau=h.config.tau if tau is None else tau, record=False)

    configs = {"dense": (hero, lambda: hero.new_call("dense", record=False))}
    configs["router_only_tau0"] = (hero, routed(hero, 0.0))
    configs.update({name: (h, routed(h)) for name, h in routers.items()})
    weights = ("bf16", "fp32")
    times: dict[str, list[float]] = {f"{k}/{w}": [] for k in configs for w in weights if k != "dense" or w == "bf16"}
    for _ in range(args.reps + 1):  # the first rep warms up and is dropped
        for key in times:
            name, w = key.split("/")
            h, make = configs[name]
            with fp32_router_weights() if w == "fp32" else contextlib.nullcontext():
                times[key].append(decode_step_seconds(h, make, ids, args.steps))
    times = {k: v[1:] for k, v in times.items()}
    dense = times.pop("dense/bf16")
    result = {"dtype": "bf16", "steps": args.steps, "reps": args.reps, "prompt_tokens": int(ids.shape[1]),
              "dense_step_ms": 1e3 * statistics.median(dense),
              "step_over_dense": {k: statistics.median(x / y for x, y in zip(v, dense)) for k, v in times.items()}}
    for key, ratio in result["step_over_dense"].items():
        print(f"{key:<28s} step / dense x{ratio:.3f}  (speed-up x{1 / ratio:.3f})")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
