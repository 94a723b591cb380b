"""Training throughput, side by side in one run: the previous recipe against the current one.

``python scripts/bench_training.py [--steps 12]`` trains a fresh hero router for a few steps in each setting,
each in its own process on the same cached data (4 x 128 tokens a step), and reads tokens/s from the training
log (median over the steps after the first two):

* ``fp32, 1 process x 1 thread``: the recipe the earlier checkpoints were trained with (fp32, one core);
* ``bf16, 1 process x 2 threads``: bf16 autocast on both cores;
* ``bf16, 2 processes x 1 thread``: two runs side by side (how ``make checkpoints`` trains), tokens/s summed.

Prints a table and the ratio of each to the first; writes docs/experiments/training-throughput.json.
Run it on a quiet machine: anything else on the cores lowers every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "experiments" / "training-throughput.json"

SETTINGS = (("fp32, 1 process x 1 thread", "fp32", 1, 1), ("bf16, 1 process x 2 threads", "bf16", 2, 1),
            ("bf16, 2 processes x 1 thread", "bf16", 1, 2))

WORKER = """
import json, sys
from hero_core.backbones.loading import load_backbone
from hero_core.method.model import HeroModel, fresh_router
from hero_core.train.recipes import DATA_BLOCKS
from hero_core.train.train import train
from hero_core.train.train_config import TrainConfig
backbone = load_backbone(device="cpu")
hero = HeroModel(backbone, fresh_router(backbone), "bench")
train(TrainConfig(out={out!r}, steps={steps}, target_skip=0.10, dtype={dtype!r}, threads={threads},
                  data_blocks=DATA_BLOCKS, warm_start=False, save_every=10_000), hero, progress=False)
"""


def run_setting(dtype: str, threads: int, processes: int, steps: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        outs = [Path(tmp) / f"run{i}" for i in range(processes)]
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        procs = [subprocess.Popen([sys.executable, "-c", WORKER.format(out=str(o), steps=steps,
                                                                       dtype=dtype, threads=threads)], env=env)
                 for o in outs]
        for p in procs:
            if p.wait():
                raise SystemExit(f"benchmark worker failed: {dtype}, {threads} threads")
        total = 0.0
        for o in outs:
            rows = [json.loads(line) for line in (o / "train_log.jsonl").read_text().splitlines()]
            total += statistics.median(r["tokens_per_s"] for r in rows[2:])
        return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    results = []
    for label, dtype, threads, processes in SETTINGS:
        tokens_per_s = run_setting(dtype, threads, processes, args.steps)
        results.append({"setting": label, "dtype": dtype, "threads": threads, "processes": processes,
                        "tokens_per_s": round(tokens_per_s, 1)})
        print(f"{label}: {tokens_per_s:.0f} tokens/s", flush=True)
    base = results[0]["tokens_per_s"]
    print("\n| setting | tokens/s | vs fp32 x 1 thread |\n|---|---|---|")
    for r in results:
        r["speedup"] = round(r["tokens_per_s"] / base, 2)
        print(f"| {r['setting']} | {r['tokens_per_s']:.0f} | x{r['speedup']:.2f} |")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"steps": args.steps, "batch": "4 x 128 tokens", "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
