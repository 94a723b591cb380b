"""Where a routed decode step spends its time beyond the dense step: torch's operator profile and Python's
function profile of greedy decode steps, dense against the default checkpoint at tau = 0 (every FFN runs, so any
extra time is the routing machinery's).

    OMP_NUM_THREADS=1 python docs/experiments/routed-block-profile/profile_step.py [--dtype bf16] [--steps 24]
"""

import argparse
import cProfile
import io
import pstats
import time

import torch
from torch.profiler import ProfilerActivity, profile

from hero_core import load_hero
from hero_core.method.call_state import RoutingCall


def decode(hero, call, prompt, steps):
    return hero.decode(prompt, call, steps + 1, stop_at_eos=False)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--prompt", type=int, default=64)
    args = p.parse_args()
    torch.set_num_threads(1)
    hero = load_hero(dtype=args.dtype)
    prompt = torch.randint(100, 20000, (1, args.prompt), generator=torch.Generator().manual_seed(0))
    calls = {"dense": lambda: hero.new_call("dense", record=False),
             # tau = 0 is outside the public range (0, 1): built directly, as the benchmark's router-only row does
             "router at tau=0": lambda: RoutingCall(router=hero.router, variant="hero", tau=0.0, record=False),
             "default tau": lambda: hero.new_call("hero", record=False)}
    with torch.inference_mode():
        for make in calls.values():
            decode(hero, make(), prompt, 4)  # warm-up
        for name, make in calls.items():
            best = min(_timed(hero, make, prompt, args.steps) for _ in range(3))
            print(f"{name}: {1000 * best / (args.steps + 1):.2f} ms per pass (prefill of {args.prompt} included once)")
        for name in ("dense", "router at tau=0"):
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                decode(hero, calls[name](), prompt, args.steps)
            print(f"\n== torch operators, {name} ==")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
        pr = cProfile.Profile()
        pr.enable()
        decode(hero, calls["router at tau=0"](), prompt, args.steps)
        pr.disable()
        out = io.StringIO()
        pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(30)
        print("\n== Python functions, router at tau=0 (tottime) ==\n" + out.getvalue())


def _timed(hero, make, prompt, steps):
    start = time.perf_counter()
    decode(hero, make(), prompt, steps)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
