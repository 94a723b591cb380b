"""Would bf16 adapters make bf16 prefill routing faster? ``.venv/bin/python docs/experiments/bf16-adapters/probe.py``

hero-40 on a bf16 backbone (router and adapters in fp32, as ``load_hero(dtype="bf16")`` loads them), 4 x 512
tokens, one thread: dense and routed prefill timed (median of 3 after a warm-up), then the same with the adapters
cast to bf16, in one process.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from hero_core import load_hero  # noqa: E402


def median_s(hero, make_call, ids, reps: int = 3) -> float:
    def run():
        with torch.no_grad():
            hero.forward(ids, None, make_call(), use_cache=False)

    run()
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    torch.set_num_threads(1)
    hero = load_hero("hero-40", dtype="bf16")
    ids = torch.randint(100, 2000, (4, 512), generator=torch.Generator().manual_seed(0))
    for label in ("fp32 adapters", "bf16 adapters"):
        if label == "bf16 adapters":
            for adapter in hero.router.adapters:
                adapter.to(torch.bfloat16)
        dense = median_s(hero, lambda: hero.new_call("dense", record=False), ids)
        routed = median_s(hero, lambda: hero.new_call("hero", record=False), ids)
        print(f"{label}: dense {dense:.2f} s, routed {routed:.2f} s, speed-up x{dense / routed:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
