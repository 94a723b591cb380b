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


def say_wrote(*paths: object, took_s: float | None = None) -> int:
    """Print the line a page-writing script ends with, ``wrote a, b and c`` (``in N s`` after it when ``took_s`` is
    given), and return 0, the script's exit status, so its ``main`` can end with ``return say_wrote(...)``."""
    names = [str(p) for p in paths]
    listed = names[-1] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    print(f"wrote {listed}" + ("" if took_s is None else f" in {took_s} s"))
    return 0


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
