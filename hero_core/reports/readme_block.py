"""Replace a generated block of README.md between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->``.

The README's tables of results and speed are written by the scripts that measure them (results_report.py,
bench_report.py), never by hand; a README without the markers is left as it is.
"""

from __future__ import annotations

from pathlib import Path


def replace_block(readme: Path, name: str, lines: list[str]) -> bool:
    """Put ``lines`` between the ``name`` markers of ``readme``; returns whether the README changed."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = readme.read_text()
    if start not in text or end not in text:
        return False
    head, rest = text.split(start, 1)
    new = head + "\n".join([start, "", *lines, "", end]) + rest.split(end, 1)[1]
    readme.write_text(new)
    return new != text


def refresh_block(readme: Path, name: str, lines: list[str]) -> bool:
    """:func:`replace_block`, then one line on stdout saying whether the README changed (the scripts' log)."""
    changed = replace_block(readme, name, lines)
    print(f"{readme}: {name} block {'updated' if changed else 'unchanged (or no markers)'}")
    return changed
