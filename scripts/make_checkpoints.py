"""Reproduce the bundled checkpoints: ``make checkpoints`` (or ``python scripts/make_checkpoints.py``).

One recipe for every run (hero_core.train.TrainConfig's defaults): self-distillation from the dense model,
executed branches unscaled with the straight-through gate gradient, adapters warm-started by local
distillation, the hard budget with a curriculum, bf16 autocast where the CPU runs it faster.

* ``hero-10`` / ``local-10`` start from fresh routers; ``-25`` continue from their ``-10``, ``-40`` from their
  ``-25`` (the budget curriculum ramps from the start checkpoint's skip), so the tokens each has seen add up.
* the paper's ablations ``no_memread-10``, ``no_aux-10``, ``no_pos-10`` start fresh at the 10 % budget
  (``local-10`` is the ablation without history).

Each run records its wall and CPU time in ``hero_config.json`` (training.timing) and resumes where it
stopped if interrupted. ``--only`` picks runs; ``make checkpoints`` runs two lanes, one per core.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hero_core.backbones import load_backbone  # noqa: E402
from hero_core.checkpoint import BUNDLED_DIR, CONFIG_FILE  # noqa: E402
from hero_core.model import HeroModel, fresh_router  # noqa: E402
from hero_core.train import TrainConfig, train  # noqa: E402

RUNS = {  # name: (variant, target param skip, steps of 4 x 128 tokens, start from)
    "hero-10": ("hero", 0.10, 750, None),
    "local-10": ("no_history", 0.10, 750, None),
    "hero-25": ("hero", 0.25, 300, "hero-10"),
    "local-25": ("no_history", 0.25, 300, "local-10"),
    "hero-40": ("hero", 0.40, 150, "hero-25"),
    "local-40": ("no_history", 0.40, 150, "local-25"),
    "no_memread-10": ("no_memread", 0.10, 100, None),
    "no_aux-10": ("no_aux", 0.10, 100, None),
    "no_pos-10": ("no_pos", 0.10, 100, None),
}
DATA_BLOCKS = 3000  # 3000 x 128 tokens = 384k distinct tokens (chat : code : reasoning = 2 : 1.5 : 1), shared


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
        from hero_core.train import teacher_targets, training_blocks

        cfg = TrainConfig(out=str(args.out_dir / "_prepare"), data_blocks=DATA_BLOCKS, threads=args.threads)
        teacher_targets(hero, cfg, training_blocks(hero, cfg, DATA_BLOCKS))
        return 0
    for name in args.only:
        variant, skip, steps, start = RUNS[name]
        out = args.out_dir / name
        if (out / CONFIG_FILE).is_file() and not (out / "_state").exists():
            meta = json.loads((out / CONFIG_FILE).read_text())
            if meta.get("training", {}).get("train_config", {}).get("target_skip") == skip \
                    and meta.get("router", {}).get("branch_scaling") == TrainConfig.branch_scaling:
                print(f"{name}: already trained, skipped", flush=True)
                continue
        steps = max(1, round(steps * args.steps_scale))
        cfg = TrainConfig(out=str(out), variant=variant, target_skip=skip, steps=steps, threads=args.threads,
                          init_from=str(args.out_dir / start) if start else None, data_blocks=DATA_BLOCKS)
        wall, cpu = time.perf_counter(), time.process_time()
        train(cfg, hero)
        timing = {"wall_s": round(time.perf_counter() - wall, 1), "cpu_s": round(time.process_time() - cpu, 1),
                  "device": str(backbone.device), "threads": args.threads or "all"}
        meta_path = out / CONFIG_FILE
        meta = json.loads(meta_path.read_text())
        meta["training"]["timing"] = timing
        meta_path.write_text(json.dumps(meta, sort_keys=True, indent=2))
        shutil.rmtree(out / "_state", ignore_errors=True)
        print(f"{name}: {timing}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
