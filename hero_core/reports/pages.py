"""What every generated docs page is made of: Markdown table rows, and the figure files beside the page."""

from __future__ import annotations

from pathlib import Path


def table_row(*cells: object) -> str:
    """One row of a Markdown table: ``| a | b |``."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def save_figure(fig, out: Path, *, dpi: int) -> None:
    """Lay out a matplotlib figure and write it to ``out``, making its folder (a fresh checkout has no figures/)."""
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi)
