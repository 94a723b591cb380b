"""Router checkpoints: ``hero_adapter.safetensors`` (weights) + ``hero_config.json`` (sorted keys).

The JSON records the router config, the variant it was trained as and a fingerprint of the backbone;
loading onto a different backbone fails with a message naming both. Only safetensors and JSON are
read: nothing is unpickled. Files are written to a temp name and renamed, so a crash never leaves a
half-written checkpoint under the final name.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from hero_core.backbones.loading import Fingerprint
from hero_core.files import atomic_write, atomic_write_text
from hero_core.method.config import HeroConfig
from hero_core.method.router import HeroRouter

WEIGHTS_FILE = "hero_adapter.safetensors"
CONFIG_FILE = "hero_config.json"
FORMAT_VERSION = 1
BUNDLED_DIR = Path(__file__).parents[1] / "checkpoints"
SHARED_MODE = 0o644  # a checkpoint is meant to be shared (a temp file starts as 0600)
STORAGE_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message says why and what to do."""


class BackboneMismatchError(CheckpointError):
    """A sound checkpoint trained for another backbone (the one case where falling back to fresh routers is right)."""


@dataclass
class Checkpoint:
    config: HeroConfig
    fingerprint: Fingerprint
    backbone_name: str
    name: str
    state_dict: dict[str, torch.Tensor]
    training: dict[str, Any] = field(default_factory=dict)


def bundled_names() -> list[str]:
    if not BUNDLED_DIR.is_dir():
        return []
    return sorted(p.name for p in BUNDLED_DIR.iterdir() if (p / CONFIG_FILE).is_file())


SEEDS_FOLDER = "seeds"  # the extra training seeds of the memory question (hero_core.train.recipes.SEED_ARMS)


def seed_names() -> list[str]:
    """The bundled extra-seed runs, named ``seeds/<run>``: loadable by name, kept out of the main list."""
    folder = BUNDLED_DIR / SEEDS_FOLDER
    if not folder.is_dir():
        return []
    return sorted(f"{SEEDS_FOLDER}/{p.name}" for p in folder.iterdir() if (p / CONFIG_FILE).is_file())


def resolve(name_or_path: str | os.PathLike) -> Path:
    """A bundled checkpoint name (``hero-25`` …) or a directory holding the two files."""
    text = str(name_or_path)
    if not text.strip():
        raise CheckpointError("no checkpoint given: type a checkpoint directory or choose a bundled name")
    if text in bundled_names():
        return BUNDLED_DIR / text
    if text in seed_names():
        return BUNDLED_DIR / text
    path = Path(text).expanduser()
    if not path.exists():
        names = ", ".join(bundled_names()) or "none yet"
        raise CheckpointError(f"no checkpoint {text!r}: not a bundled name (bundled: {names}) and no such directory")
    if path.is_file() and path.name in (CONFIG_FILE, WEIGHTS_FILE):
        path = path.parent
    if not (path / CONFIG_FILE).is_file() or not (path / WEIGHTS_FILE).is_file():
        raise CheckpointError(f"{text!r} is not a HeRo checkpoint: it needs {CONFIG_FILE} and {WEIGHTS_FILE}")
    return path


def save_checkpoint(directory: str | os.PathLike, router: HeroRouter, fingerprint: Fingerprint,
                    backbone_name: str, *, training: dict[str, Any] | None = None,
                    storage_dtype: str = "float32") -> Path:
    if storage_dtype not in STORAGE_DTYPES:
        raise CheckpointError(f"storage_dtype must be one of {sorted(STORAGE_DTYPES)}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    dtype = STORAGE_DTYPES[storage_dtype]
    tensors = {k: v.detach().to("cpu", dtype).contiguous() for k, v in router.state_dict().items()}
    meta = {"format_version": FORMAT_VERSION, "router": router.config.to_dict(),
            "backbone": {"name": backbone_name, **fingerprint.to_dict()},
            "storage_dtype": storage_dtype, "training": training or {}}
    atomic_write(directory / WEIGHTS_FILE, lambda tmp: save_file(tensors, tmp, metadata={"format": "pt"}),
                 mode=SHARED_MODE)
    text = json.dumps(meta, sort_keys=True, indent=2)
    atomic_write_text(directory / CONFIG_FILE, text, mode=SHARED_MODE)
    return directory


def read_checkpoint(name_or_path: str | os.PathLike) -> Checkpoint:
    path = resolve(name_or_path)
    try:
        meta = json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path / CONFIG_FILE} is not valid JSON: {err}") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path / CONFIG_FILE} must hold a JSON object")
    version = meta.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise CheckpointError(f"{path / CONFIG_FILE} has format_version {version!r}; this hero_core reads "
                              f"up to {FORMAT_VERSION}")
    config = HeroConfig.from_dict(meta.get("router"))
    backbone = meta.get("backbone")
    try:
        name = str(backbone.pop("name"))
        fingerprint = Fingerprint(**backbone)
    except (AttributeError, KeyError, TypeError) as err:
        raise CheckpointError(f"{path / CONFIG_FILE} has no valid backbone fingerprint ({err})") from None
    try:
        tensors = load_file(path / WEIGHTS_FILE)
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(f"{path / WEIGHTS_FILE} is corrupt or truncated ({err}); "
                              "re-create it with 'make checkpoints' or re-download the project") from None
    return Checkpoint(config=config, fingerprint=fingerprint, backbone_name=name, name=path.name,
                      state_dict=tensors, training=meta.get("training") or {})


def check_backbone(checkpoint: Checkpoint, fingerprint: Fingerprint, backbone_name: str) -> None:
    if checkpoint.fingerprint != fingerprint:
        raise BackboneMismatchError(
            f"checkpoint {checkpoint.name!r} was trained for {checkpoint.backbone_name} "
            f"({checkpoint.fingerprint.describe()}) but the loaded backbone is {backbone_name} "
            f"({fingerprint.describe()}); train a router for this backbone with 'python -m hero_core train'")


def build_router(checkpoint: Checkpoint) -> HeroRouter:
    router = HeroRouter(checkpoint.config)
    expected = router.state_dict()
    missing = sorted(set(expected) - set(checkpoint.state_dict))
    unexpected = sorted(set(checkpoint.state_dict) - set(expected))
    if missing or unexpected:
        raise CheckpointError(f"checkpoint {checkpoint.name!r} does not match its config: "
                              f"missing {missing[:5]}, unexpected {unexpected[:5]}")
    for key, value in checkpoint.state_dict.items():
        if value.shape != expected[key].shape:
            raise CheckpointError(f"checkpoint {checkpoint.name!r}: tensor {key} has shape {tuple(value.shape)}, "
                                  f"config implies {tuple(expected[key].shape)}")
        if not torch.isfinite(value).all():
            raise CheckpointError(f"checkpoint {checkpoint.name!r}: tensor {key} holds NaN or inf values")
    router.load_state_dict({k: v.float() for k, v in checkpoint.state_dict.items()})
    return router


def health_line(health: dict | None) -> str:
    """One line saying how a checkpoint's training went (its ``training.health``, written by the degradation guard of
    hero_core.train.health), for the app's checkpoint descriptions and load_hero's log."""
    if not health:
        return "no health record (trained before the degradation guard)"
    if not health.get("held_out_loss"):
        return "no held-out evaluations (the guard was off)"
    parts = [f"held-out loss best {health['best_loss']:.3f} at step {health['best_step']}, "
             f"final {health['final_loss']:.3f}"]
    if health.get("rollbacks"):
        parts.append(f"{len(health['rollbacks'])} degradation(s): " + ", ".join(
            f"step {r['at_step']}" + (f" rolled back to {r['to_step']}" if r["to_step"] is not None else "")
            for r in health["rollbacks"]))
    if health.get("stopped_at") is not None:
        parts.append(f"stopped at step {health['stopped_at']}")
    parts.append("kept the best state" if health.get("kept") == "best" else "kept the final state")
    return "; ".join(parts)
