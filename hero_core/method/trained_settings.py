"""What a finished checkpoint was trained with, and which of a run's asked settings it was trained otherwise: the one
test of "this run is already trained". A recipe's stage (:func:`hero_core.train.recipes.already_trained`) is trained
again where it differs; a study's run (:func:`hero_core.eval.study.lanes.finished`) is refused, the folder being
another study's. It sits beside the checkpoint format, below both, because measuring never imports training
(docs/architecture.md).

Training writes the checkpoint's config last, so a folder that holds one holds a finished run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from hero_core.method.checkpoint import CONFIG_FILE

# Settings a checkpoint's train config records only from some version on: a run recorded before was trained at these.
UNRECORDED = {"budget_scope": "batch", "seed": 0}


def trained_settings(folder: str | os.PathLike) -> dict | None:
    """What the finished checkpoint in ``folder`` was trained with: its train config (a setting it does not record at
    its :data:`UNRECORDED` value), ``init_from`` as the folder name of the checkpoint it continued ("" from fresh
    routers), and what its router was built with: ``branch_scaling``, ``router_widths`` (head_hidden, d_encoder, the
    widths themselves where the train config may say 0, "sized to the backbone") and ``d_model``. None where
    ``folder`` holds no finished checkpoint."""
    path = Path(folder) / CONFIG_FILE
    if not path.is_file():
        return None
    meta = json.loads(path.read_text(encoding="utf-8"))
    router = meta.get("router", {})
    done = UNRECORDED | meta.get("training", {}).get("train_config", {})
    return done | {"init_from": Path(done.get("init_from") or "").name, "branch_scaling": router.get("branch_scaling"),
                   "router_widths": (router.get("head_hidden"), router.get("d_encoder")),
                   "d_model": router.get("d_model")}


def trained_otherwise(trained: dict, asked: dict) -> dict:
    """Each of ``asked``'s settings that ``trained`` (:func:`trained_settings`) holds at another value, as
    {setting: (trained, asked)}; empty where the run was trained as asked."""
    return {name: (trained.get(name), value) for name, value in asked.items() if trained.get(name) != value}
