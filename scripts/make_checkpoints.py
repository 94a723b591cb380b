"""Reproduce the bundled checkpoints: ``make checkpoints`` (or ``python scripts/make_checkpoints.py``).

The stages and their settings are hero_core.train.recipes (the recipe table ``python -m hero_core train --recipe``
runs too); its docstring says what each run is. Each run records its wall and CPU time in ``hero_config.json``
(training.timing) and resumes where it stopped if interrupted; hero_core.train.bundled_runs trains them.
``--only`` picks runs; ``make checkpoints`` runs two lanes, one per core.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hero_core.backbones.loading import load_backbone
from hero_core.method.checkpoint import BUNDLED_DIR
from hero_core.method.model import HeroModel, fresh_router
from hero_core.train.bundled_runs import prepare_teacher, train_runs, unknown_runs
from hero_core.train.recipes import RUNS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="*", default=list(RUNS), help="subset of runs, in order")
    parser.add_argument("--steps-scale", type=float, default=1.0, help="multiply every run's steps (quick trials)")
    parser.add_argument("--out-dir", type=Path, default=BUNDLED_DIR)
    parser.add_argument("--threads", type=int, default=0, help="torch threads per run (0: every core)")
    parser.add_argument("--prepare-only", action="store_true",
                        help="only build the training data and the dense teacher's cache")
    args = parser.parse_args()
    unknown = unknown_runs(args.only)
    if unknown:
        parser.error(f"unknown runs {unknown}; choose from {list(RUNS)}")
    backbone = load_backbone(device="auto")
    hero = HeroModel(backbone, fresh_router(backbone), "training")
    if args.prepare_only:
        seeds = tuple(sorted({RUNS[name].seed for name in args.only}))
        prepare_teacher(hero, args.out_dir, args.threads, seeds)
    else:
        train_runs(hero, args.only, args.out_dir, threads=args.threads, steps_scale=args.steps_scale)
    return 0


if __name__ == "__main__":
    sys.exit(main())
