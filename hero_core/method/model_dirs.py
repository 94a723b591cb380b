"""What a local model directory holds, read without loading its weights: family, size, chat template, and the
bundled checkpoints trained for it (the app's backbone picker shows this before anything loads).

The size comes from the safetensors headers (a length-prefixed JSON table of tensor shapes, read as JSON: no
weights, no unpickling); the fingerprint is the one :class:`~hero_core.backbones.loading.Backbone` computes once loaded,
so the same check that refuses a mismatched checkpoint on load can refuse it here first.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path

from hero_core.backbones.families import UnsupportedFamily, family_of, ffn_width
from hero_core.backbones.loading import BackboneError, Fingerprint, check_model_dir

HEADER_LIMIT = 100 * 1024 * 1024  # a safetensors header larger than this is not one


@dataclass(frozen=True)
class ModelDirInfo:
    path: str
    family: str  # "Gemma 2", "GPT-NeoX", ...
    fingerprint: Fingerprint
    chat_template: bool
    checkpoints: tuple[str, ...]  # bundled checkpoints whose fingerprint is this directory's

    def describe(self) -> str:
        fp = self.fingerprint
        size = f"{fp.n_params / 1e9:.2f} B" if fp.n_params >= 1e9 else f"{fp.n_params / 1e6:.1f} M"
        trained = ", ".join(self.checkpoints) or "none (train one: python -m hero_core train --backbone …)"
        return (f"{self.family} ({fp.model_type}) · {size} parameters · {fp.n_layers} layers · "
                f"chat template: {'yes' if self.chat_template else 'no (a base model)'} · "
                f"checkpoints trained for it: {trained}")


def safetensors_parameter_count(directory: Path) -> int:
    """Elements of every tensor in the directory's *.safetensors files, from their headers alone."""
    total = 0
    for file in sorted(directory.glob("*.safetensors")):
        with file.open("rb") as fh:
            raw = fh.read(8)
            if len(raw) < 8:
                raise BackboneError(f"{file} is not a safetensors file (too short)")
            (length,) = struct.unpack("<Q", raw)
            if length > HEADER_LIMIT:
                raise BackboneError(f"{file} is not a safetensors file (header of {length:,} bytes)")
            try:
                header = json.loads(fh.read(length))
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise BackboneError(f"{file} is not a safetensors file (unreadable header)") from None
        total += sum(math.prod(entry["shape"]) for name, entry in header.items() if name != "__metadata__")
    return total


def has_chat_template(directory: Path) -> bool:
    """Whether the tokenizer files carry a chat template (in tokenizer_config.json or a file of its own)."""
    if (directory / "chat_template.jinja").is_file() or (directory / "chat_template.json").is_file():
        return True
    config = directory / "tokenizer_config.json"
    try:
        return bool(json.loads(config.read_text(encoding="utf-8")).get("chat_template")) if config.is_file() else False
    except (json.JSONDecodeError, UnicodeDecodeError, OSError):
        return False


def bundled_fingerprints() -> dict[str, Fingerprint]:
    """Each bundled checkpoint's backbone fingerprint, from its JSON alone."""
    from hero_core.method.checkpoint import BUNDLED_DIR, CONFIG_FILE, bundled_names

    found = {}
    for name in bundled_names():
        try:
            backbone = dict(json.loads((BUNDLED_DIR / name / CONFIG_FILE).read_text(encoding="utf-8"))["backbone"])
            backbone.pop("name", None)
            found[name] = Fingerprint(**backbone)
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def describe_model_dir(path: str | Path) -> ModelDirInfo:
    """What ``path`` holds. Raises :class:`~hero_core.backbones.loading.BackboneError` (with what to do) for a directory
    that is missing, has no config.json or safetensors weights, or holds a family HeRo Lens does not wrap."""
    from transformers import AutoConfig

    directory = Path(path).expanduser()
    check_model_dir(directory)
    try:
        config = AutoConfig.from_pretrained(directory, trust_remote_code=False)
        family = family_of(config)
    except UnsupportedFamily as err:
        raise BackboneError(str(err)) from None
    except (OSError, ValueError, KeyError) as err:
        raise BackboneError(f"{str(directory)!r}: config.json cannot be read ({err})") from None
    fingerprint = Fingerprint(model_type=config.model_type, n_layers=config.num_hidden_layers,
                              hidden_size=config.hidden_size, intermediate_size=ffn_width(config),
                              vocab_size=config.vocab_size, n_params=safetensors_parameter_count(directory))
    matching = tuple(name for name, fp in bundled_fingerprints().items() if fp == fingerprint)
    return ModelDirInfo(str(directory), family.name, fingerprint, has_chat_template(directory), matching)
