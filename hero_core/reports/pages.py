"""What every generated docs page is made of: Markdown tables (with a group of columns per run where runs sit side
by side), the figure files beside the page, and the line saying what was written."""

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


def markdown_table(header: list[str], rows: list[list[object]]) -> list[str]:
    """A whole Markdown table and the blank line after it."""
    return table_head(*header) + [table_row(*row) for row in rows] + [""]


Label = tuple[str, ...]
Rows = list[tuple[Label, list[str]]]  # one group's rows: (label cells, value cells)


def grouped_table(label_header: list[str], per_group: dict[str, Rows],
                  cell_header: list[str] | dict[str, list[str]]) -> list[str]:
    """One table with a group of columns per named group (``cell_header``, or one list per group; e.g. one group per
    precision): rows are matched by their label, in order of first appearance; a row a group lacks shows dashes."""
    names = list(per_group)
    headers = cell_header if isinstance(cell_header, dict) else {name: cell_header for name in names}
    order: list[Label] = []
    cells: dict[Label, dict[str, list[str]]] = {}
    for name, rows in per_group.items():
        for label, values in rows:
            if label not in cells:
                order.append(label)
                cells[label] = {}
            cells[label][name] = values
    header = label_header + [f"{name} {h}".strip() for name in names for h in headers[name]]
    return markdown_table(header, [[*label, *(c for name in names
                                              for c in cells[label].get(name, ["—"] * len(headers[name])))]
                                   for label in order])
