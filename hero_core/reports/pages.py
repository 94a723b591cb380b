"""What every generated docs page is made of: Markdown table rows, the figure files beside the page, and the line
saying what was written."""

from __future__ import annotations

import argparse
from pathlib import Path


def table_row(*cells: object) -> str:
    """One row of a Markdown table: ``| a | b |``."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def save_figure(fig, out: Path, *, dpi: int) -> None:
    """Lay out a matplotlib figure and write it to ``out``, making its folder (a fresh checkout has no figures/)."""
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi)


def add_path_arguments(parser: argparse.ArgumentParser, defaults: dict[str, Path]) -> None:
    """One Path argument per entry, in order: ``--name`` an option, a bare name the optional positional input."""
    for name, default in defaults.items():
        if name.startswith("--"):
            parser.add_argument(name, type=Path, default=default)
        else:
            parser.add_argument(name, type=Path, nargs="?", default=default)


def table_head(*columns: str) -> list[str]:
    """The first two lines of a Markdown table: the column names and the ``|---|`` rule under them."""
    return [table_row(*columns), "|" + "---|" * len(columns)]
