"""What a bundled checkpoint is, in words a newcomer reads: its group in the picker and one line from its config.

Names follow one code (the glossary repeats it): ``<variant>-<budget %>`` is a finished run (``hero-10``: HeRo
trained to 10 % param skip; ``local-10``: the same without history), ``-s1`` only its first training stage,
``-rN`` recipe N (docs/method.md lists them), ``-seedN`` the same recipe with training seed N (the bundled run is
seed 0), and ``no_memread`` / ``no_aux`` / ``no_pos`` the paper's ablations (no memory read, no path features, no
position features).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from hero_core.method import checkpoint as ckpt
from hero_core.method.config import VARIANTS

# The memory question over training seeds: the first stage of HeRo with recipe 2's memory, its local twin and its
# no-memory-read twin (hero_core.train.recipes trains them; hero_core.eval.study.bundled compares them). Seed 0 is the
# bundled run; the extra seeds are bundled under checkpoints/seeds/ as ``<arm>-seed<N>``.
SEED_ARMS = ("hero-10-r2-s1", "local-10-s1", "no_memread-10-r2-s1")
EXTRA_SEEDS = (1, 2)
# The router-width question over the same seeds: that first stage at the paper's widths (hero-10-r2-s1), sized to the
# backbone (recipe 7) and at 16 units (recipe 8); differing in the router's widths alone.
WIDTH_ARMS = ("hero-10-r2-s1", "hero-10-r7-s1", "hero-10-r8-s1")


def seed_runs(arm: str) -> list[str]:
    """Every run of ``arm`` over the training seeds: the bundled run (seed 0) first."""
    return [arm] + [f"{arm}-seed{seed}" for seed in EXTRA_SEEDS]


GROUPS = ("default", "as trained at 10 / 25 / 40 %", "ablations", "training stages and research runs")
ABLATION = re.compile(r"^(no_memread|no_aux|no_pos)-\d+")
RESEARCH = re.compile(r"(-s1(-seed\d+)?$|-r[2356]c?$|-13-|^seeds/)")
RECIPE_NAMES = {"r2": "recipe 2: selective depth memory", "r3": "recipe 3: answers weighted 3x",
                "r4": "recipe 4: selective memory, full second stage", "r5": "recipe 5: long blocks",
                "r6": "recipe 6: short-answer data", "r7": "recipe 7: router sized to its backbone",
                "r8": "recipe 8: narrowest router (16 units)"}
NAME_CODES = (
    ("hero-10, local-10 …", "router and its target param skip in % (local = the no_history variant)"),
    ("-s1", "the first training stage only (750 steps)"),
    ("-rN", "recipe N: " + "; ".join(f"{k[1:]} {v.split(': ')[1]}" for k, v in RECIPE_NAMES.items())),
    ("-seedN", "the same recipe with training seed N (bundled runs are seed 0); under seeds/"),
    ("no_memread / no_aux / no_pos", "ablations: no memory read / no path features / no position features"),
)


@dataclass(frozen=True)
class CheckpointInfo:
    name: str
    group: str
    line: str  # one line: what it is, its budget, how much it trained, its training health


def group_of(name: str, default_name: str) -> str:
    if name == default_name:
        return GROUPS[0]
    if RESEARCH.search(name):
        return GROUPS[3]
    if ABLATION.match(name):
        return GROUPS[2]
    return GROUPS[1]


def describe(name: str, default_name: str) -> CheckpointInfo:
    """The group and one-line description of bundled checkpoint ``name`` (read from its hero_config.json)."""
    try:
        meta = json.loads((ckpt.resolve(name) / ckpt.CONFIG_FILE).read_text(encoding="utf-8"))
    except (ValueError, OSError) as err:
        return CheckpointInfo(name, group_of(name, default_name), f"unreadable config ({err})")
    training = meta.get("training", {})
    cfg = training.get("train_config", {})
    variant = meta.get("router", {}).get("variant", cfg.get("variant", "hero"))
    what = VARIANTS[variant].description if variant in VARIANTS else variant
    parts = [what]
    if "target_skip" in cfg:
        parts.append(f"trained to {100 * cfg['target_skip']:.0f} % param skip")
    if training.get("tokens_seen"):
        parts.append(f"{training['tokens_seen'] / 1e6:.2f} M training tokens")
    recipe = re.search(r"-(r\d)", name)
    if recipe and recipe.group(1) in RECIPE_NAMES:
        parts.append(RECIPE_NAMES[recipe.group(1)])
    parts.append(f"seed {cfg.get('seed', 0)}")
    parts.append(ckpt.health_line(training.get("health")))
    return CheckpointInfo(name, group_of(name, default_name), " · ".join(parts))
