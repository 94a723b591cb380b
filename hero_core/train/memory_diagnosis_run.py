"""Why the bundled checkpoints' depth memory reads uniformly and gets no training signal, in numbers.

``python scripts/memory_diagnosis.py [--checkpoints hero-10 ...] [--limit 4]`` measures each checkpoint on held-out
text (hero_core.data.texts eval split, ``--limit`` texts per domain, each cut to ``--max-tokens``) with
hero_core.train.memory_diagnosis: gradient norms of KL(dense || routed) per parameter group, how consistent the memory's
gradients are across texts, the entropy and spread of the reads, key / query similarity across depth, how far rho
moved against the farthest Adam could move it, and reference reads by construction. It writes
docs/experiments/memory-diagnosis/diagnosis.json and renders README.md beside it; ``--report`` only re-renders.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from hero_core.data.results_json import command_line, measured_or_saved
from hero_core.files import say_wrote
from hero_core.train.memory_diagnosis_page import render

# This module measures and is the command line (its docstring is --help); the page is memory_diagnosis_page.

ROOT = Path(__file__).resolve().parents[2]

OUT = ROOT / "docs" / "experiments" / "memory-diagnosis"
DEFAULT_CHECKPOINTS = ("hero-10", "hero-10-s1", "no_aux-10", "hero-25")
RANDOM_SCALES = (1.0, 3.0, 10.0)  # std of the random q, k entries of the by-construction reference
RANDOM_ROWS = 300
def measure(args: argparse.Namespace, command: str) -> dict:
    from hero_core.backbones.threads import set_threads
    from hero_core.data.texts import DOMAINS, held_out_texts
    from hero_core.method.model import load_routers
    from hero_core.train.memory_diagnosis import diagnose, random_elu1_read
    from hero_core.train.recipes import RUNS  # the recipe: the learning rate of stages that are not bundled

    if args.threads:
        set_threads(args.threads)
    started = time.perf_counter()
    # every checkpoint checked against one backbone from the shared pool, loaded once
    models = dict(zip(args.checkpoints, load_routers(args.checkpoints, device=args.device), strict=True))
    first = models[args.checkpoints[0]]
    texts = held_out_texts(args.limit, first)
    flat = [t for d in DOMAINS for t in texts[d]]

    def stage_lr(name: str) -> float | None:
        return RUNS[name].lr if name in RUNS else None

    results = {}
    for name, hero in models.items():
        t0 = time.perf_counter()
        results[name] = diagnose(hero, flat, max_tokens=args.max_tokens, stage_lr=stage_lr)
        print(f"{name}: {time.perf_counter() - t0:.0f} s", flush=True)
    config = first.config
    synthetic = {"elu1_random": [random_elu1_read(RANDOM_ROWS, config.n_routed - 1, config.d_memory, scale)
                                 for scale in RANDOM_SCALES]}
    return ({"command": command, "limit_per_domain": args.limit, "max_tokens": args.max_tokens,
                   "domains": list(DOMAINS), "n_texts": len(flat), "backbone": first.backbone.name,
                   "synthetic": synthetic, "checkpoints": results,
             "wall_s": round(time.perf_counter() - started, 1)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--checkpoints", nargs="+", default=list(DEFAULT_CHECKPOINTS),
                        help="bundled names or checkpoint directories (as load_hero takes them)")
    parser.add_argument("--limit", type=int, default=4, help="held-out texts per domain")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--report", action="store_true", help="only re-render README.md from the saved JSON")
    args = parser.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    command = command_line("memory_diagnosis", given, os.environ.get("OMP_NUM_THREADS"))
    data = measured_or_saved(args.out / "diagnosis.json", args.report, lambda: measure(args, command), indent=1)
    (args.out / "README.md").write_text(render(data))
    return say_wrote(args.out / "README.md")


if __name__ == "__main__":
    sys.exit(main())
