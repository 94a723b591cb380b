"""The model every command line loads: the backbone options (:func:`add_backbone_arguments`) and the loader that
reads them with ``--checkpoint`` (:func:`load_from_args`; ``HERO_LENS_TINY=1`` loads the tiny test model instead).

Shared by ``python -m hero_core trace|generate`` (:mod:`hero_core.cli.main`) and the subcommands it mounts (``eval``,
``sweep``), which is why it is not in :mod:`hero_core.cli.main`: that module imports theirs.
"""

from __future__ import annotations

import argparse
import os


def load_from_args(args):
    if os.environ.get("HERO_LENS_TINY") == "1":
        from hero_core.method.tiny import tiny_hero

        return tiny_hero()
    from hero_core.method.model import load_hero

    return load_hero(args.checkpoint, backbone=args.backbone, quantization=args.quantization, device=args.device,
                     dtype=args.dtype)


def add_backbone_arguments(p: argparse.ArgumentParser) -> None:
    """The backbone options :func:`load_from_args` reads besides ``--checkpoint`` (whose help each command words
    for itself)."""
    p.add_argument("--backbone", default=None, help="local HF model directory (default: embedded SmolLM2-135M)")
    p.add_argument("--quantization", choices=["nf4"], default=None, help="load the backbone in 4-bit NF4")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "auto"],
                   help="backbone precision without --quantization (auto: bf16 where a probe shows it faster)")
