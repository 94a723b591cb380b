"""A data-set sweep that survives scale: each rank writes its finished items to its own shard files as it goes,
a rerun with the same arguments resumes from the shards it finds, and rank 0 merges them from disk.

Layout under the sweep's ``--out`` folder::

    shards/settings.json              what the sweep is (data, runs, settings); a rerun must match it
    shards/rank{r}-{n:05d}.jsonl      the n-th flush of rank r: one line per finished item, {"index", "rows"}

A flush is written to a temporary name and renamed, so a process killed mid-write leaves no half shard. Memory per
rank holds at most ``every`` finished items between flushes, whatever the data set's size; only the merge at the
end (rank 0) reads every shard. Which rank ran an item does not matter to the merge: the items are put back in
their data-set order, so a resumed run, or a rerun with another number of ranks, writes the same tables as one
uninterrupted process.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from hero_core.files import atomic_write_text

SHARD_DIR = "shards"
SETTINGS = "settings.json"


class ShardMismatch(ValueError):
    """The output folder holds shards of a different sweep."""


def settings_digest(settings: dict) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]


class ShardWriter:
    """One rank's shards in ``out/shards``: :meth:`add` an item's rows, flushed every ``every`` items."""

    def __init__(self, out: str | os.PathLike, rank: int, settings: dict, every: int = 8) -> None:
        if every < 1:
            raise ValueError(f"shard size must be at least 1 item, got {every}")
        self.folder = Path(out) / SHARD_DIR
        self.rank, self.every = rank, every
        self.pending: list[dict] = []
        self.folder.mkdir(parents=True, exist_ok=True)
        check_settings(self.folder, settings)
        self.flushes = len(list(self.folder.glob(f"rank{rank}-*.jsonl")))

    def add(self, index: int, rows: dict) -> None:
        self.pending.append({"index": index, "rows": rows})
        if len(self.pending) >= self.every:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        path = self.folder / f"rank{self.rank}-{self.flushes:05d}.jsonl"
        atomic_write_text(path, "".join(json.dumps(item, default=_plain) + "\n" for item in self.pending))
        self.flushes += 1
        self.pending = []


def _plain(value):
    """numpy scalars as the Python numbers they hold (an int stays an int through the shard's JSON)."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} cannot be written to a shard")


def check_settings(folder: Path, settings: dict) -> None:
    """Refuse shards of another sweep; record this sweep's settings when the folder is new (any rank may: the
    write is atomic and every rank writes the same)."""
    path = folder / SETTINGS
    digest = settings_digest(settings)
    if path.is_file():
        found = json.loads(path.read_text(encoding="utf-8"))
        if found.get("digest") != digest:
            raise ShardMismatch(f"{folder} holds shards of another sweep ({found.get('settings')}); give a new "
                                "--out folder, or delete that one to start over")
    else:
        atomic_write_text(path, json.dumps({"digest": digest, "settings": settings}, sort_keys=True, default=str))


def finished_items(out: str | os.PathLike) -> set[int]:
    """Indices of the items some rank has already written (what a rerun skips)."""
    return {item["index"] for item in read_items(out)}


def read_items(out: str | os.PathLike) -> Iterator[dict]:
    """Every finished item in the shards, in file order (an item written twice is read twice)."""
    folder = Path(out) / SHARD_DIR
    for path in sorted(folder.glob("rank*-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                yield json.loads(line)


def merged_parts(out: str | os.PathLike) -> list[dict]:
    """The items' rows in data-set order, each once: what :meth:`SweepResult.from_parts` takes."""
    by_index = {}
    for item in read_items(out):
        by_index.setdefault(item["index"], item["rows"])
    return [by_index[i] for i in sorted(by_index)]
