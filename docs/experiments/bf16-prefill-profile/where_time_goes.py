"""Where a bf16 prefill's time goes under routing, and what a bf16 router first layer would change.

``OMP_NUM_THREADS=1 .venv/bin/python docs/experiments/bf16-prefill-profile/where_time_goes.py [--checkpoint hero-40]
[--reps 4] [--out docs/experiments/bf16-prefill-profile/where_time_goes.json]``

One process, one thread, the checkpoint on the bf16 embedded backbone, 4 x 512 held-out tokens (the benchmark's
pool). Every rep times, in turn: dense; routed as shipped (router and adapters fp32); routed with the router's
folded first layer (RMS-normed hbar -> [state encoder ; local head], the router's largest product) in bf16, the
rest of the router unchanged. Inside the routed runs it also sums the wall time of the router's decision
(``HeroRouter.decide``) and of the hard branch (``_branch``: gather, the FFN on the executed tokens, the adapter on
the others, scatter). The first rep is a warm-up. The bf16 first layer is a probe patched in here, not a product
path. Last, one shipped routed pass under torch's profiler: its top operators go to routed_ops.txt.
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from hero_core import load_hero  # noqa: E402
from hero_core.bench.inputs import batch_of, token_pool  # noqa: E402
from hero_core.measures.accounting import flop_ideal  # noqa: E402
from hero_core.method import inject, router  # noqa: E402

FIRST_LAYER = "hidden = F.linear(unit_rms(hbar, self.state_encoder.norm), first.weight, first.bias)"


def bf16_first_layer_decide():
    """HeroRouter.decide with the folded first layer's product in bf16 (weights cast once per folded version)."""
    source = textwrap.dedent(inspect.getsource(router.HeroRouter.decide))
    if FIRST_LAYER not in source:
        raise SystemExit("HeroRouter.decide no longer has the folded first layer this probe patches")
    source = source.replace(FIRST_LAYER, "first = _bf16(first)\n        hidden = F.linear(unit_rms(hbar, "
                            "self.state_encoder.norm).bfloat16(), first.weight, first.bias).float()")
    cast = {}

    def _bf16(first):
        if cast.get("version") != first.version:
            cast.update(version=first.version, layers=router.FoldedLayers(
                first.version, first.weight.bfloat16(), first.bias.bfloat16(), first.split))
        return cast["layers"]

    namespace = {**vars(router), "_bf16": _bf16}
    exec(source, namespace)  # noqa: S102 - our own method's source, one line changed
    return namespace["decide"]


class PartTimer:
    """Sums the wall time of wrapped methods while ``on``; ``targets[key]`` is the function a wrapper calls."""

    def __init__(self) -> None:
        self.on, self.seconds, self.targets = False, {}, {}

    def wrap(self, owner, name: str, key: str) -> None:
        self.targets[key] = getattr(owner, name)

        def timed(*args, **kwargs):
            if not self.on:
                return self.targets[key](*args, **kwargs)
            started = time.perf_counter()
            try:
                return self.targets[key](*args, **kwargs)
            finally:
                self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - started

        setattr(owner, name, timed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default="hero-40")
    parser.add_argument("--reps", type=int, default=4)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("where_time_goes.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    hero = load_hero(args.checkpoint, dtype="bf16")
    ids = batch_of(token_pool(hero.tokenizer, 4 * 512), 4, 512)
    shipped = router.HeroRouter.decide
    probe = bf16_first_layer_decide()
    timer = PartTimer()
    timer.wrap(router.HeroRouter, "decide", "decide")
    timer.wrap(inject.RoutedFFN, "_branch", "branch")

    def run(variant: str, first_layer: str) -> dict:
        timer.targets["decide"] = shipped if first_layer == "fp32" else probe
        call = hero.new_call(variant, record=True)
        timer.seconds, timer.on = {}, variant != "dense"
        started = time.perf_counter()
        with torch.no_grad():
            hero.forward(ids, None, call, use_cache=False)
        seconds = time.perf_counter() - started
        timer.on = False
        executed = call.passes[-1].executed().cpu().numpy() if variant != "dense" else None
        return {"seconds": seconds, **timer.seconds, "executed": executed}

    configs = {"dense": ("dense", "fp32"), "routed, router fp32 (shipped)": ("hero", "fp32"),
               "routed, router first layer bf16 (probe)": ("hero", "bf16")}
    runs = {name: [] for name in configs}
    for rep in range(args.reps + 1):
        for name, (variant, first_layer) in configs.items():
            result = run(variant, first_layer)
            if rep:
                runs[name].append(result)
        print(f"rep {rep} done", flush=True)
    dense_s = statistics.median(r["seconds"] for r in runs["dense"])
    positions = np.tile(np.arange(512), 4)
    report = {"checkpoint": args.checkpoint, "shape": "4x512", "precision": "bf16 backbone", "threads": 1,
              "reps": args.reps, "configs": {}}
    for name, results in runs.items():
        seconds = statistics.median(r["seconds"] for r in results)
        row = {"seconds_median": round(seconds, 3), "seconds": [round(r["seconds"], 3) for r in results],
               "speedup_over_dense": round(dense_s / seconds, 3)}
        if results[0]["executed"] is not None:
            ideal = flop_ideal(results[0]["executed"], positions, hero.profile)
            row |= {"flop_ideal": round(ideal["ideal_speedup"], 3),
                    "of_ideal": round(dense_s / seconds / ideal["ideal_speedup"], 3),
                    "ffn_executed_share": round(ideal["ffn_executed_share"], 3),
                    **{f"{part}_s_median": round(statistics.median(r[part] for r in results), 3)
                       for part in ("decide", "branch")}}
        report["configs"][name] = row
        print(name, json.dumps(row), flush=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    # One more shipped routed pass under torch's profiler: which operators the time goes to.
    from torch.profiler import ProfilerActivity, profile

    timer.targets["decide"] = shipped
    with profile(activities=[ProfilerActivity.CPU]) as prof, torch.no_grad():
        hero.forward(ids, None, hero.new_call("hero", record=False), use_cache=False)
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15)
    args.out.with_name("routed_ops.txt").write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
