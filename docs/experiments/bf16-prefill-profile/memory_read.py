"""A bf16 prefill's depth memory in fp32 buffers (before) against buffers in the projections' bf16 (now), paired.

``OMP_NUM_THREADS=1 .venv/bin/python docs/experiments/bf16-prefill-profile/memory_read.py --checkpoint hero-25
[--reps 8] [--texts 12]``

Under bf16 autocast the router's projections come in bf16, were stored in fp32 buffers, and each bmm of
``DepthMemory.read`` cast the whole stored history (N, i, d_m) back to bf16 at every block; since this change the
inference buffers take the projections' dtype (the same reads to the bit). The "before" run patches the old write
back in (``old_write`` below); both runs are otherwise the product's own code. An earlier form of this script
compared the read run in fp32 instead (not kept; see the README).

* **decisions alone**: the 30 decisions of one bf16-autocast prefill of 2,048 tokens (random hbar states, the same
  in every run), timed in turn, 8 reps after a warm-up;
* **prefill**: 4 x 512 held-out tokens of the benchmark's pool; every rep times dense, before and now in turn;
  speed-ups are medians of per-rep paired ratios over dense, set against each run's FLOP ideal;
* **quality**: ``--texts`` held-out code and reasoning texts (their first 256 tokens): perplexity over dense and the
  share of (token, block) decisions that differ between before and now (0 expected).

Writes ``memory_read-<checkpoint>.json`` beside this file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paired_runs import prefill_timing, quality  # noqa: E402

from hero_core import load_hero  # noqa: E402
from hero_core.method.inject import decision_precision  # noqa: E402
from hero_core.method.memory import DepthMemory, stored_key  # noqa: E402

NOW = DepthMemory.write


def old_write(self, k, v, rho):
    """The write before this change: a prefill's bf16 projections stored in the fp32 buffers."""
    if not self._buffered:
        return NOW(self, k, v, rho)
    i = self.size
    self._decay[:i].mul_(rho)
    self._decay[i] = 1.0
    self._keys[:, i] = stored_key(self.kernel, k)
    self._values[:, i] = v
    self.size = i + 1


WRITES = {"before (fp32 buffers)": old_write, "now (bf16 buffers)": NOW}
RUNS = {"dense": None, **{name: (lambda write=write: setattr(DepthMemory, "write", write))
                          for name, write in WRITES.items()}}


def decisions_alone(hero, reps: int) -> dict:
    router = hero.router
    torch.manual_seed(0)
    hbars = [torch.randn(2048, router.config.d_model) * (1 + 0.1 * j) for j in range(router.config.n_routed)]
    bf16 = torch.empty(1, dtype=torch.bfloat16)
    seconds = {name: [] for name in WRITES}
    for rep in range(reps + 1):
        for name, write in WRITES.items():
            DepthMemory.write = write
            started = time.perf_counter()
            with torch.no_grad():
                path = router.new_path(2048, "hero", device="cpu", dtype=torch.float32)
                with decision_precision(router, bf16, tokens_per_row=512):
                    for j, hbar in enumerate(hbars, start=1):
                        router.decide(j, hbar, path, "hero")
            if rep:
                seconds[name].append(time.perf_counter() - started)
    before, now = (seconds[name] for name in WRITES)
    return {"median_s": {name: round(statistics.median(s), 4) for name, s in seconds.items()},
            "before_over_now_paired_median": round(statistics.median(b / n for b, n in zip(before, now)), 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default="hero-25")
    parser.add_argument("--reps", type=int, default=8)
    parser.add_argument("--texts", type=int, default=12)
    args = parser.parse_args()
    torch.set_num_threads(1)
    hero = load_hero(args.checkpoint, dtype="bf16")
    report = {"checkpoint": args.checkpoint, "backbone": "bf16", "threads": 1,
              "decisions_alone": decisions_alone(hero, args.reps),
              "prefill": prefill_timing(hero, RUNS, args.reps), "quality": quality(hero, RUNS, args.texts)}
    DepthMemory.write = NOW
    out = Path(__file__).with_name(f"memory_read-{args.checkpoint}.json")
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
