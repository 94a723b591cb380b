"""Router cost at one token per decode step: the module path (reference) vs the packed path, side by side.

    python -m scripts.bench_router_step [--dtypes fp32,bf16] [--steps 16] [--reps 5] [--json out.json]

For each precision of the embedded backbone (SmolLM2-135M, bundled checkpoints) it measures, in one run
and interleaved rep by rep (so slow drifts of the machine hit every configuration alike):

* router only: the router's R ``decide`` calls of one decode step (batch 1), alone, as a fraction of a dense
  decode step;
* router only (tau = 0) end to end: a decode step that runs the router and every FFN, over a dense step
  (the bench's ``router_overhead`` + 1);
* hero-25 and hero-40 decode steps over a dense step, i.e. their decode speed-up is the inverse.

Every ratio is the median of per-rep ratios. ``reference`` forces the module path for decode steps,
``packed`` is the default (HeroRouter._decide_packed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time

import torch

from hero_core import load_hero
from hero_core.bench.sections import decode_step_seconds
from hero_core.core import checkpoint as ckpt
from hero_core.core.call_state import RoutingCall

PROMPT = ("The history of the printing press begins in the fifteenth century, when movable type made books "
          "cheaper to produce and ideas travelled faster across Europe than ever before.")


@contextlib.contextmanager
def reference_path(router):
    """Make decode steps take the module path: new_path ignores its ``packed`` request."""
    original = router.new_path
    router.new_path = lambda *args, packed=False, **kwargs: original(*args, **kwargs)
    try:
        yield
    finally:
        del router.new_path


def router_step_time(router, variant: str, *, packed: bool, n: int = 1, loops: int = 20) -> float:
    """Seconds for one decode step's R ``decide`` calls on n tokens, router alone."""
    torch.manual_seed(0)
    hbars = [torch.randn(n, router.config.d_model) * (1 + j) for j in range(router.config.n_routed)]
    with torch.no_grad():
        def once():
            path = router.new_path(n, variant, device="cpu", dtype=router.eta.dtype, packed=packed)
            for j, hbar in enumerate(hbars, start=1):
                router.decide(j, hbar, path, variant)
        once()
        t0 = time.perf_counter()
        for _ in range(loops):
            once()
        return (time.perf_counter() - t0) / loops


def bench_precision(dtype: str, steps: int, reps: int, names: list[str]) -> dict:
    hero = load_hero("hero-25", dtype=dtype)
    ids = hero.encode([PROMPT]).input_ids
    routers = {}
    for name in names:
        found = ckpt.read_checkpoint(name)
        routers[name] = hero.with_router(ckpt.build_router(found), found.name)
    base = routers[names[0]]

    def routed(h, tau=None):
        return lambda: RoutingCall(router=h.router, variant=h.config.variant,
                                   tau=h.config.tau if tau is None else tau, record=False)

    configs = {"dense": (hero, lambda: hero.new_call("dense", record=False), False)}
    for path in ("reference", "packed"):
        configs[f"router_only_tau0/{path}"] = (base, routed(base, 0.0), path == "reference")
        for name, h in routers.items():
            configs[f"{name}/{path}"] = (h, routed(h), path == "reference")
    times: dict[str, list[float]] = {k: [] for k in configs}
    alone: dict[str, list[float]] = {"reference": [], "packed": []}
    for h, make, ref in configs.values():  # warm-up
        with reference_path(h.router) if ref else contextlib.nullcontext():
            decode_step_seconds(h, make, ids, 2)
    for _ in range(reps):
        for k, (h, make, ref) in configs.items():
            with reference_path(h.router) if ref else contextlib.nullcontext():
                times[k].append(decode_step_seconds(h, make, ids, steps))
        for path in alone:
            alone[path].append(router_step_time(base.router, base.config.variant, packed=path == "packed"))

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
    lines.append(f"  router alone per step:   reference {ra['reference']:.2f} ms ({100 * ro['reference']:.1f} % of "
                 f"dense) | packed {ra['packed']:.2f} ms ({100 * ro['packed']:.1f} % of dense) | "
                 f"x{ra['reference'] / ra['packed']:.2f} faster")
    keys = sorted({k.split("/")[0] for k in row["step_over_dense"]}, key=lambda k: (k != "router_only_tau0", k))
    for k in keys:
        ref, new = row["step_over_dense"][f"{k}/reference"], row["step_over_dense"][f"{k}/packed"]
        label = "router only (tau=0) step" if k == "router_only_tau0" else f"{k} step"
        lines.append(f"  {label:<25s} / dense: reference x{ref:.3f} | packed x{new:.3f}   (decode speed-up "
                     f"x{1 / ref:.2f} -> x{1 / new:.2f})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default="fp32,bf16")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--checkpoints", default="hero-25,hero-40")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: leave as is)")
    parser.add_argument("--json", default=None, help="also write the numbers here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
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
