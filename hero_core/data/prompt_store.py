"""Prompts too long for a link, kept by content hash in a local store that the link names.

A browser's address bar holds a few thousand characters at most, and a shared link with a 2,500-character prompt
in it silently fell back to the previous prompt. Instead, a long prompt is written once to
``<cache dir>/prompts/<id>.json`` (``id``: the first 16 hex digits of its SHA-256) and the link carries
``prompt_id=<id>``. The store is local: a link opened on another machine names a prompt that machine does not
have, and the app must then say so rather than show something else.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from hero_core.backbones.loading import cache_dir
from hero_core.files import atomic_write_text

ID_LENGTH = 16
_ID = re.compile(rf"[0-9a-f]{{{ID_LENGTH}}}")
FORMAT_VERSION = 1


def store_dir() -> Path:
    """Where stored prompts live (under ``$HERO_LENS_CACHE``, default ``~/.cache/hero_lens``)."""
    return cache_dir() / "prompts"


def prompt_id(text: str) -> str:
    """The id a prompt is stored under: a hash of its content, so the same prompt always gets the same link."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:ID_LENGTH]


def is_id(value: object) -> bool:
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def save(text: str, directory: Path | None = None) -> str:
    """Store ``text`` (once: an existing entry is kept) and return its id; raises OSError when it cannot."""
    key = prompt_id(text)
    path = (directory or store_dir()) / f"{key}.json"
    if load(key, directory) != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"format_version": FORMAT_VERSION, "id": key, "prompt": text},
                                           ensure_ascii=False))
    return key


def load(key: str, directory: Path | None = None) -> str | None:
    """The stored prompt of ``key``; None when the id is malformed, absent here, unreadable or not its content."""
    if not is_id(key):
        return None
    try:
        data = json.loads(((directory or store_dir()) / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    text = data.get("prompt") if isinstance(data, dict) else None
    # the content must hash to its id: a tampered or colliding file is not the prompt the link names
    return text if isinstance(text, str) and prompt_id(text) == key else None
