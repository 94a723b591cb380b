"""How a dense prefill's time splits between the FFNs (what routing can skip) and the attention blocks.

``OMP_NUM_THREADS=1 .venv/bin/python docs/experiments/bf16-prefill-profile/dense_parts.py [--reps 3]``

The embedded backbone in bf16 and in fp32, one thread, 4 x 512 tokens of the benchmark's pool, dense variant: the
wall time of every FFN (the backbone's MLP modules) and every attention block summed inside the pass, medians over
``--reps`` passes after a warm-up. Prints one line per precision and writes dense_parts.json beside this file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from hero_core import load_hero  # noqa: E402
from hero_core.bench.inputs import batch_of, token_pool  # noqa: E402


def timed_modules(model, suffix: str, seconds: dict, key: str) -> int:
    """Wrap the forward of every module whose class name ends with ``suffix``; returns how many."""
    modules = [m for m in model.modules() if type(m).__name__.endswith(suffix)]
    for module in modules:
        forward = module.forward

        def timed(*args, _forward=forward, **kwargs):
            started = time.perf_counter()
            try:
                return _forward(*args, **kwargs)
            finally:
                seconds[key] += time.perf_counter() - started

        module.forward = timed
    return len(modules)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    report = {}
    for dtype in ("bf16", "fp32"):
        hero = load_hero("hero-40", dtype=dtype)
        ids = batch_of(token_pool(hero.tokenizer, 4 * 512), 4, 512)
        seconds = {"ffn": 0.0, "attention": 0.0}
        counts = {"ffn": timed_modules(hero.model, "MLP", seconds, "ffn"),
                  "attention": timed_modules(hero.model, "Attention", seconds, "attention")}
        runs = []
        with torch.no_grad():
            for rep in range(args.reps + 1):
                seconds.update(ffn=0.0, attention=0.0)
                started = time.perf_counter()
                hero.forward(ids, None, hero.new_call("dense", record=False), use_cache=False)
                if rep:
                    runs.append({"total": time.perf_counter() - started, **seconds})
        row = {key: round(statistics.median(r[key] for r in runs), 3) for key in ("total", "ffn", "attention")}
        row |= {"ffn_share": round(row["ffn"] / row["total"], 3),
                "attention_share": round(row["attention"] / row["total"], 3), "modules": counts}
        report[dtype] = row
        print(dtype, json.dumps(row), flush=True)
    Path(__file__).with_name("dense_parts.json").write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
