"""The JSON an experiment script writes under docs/experiments/, and the command line that made it.

Shared by the measuring modules behind ``scripts/memory_diagnosis.py`` and ``scripts/position_skip.py``: each
measures, writes strict JSON (NaN / inf as null, so any JSON reader takes the file) and renders its page from it;
``--report`` skips the measuring and renders again from the file.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Callable
from pathlib import Path


def finite(value):
    """The JSON with NaN / inf as null, so the file is strict JSON."""
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def command_line(script: str, argv: list[str], threads: str | None) -> str:
    """How the page names its run: ``[OMP_NUM_THREADS=N ]python scripts/<script>.py ARGS``, shell-quoted."""
    prefix = f"OMP_NUM_THREADS={threads} " if threads else ""
    return f"{prefix}python scripts/{script}.py {shlex.join(argv)}".strip()


def measured_or_saved(path: Path, report_only: bool, measure: Callable[[], dict], indent: int) -> dict:
    """With ``report_only`` the JSON saved at ``path``; else ``measure()``, written there as strict JSON (its folder
    made) and returned as written, so a fresh page and a ``--report`` page read the same values."""
    if not report_only:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(finite(measure()), indent=indent, allow_nan=False) + "\n", encoding="utf-8")
    return json.loads(path.read_text(encoding="utf-8"))
