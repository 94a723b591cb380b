"""A memory measurement in a fresh process, as both memory benches take it (``routers_memory``, ``sweep_memory``).

The parent runs ``python -m <bench> <child arguments>`` once per configuration; the child measures and prints one
line, a marker and its JSON (:func:`child_result` reads it back). The bench's command line is either that child or
the parent that runs every child, prints its summary and writes the report (:func:`bench_main`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path


def child_result(module: str, args: list[str], marker: str, env: Mapping[str, str] | None = None) -> dict:
    """Run ``python -m module *args`` to the end and return the JSON of its line that starts with ``marker``."""
    done = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, check=True, env=env)
    line = next(row for row in done.stdout.splitlines() if row.startswith(marker))
    return json.loads(line[len(marker):])


def bench_main(parser: argparse.ArgumentParser, marker: str, *, child: Callable[[argparse.Namespace], dict | None],
               run: Callable[[argparse.Namespace], dict], summary: Callable[[dict], list[str]]) -> int:
    """A memory bench's command line: ``child(args)`` when it measures one configuration (it returns None in the
    parent), else ``run(args)`` with its ``summary`` lines printed and the report written to ``--out``."""
    parser.add_argument("--out", type=Path, help="write the result as JSON here")
    args = parser.parse_args()
    measured = child(args)
    if measured is not None:
        print(marker + json.dumps(measured))
        return 0
    report = run(args)
    print("\n".join(summary(report)))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return 0
