"""Reproduce the bundled checkpoints: ``make checkpoints`` (or ``python scripts/make_checkpoints.py``).

The stages and their settings are hero_core.train.recipes (the recipe table ``python -m hero_core train --recipe``
runs too); its docstring says what each run is. Each run records its wall and CPU time in ``hero_config.json``
(training.timing) and resumes where it stopped if interrupted. Runs train under STAGE_DIR; a bundled run is copied
into hero_core/checkpoints/ when it finishes. ``--only`` picks runs; ``make checkpoints`` runs two lanes, one per
core.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from hero_core.core.backbones import cache_dir, load_backbone
from hero_core.core.checkpoint import BUNDLED_DIR, CONFIG_FILE
from hero_core.core.model import HeroModel, fresh_router
from hero_core.train.recipes import DATA_BLOCKS, RUNS, already_trained, stage_config
from hero_core.train.train import TrainConfig, train

STAGE_DIR = cache_dir() / "checkpoint-stages"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="*", default=list(RUNS), help="subset of runs, in order")
    parser.add_argument("--steps-scale", type=float, default=1.0, help="multiply every run's steps (quick trials)")
    parser.add_argument("--out-dir", type=Path, default=BUNDLED_DIR)
    parser.add_argument("--threads", type=int, default=0, help="torch threads per run (0: every core)")
    parser.add_argument("--prepare-only", action="store_true",
                        help="only build the training data and the dense teacher's cache")
    args = parser.parse_args()
    unknown = sorted(set(args.only) - set(RUNS))
    if unknown:
        parser.error(f"unknown runs {unknown}; choose from {list(RUNS)}")
    backbone = load_backbone(device="auto")
    hero = HeroModel(backbone, fresh_router(backbone), "training")
    if args.prepare_only:
        from hero_core.train.train_data import teacher_targets, training_blocks

        cfg = TrainConfig(out=str(args.out_dir / "_prepare"), data_blocks=DATA_BLOCKS, threads=args.threads)
        teacher_targets(hero, cfg, training_blocks(hero, cfg, DATA_BLOCKS))
        return 0
    def location(name: str) -> Path:
        return args.out_dir / name if RUNS[name].bundled else STAGE_DIR / name

    for name in args.only:
        run = RUNS[name]
        out = location(name)
        # Every run trains (and resumes) under STAGE_DIR; a bundled one is copied into the package only when it
        # has finished, so the tracked checkpoint never holds a half-trained run's log.
        work = STAGE_DIR / name
        steps = max(1, round(run.steps * args.steps_scale))
        if not (work / "_state").exists() and already_trained(out, run, steps):
            print(f"{name}: already trained, skipped", flush=True)
            continue
        if run.start and not (location(run.start) / CONFIG_FILE).is_file():
            raise SystemExit(f"{name} continues from {run.start}, which is not trained yet: run it first")
        cfg = stage_config(run, work, steps=steps, start_dir=location(run.start) if run.start else None,
                           threads=args.threads)
        train(cfg, hero)
        meta_path = work / CONFIG_FILE
        meta = json.loads(meta_path.read_text())
        timing = meta["training"]["timing"] = {**meta["training"]["timing"], "device": str(backbone.device),
                                              "threads": args.threads or "all"}
        meta_path.write_text(json.dumps(meta, sort_keys=True, indent=2))
        shutil.rmtree(work / "_state", ignore_errors=True)
        if out != work:
            shutil.rmtree(out, ignore_errors=True)
            shutil.copytree(work, out)
        print(f"{name}: {timing}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
