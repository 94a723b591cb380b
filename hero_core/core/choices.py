"""The one check behind every "value must be one of" setting (variant, memory kernel, precision, training options).

One wording for all of them, so an error names the setting, the value that was given and what is allowed.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TypeVar

T = TypeVar("T")


def check_choice(what: str, value: T, allowed: Collection[str]) -> T:
    """Return ``value`` if it is one of ``allowed``; otherwise raise a ValueError naming ``what``."""
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}; {what} must be one of {', '.join(allowed)}")
    return value
