"""A perplexity ratio with its 95 % interval, written the one way every table, page and script writes it:
``0.930 [0.900, 0.960]`` (three decimals: the intervals of the held-out sets are a few hundredths wide)."""

from __future__ import annotations

from collections.abc import Mapping


def interval_text(low: float, high: float) -> str:
    """``[low, high]`` to three decimals."""
    return f"[{low:.3f}, {high:.3f}]"


def ratio_text(cell: Mapping, prefix: str = "", *, mark: str = "") -> str:
    """The ratio of a measured row or cell with its interval, e.g. ``0.930 [0.900, 0.960]``.

    ``cell`` holds ``<prefix>perplexity_ratio``, ``<prefix>ratio_low`` and ``<prefix>ratio_high`` (``prefix`` names
    the side of a comparison row, e.g. ``"hero_"``); ``mark`` (a footnote sign) follows the ratio."""
    ratio, low, high = (cell[f"{prefix}{key}"] for key in ("perplexity_ratio", "ratio_low", "ratio_high"))
    return f"{ratio:.3f}{mark} {interval_text(low, high)}"
