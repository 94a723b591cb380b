"""Set each bundled checkpoint's tau so its realised param skip on train-split text meets its budget.

Run by ``scripts/make_checkpoints.py`` after training (and usable alone: ``python scripts/calibrate_budgets.py``).
Writes ``router.tau`` and ``training.tau_calibration`` into the checkpoint's hero_config.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hero_core.backbones.loading import load_backbone
from hero_core.eval.calibration import calibration_blocks
from hero_core.files import atomic_write_text
from hero_core.method import checkpoint as ckpt
from hero_core.method.model import load_checkpoint
from hero_core.method.tau_search import realised_skip

TARGETS = {"hero-25": 0.25, "local-25": 0.25, "hero-40": 0.40, "local-40": 0.40}


def calibrate(backbone, directory: Path, target: float) -> dict:
    hero = load_checkpoint(directory, backbone)
    blocks = calibration_blocks(hero)
    before = realised_skip(hero, blocks, hero.config.variant, 0.5)
    tau, _ = hero.tau_for_param_skip(blocks, None, hero.config.variant, target)
    # Round to the app's slider step (0.01), so the slider's starting value is exactly the checkpoint's tau.
    tau = round(tau, 2)
    skip = realised_skip(hero, blocks, hero.config.variant, tau)
    meta_path = directory / ckpt.CONFIG_FILE
    meta = json.loads(meta_path.read_text())
    meta["router"]["tau"] = tau
    meta["training"]["tau_calibration"] = {"target_param_skip": target, "skip_at_tau_0.5": before,
                                           "tau": tau, "skip_at_tau": skip,
                                           "data": "8 x 128 train-split tokens (chat, code, reasoning)"}
    atomic_write_text(meta_path, json.dumps(meta, sort_keys=True, indent=2))
    return meta["training"]["tau_calibration"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="*", default=list(TARGETS))
    parser.add_argument("--dir", type=Path, default=ckpt.BUNDLED_DIR)
    args = parser.parse_args()
    backbone = load_backbone(device="auto")  # loaded once: each HeroModel reuses the wrapped backbone
    for name in args.only:
        result = calibrate(backbone, args.dir / name, TARGETS[name])
        print(name, json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
