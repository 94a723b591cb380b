"""The train / evaluation split of every built-in text and of a user's own corpus: a hash of the item's key.

One item in :data:`EVAL_SHARE` (by the first 32 bits of the SHA-256 of its key) is evaluation data, the rest is
training data, so no text can land in both and the split never depends on what else is in the set.
"""

from __future__ import annotations

import hashlib

SPLITS = ("train", "eval")
EVAL_SHARE = 5  # one item in five (by hash) is evaluation data


def split_of(key: str) -> str:
    digest = int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:8], 16)
    return "eval" if digest % EVAL_SHARE == 0 else "train"


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
