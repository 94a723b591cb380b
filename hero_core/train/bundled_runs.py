"""Training the bundled checkpoints from the recipe table (hero_core.train.recipes): ``make checkpoints`` and
scripts/make_checkpoints.py call :func:`train_runs`.

Every run trains (and resumes) under :data:`STAGE_DIR`; a bundled run is copied into ``out_dir`` (the package's
checkpoints) only when it has finished, so a tracked checkpoint never holds a half-trained run's log. A run whose
finished checkpoint matches its recipe is skipped."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hero_core.backbones.loading import cache_dir
from hero_core.method.checkpoint import CONFIG_FILE
from hero_core.method.model import HeroModel
from hero_core.train.recipes import DATA_BLOCKS, RUNS, already_trained, stage_config
from hero_core.train.train import train
from hero_core.train.train_config import TrainConfig

STAGE_DIR = cache_dir() / "checkpoint-stages"


def unknown_runs(names: list[str]) -> list[str]:
    return sorted(set(names) - set(RUNS))


def location(name: str, out_dir: Path) -> Path:
    """Where run ``name``'s finished checkpoint lives: ``out_dir`` (or its subfolder the run names) for a bundled
    run, else :data:`STAGE_DIR`."""
    run = RUNS[name]
    return out_dir / run.folder / name if run.bundled else STAGE_DIR / name


def prepare_teacher(hero: HeroModel, out_dir: Path, threads: int, seeds: tuple[int, ...] = (0,)) -> None:
    """Build the shared training blocks and the dense teacher's cache of each data seed once, before parallel lanes
    need them."""
    from hero_core.train.train_data import teacher_targets, training_blocks

    for seed in seeds:
        cfg = TrainConfig(out=str(out_dir / "_prepare"), data_blocks=DATA_BLOCKS, threads=threads, seed=seed)
        teacher_targets(hero, cfg, training_blocks(hero, cfg, DATA_BLOCKS))


def train_runs(hero: HeroModel, names: list[str], out_dir: Path, *, threads: int = 0,
               steps_scale: float = 1.0) -> None:
    """Train ``names`` in order on ``hero``'s backbone, each from the stage its recipe continues."""
    unknown = unknown_runs(names)
    if unknown:
        raise ValueError(f"unknown runs {unknown}; choose from {list(RUNS)}")
    for name in names:
        run = RUNS[name]
        out, work = location(name, out_dir), STAGE_DIR / name
        steps = max(1, round(run.steps * steps_scale))
        if not (work / "_state").exists() and already_trained(out, run, steps):
            print(f"{name}: already trained, skipped", flush=True)
            continue
        if run.start and not (location(run.start, out_dir) / CONFIG_FILE).is_file():
            raise SystemExit(f"{name} continues from {run.start}, which is not trained yet: run it first")
        cfg = stage_config(run, work, steps=steps, start_dir=location(run.start, out_dir) if run.start else None,
                           threads=threads)
        train(cfg, hero)
        meta_path = work / CONFIG_FILE
        meta = json.loads(meta_path.read_text())
        timing = meta["training"]["timing"] = {**meta["training"]["timing"], "device": str(hero.device),
                                              "threads": threads or "all"}
        meta_path.write_text(json.dumps(meta, sort_keys=True, indent=2))
        shutil.rmtree(work / "_state", ignore_errors=True)
        if out != work:
            shutil.rmtree(out, ignore_errors=True)
            shutil.copytree(work, out)
        print(f"{name}: {timing}", flush=True)
