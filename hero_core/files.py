"""Atomic file writes (a temp file beside the target, then one rename, so a crash never leaves half a file), and
reading JSON lines with the number of the line that is not JSON."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


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


def json_lines(text: str, not_json: Callable[[int, json.JSONDecodeError], Exception]) -> Iterator[tuple[int, Any]]:
    """``(line number from 1, parsed value)`` for each non-blank line of a JSONL text, lazily (a caller's check of
    one record raises before later lines are parsed). A line that is not JSON raises ``not_json(number, error)``,
    so each reader words the error for its own users."""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            raise not_json(number, err) from None
        yield number, value


def say_wrote(*paths: object, took_s: float | None = None) -> int:
    """Print the line a page-writing script ends with, ``wrote a, b and c`` (``in N s`` after it when ``took_s`` is
    given), and return 0, the script's exit status, so its ``main`` can end with ``return say_wrote(...)``."""
    names = [str(p) for p in paths]
    listed = names[-1] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    print(f"wrote {listed}" + ("" if took_s is None else f" in {took_s} s"))
    return 0
