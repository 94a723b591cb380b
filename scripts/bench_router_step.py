"""Router cost at one token per decode step: the module path (reference) vs the packed and fused paths.

    python -m scripts.bench_router_step [--dtypes fp32,bf16] [--steps 16] [--reps 5] [--json out.json]

For each precision of the embedded backbone (SmolLM2-135M, bundled checkpoints) it measures, in one run
and interleaved rep by rep (so slow drifts of the machine hit every configuration alike):

* router only: the router's R ``decide`` calls of one decode step (batch 1), alone, as a fraction of a dense
  decode step;
* router only (tau = 0) end to end: a decode step that runs the router and every FFN, over a dense step
  (the bench's ``router_overhead`` + 1);
* hero-25 and hero-40 decode steps over a dense step, i.e. their decode speed-up is the inverse.

Every ratio is the median of per-rep ratios. Each decode path of hero_core.method.packed_router is timed
(``HERO_DECODE_PATH``): ``module`` (the reference), ``packed`` (the packed Python step) and ``fused`` (the
compiled step, the default).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import time

import torch

from hero_core import load_hero
from hero_core.backbones.threads import set_threads
from hero_core.bench.sections import decode_step_seconds
from hero_core.method.call_state import RoutingCall
from hero_core.method.fused_router import ENV, warm_up
from hero_core.method.model import load_checkpoints

PROMPT = ("The history of the printing press begins in the fifteenth century, when movable type made books "
          "cheaper to produce and ideas travelled faster across Europe than ever before.")


PATHS = ("module", "packed", "fused")


@contextlib.contextmanager
def decode_path(path: str):
    """Decode steps of this block take ``path`` (HERO_DECODE_PATH is read at each new call)."""
    before = os.environ.get(ENV)
    os.environ[ENV] = path
    try:
        yield
    finally:
        if before is None:
            del os.environ[ENV]
        else:
            os.environ[ENV] = before


def router_step_time(router, variant: str, *, path: str, n: int = 1, loops: int = 20) -> float:
    """Seconds for one decode step's R ``decide`` calls on n tokens, router alone."""
    torch.manual_seed(0)
    hbars = [torch.randn(n, router.config.d_model) * (1 + j) for j in range(router.config.n_routed)]
    with torch.no_grad(), decode_path(path):
        def once():
            state = router.new_path(n, variant, device="cpu", dtype=router.eta.dtype, packed=True)
            for j, hbar in enumerate(hbars, start=1):
                router.decide(j, hbar, state, variant)
        once()
        t0 = time.perf_counter()
        for _ in range(loops):
            once()
        return (time.perf_counter() - t0) / loops


def bench_precision(dtype: str, steps: int, reps: int, names: list[str]) -> dict:
    hero = load_hero("hero-25", dtype=dtype)
    ids = hero.encode([PROMPT]).input_ids
    routers = load_checkpoints(names, hero.backbone)
    base = routers[names[0]]

    def routed(h, tau=None):
        return lambda: RoutingCall(router=h.router, variant=h.config.variant,
                                   tau=h.config.tau if tau is None else tau, record=False)

    configs = {"dense": (hero, lambda: hero.new_call("dense", record=False), "module")}
    for path in PATHS:
        configs[f"router_only_tau0/{path}"] = (base, routed(base, 0.0), path)
        for name, h in routers.items():
            configs[f"{name}/{path}"] = (h, routed(h), path)
    times: dict[str, list[float]] = {k: [] for k in configs}
    alone: dict[str, list[float]] = {path: [] for path in PATHS}
    for h, make, path in configs.values():  # warm-up
        with decode_path(path):
            decode_step_seconds(h, make, ids, 2)
    for _ in range(reps):
        for k, (h, make, path) in configs.items():
            with decode_path(path):
                times[k].append(decode_step_seconds(h, make, ids, steps))
        for path in alone:
            alone[path].append(router_step_time(base.router, base.config.variant, path=path))

    def ratio(a: list[float], b: list[float]) -> float:
        return statistics.median(x / y for x, y in zip(a, b))

    dense = times["dense"]
    out = {"dtype": dtype, "steps": steps, "reps": reps, "prompt_tokens": int(ids.shape[1]),
           "dense_step_ms": 1e3 * statistics.median(dense),
           "router_alone_ms": {p: 1e3 * statistics.median(v) for p, v in alone.items()},
           "router_alone_over_dense": {p: ratio(v, dense) for p, v in alone.items()},
           "step_over_dense": {k: ratio(v, dense) for k, v in times.items() if k != "dense"},
           "decode_speedup": {k: ratio(dense, v) for k, v in times.items() if k != "dense"}}
    return out


def report(row: dict) -> str:
    lines = [f"{row['dtype']}: dense decode step {row['dense_step_ms']:.1f} ms (batch 1, "
             f"{row['prompt_tokens']}-token prompt, {row['steps']} steps x {row['reps']} reps)"]
    ra, ro = row["router_alone_ms"], row["router_alone_over_dense"]
    lines.append("  router alone per step:   " + " | ".join(
        f"{p} {ra[p]:.2f} ms ({100 * ro[p]:.1f} % of dense)" for p in PATHS))
    keys = sorted({k.split("/")[0] for k in row["step_over_dense"]}, key=lambda k: (k != "router_only_tau0", k))
    for k in keys:
        label = "router only (tau=0) step" if k == "router_only_tau0" else f"{k} step"
        lines.append(f"  {label:<25s} / dense: " + " | ".join(
            f"{p} x{row['step_over_dense'][f'{k}/{p}']:.3f} (speed-up x{1 / row['step_over_dense'][f'{k}/{p}']:.2f})"
            for p in PATHS))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default="fp32,bf16")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--checkpoints", default="hero-10,hero-25,hero-40")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: leave as is)")
    parser.add_argument("--json", default=None, help="also write the numbers here")
    args = parser.parse_args(argv)
    if args.threads:
        set_threads(args.threads)
    print(f"fused step: {warm_up()} path available", flush=True)
    rows = []
    for dtype in args.dtypes.split(","):
        row = bench_precision(dtype.strip(), args.steps, args.reps, args.checkpoints.split(","))
        print(report(row), flush=True)
        rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch_threads": torch.get_num_threads(), "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
