"""A prefill's decision in fp32 against bf16 autocast, on the bf16 backbone: time and quality, side by side.

``OMP_NUM_THREADS=1 .venv/bin/python docs/experiments/bf16-prefill-profile/decision_precision.py --checkpoint hero-40
[--reps 8] [--texts 12]``

Both runs use the product's own code: the decision's precision is chosen by
``hero_core.method.inject.decision_precision`` from the router's recorded training precision, so setting
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
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paired_runs import prefill_timing, quality  # noqa: E402

from hero_core import load_hero  # noqa: E402


def runs(hero) -> dict:
    """Dense, then every decision in fp32 (the previous behaviour), then bf16 autocast (what every bundled checkpoint
    records, so what ships), chosen by the product's own rule from the router's recorded training precision."""
    def trained_in(dtype):
        return lambda: hero.router.config.extra.__setitem__("compute_dtype", dtype)
    return {"dense": None, "fp32 decisions": trained_in("float32"), "bf16 autocast decisions": trained_in("bfloat16")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default="hero-40")
    parser.add_argument("--reps", type=int, default=8)
    parser.add_argument("--texts", type=int, default=12)
    args = parser.parse_args()
    torch.set_num_threads(1)
    hero = load_hero(args.checkpoint, dtype="bf16")
    report = {"checkpoint": args.checkpoint, "backbone": "bf16", "threads": 1,
              "timing": prefill_timing(hero, runs(hero), args.reps), "quality": quality(hero, runs(hero), args.texts)}
    out = Path(__file__).with_name(f"decision_precision-{args.checkpoint}.json")
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
