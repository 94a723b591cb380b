"""Prompt data sets for a sweep (:mod:`hero_core.eval.sweep.run`): an :class:`Item` per prompt, read from a JSONL /
JSON / CSV / TXT file or drawn from a bundled held-out set."""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hero_core.files import json_lines

BUNDLED_SETS = ("reasoning", "code", "chat", "humaneval")
PROMPT_KEYS = ("prompt", "text", "input", "question")  # first present key (JSONL) or column (CSV) is the prompt
FORMATS = ("jsonl", "json", "csv", "txt")
MAX_ITEMS = 100_000


@dataclass(frozen=True)
class Item:
    """One prompt of a data set: a stable id, its text and a domain (which drives token categories)."""

    id: str
    text: str
    domain: str = "custom"


# -- reading data sets ------------------------------------------------------------------------------
def _item(row: Mapping, n: int, where: str, default_domain: str) -> Item:
    key = next((k for k in PROMPT_KEYS if isinstance(row.get(k), str)), None)
    if key is None:
        raise ValueError(f"{where}: no prompt field; give one of {', '.join(PROMPT_KEYS)} as a string")
    return Item(str(row.get("id", n)), row[key], str(row.get("domain") or default_domain))


def read_prompts(data: bytes | str, name: str, *, domain: str = "custom") -> list[Item]:
    """Prompts from the contents of a JSONL / JSON / CSV / TXT file; ``name``'s suffix picks the format.

    JSONL: one object per line with a ``prompt`` (or ``text``, ``input``, ``question``) string, optional ``id``
    and ``domain``. JSON: a list of such objects or of strings. CSV: a header row with one of those columns.
    TXT: one prompt per non-empty line."""
    fmt = Path(name).suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ValueError(f"{name}: unsupported file type {fmt!r}; use one of .{', .'.join(FORMATS)}")
    try:
        text = data.decode("utf-8-sig") if isinstance(data, bytes) else data
    except UnicodeDecodeError as err:
        raise ValueError(f"{name} is not UTF-8 text ({err})") from None
    if fmt == "txt":
        items = [Item(str(i), line, domain) for i, line in enumerate(t for t in text.splitlines() if t.strip())]
    elif fmt == "csv":
        items = _csv_items(text, name, domain)
    else:
        rows = _json_rows(text, name) if fmt == "json" else [row for _, row in json_lines(
            text, lambda n, err: ValueError(f"{name} line {n} is not valid JSON ({err})"))]
        items = [_object_item(row, i, name, domain) for i, row in enumerate(rows)]
    items = [it for it in items if it.text.strip()]
    if not items:
        raise ValueError(f"{name} holds no non-empty prompts")
    if len(items) > MAX_ITEMS:
        raise ValueError(f"{name} holds {len(items)} prompts; split it into files of at most {MAX_ITEMS}")
    return items


def _csv_items(text: str, name: str, domain: str) -> list[Item]:
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames or not set(PROMPT_KEYS) & set(reader.fieldnames):
        raise ValueError(f"{name}: the CSV header needs a column named one of {', '.join(PROMPT_KEYS)}")
    return [_item(row, i, f"{name} row {i + 2}", domain) for i, row in enumerate(reader)]


def _json_rows(text: str, name: str) -> list:
    """A JSON data set's list (of prompts or objects)."""
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{name} is not valid JSON ({err})") from None
    if not isinstance(rows, list):
        raise ValueError(f"{name}: a JSON data set must be a list of prompts or objects")
    return rows


def _object_item(row, i: int, name: str, domain: str) -> Item:
    """Item ``i`` of a JSON / JSONL data set: an object with a prompt field, or the prompt itself as a string."""
    row = {"prompt": row} if isinstance(row, str) else row
    if not isinstance(row, Mapping):
        raise ValueError(f"{name} item {i + 1}: expected an object or a string, got {type(row).__name__}")
    return _item(row, i, f"{name} item {i + 1}", domain)


def load_prompts(path: str | os.PathLike) -> list[Item]:
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no data set file at {path}")
    return read_prompts(path.read_bytes(), path.name)


def bundled_items(name: str, n: int, hero=None) -> list[Item]:
    """``n`` held-out prompts of a bundled set: ``reasoning``, ``code``, ``chat`` (needs ``hero``: the dense
    model's own replies) from :func:`hero_core.data.texts.domain_texts`, or ``humaneval`` (the problem prompts)."""
    if name not in BUNDLED_SETS:
        raise ValueError(f"unknown bundled set {name!r}; choose one of {', '.join(BUNDLED_SETS)}")
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"the number of items must be a positive integer, got {n!r}")
    if name == "humaneval":
        from hero_core.eval.benchmarks.humaneval import load_problems

        return [Item(p.task_id, p.prompt, "code") for p in load_problems(limit=n)]
    from hero_core.data.texts import domain_texts

    return [Item(f"{name}-{i}", text, name) for i, text in enumerate(domain_texts(name, "eval", n, hero=hero))]
