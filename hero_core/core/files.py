"""Atomic file writes: a temp file beside the target, then one rename, so a crash never leaves half a file."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def atomic_write(path: str | os.PathLike, write: Callable[[str], object], *, mode: int | None = None) -> Path:
    """Create or replace ``path`` atomically: ``write(tmp)`` writes a temp file in the same directory, which
    is then renamed over ``path`` (removed instead if ``write`` raises). ``mode`` sets the file's permission
    bits (the temp file starts as 0600)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str, *, mode: int | None = None) -> Path:
    """:func:`atomic_write` of a UTF-8 text."""
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"), mode=mode)
