"""The one check behind every "value must be one of" setting (variant, memory kernel, precision, training options),
and the one behind every list whose names key the results (methods, runs).

One wording for each, so an error names the setting, the value that was given and what is allowed.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TypeVar

T = TypeVar("T")


def check_choice(what: str, value: T, allowed: Collection[str]) -> T:
    """Return ``value`` if it is one of ``allowed``; otherwise raise a ValueError naming ``what``."""
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}; {what} must be one of {', '.join(allowed)}")
    return value


def check_distinct(what: str, names: Sequence[str], why: str = "") -> None:
    """Raise a ValueError when two of ``names`` are equal: results keyed by them would overwrite each other."""
    if len(set(names)) != len(names):
        raise ValueError(f"{what} must be distinct, got {list(names)}" + (f": {why}" if why else ""))
