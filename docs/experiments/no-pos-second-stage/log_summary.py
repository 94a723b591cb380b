"""Training logs side by side, per window of steps: mean distillation loss, realised param skip, share of gates
within 0.1 of tau, median gradient norm. Prints a markdown table:

    python docs/experiments/no-pos-second-stage/log_summary.py LOG [LOG ...] [--window 100] [--diverged-above KD]

With ``--diverged-above``, also the first step of each log at which the mean distillation loss of the previous
10 steps exceeds KD.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def windows(rows: list[dict], size: int) -> list[dict]:
    out = []
    for first in range(0, len(rows), size):
        chunk = rows[first:first + size]
        out.append({"steps": f"{chunk[0]['step']}–{chunk[-1]['step']}",
                    "kd": statistics.fmean(r["loss_target"] for r in chunk),
                    "skip": statistics.fmean(r["param_skip"] for r in chunk),
                    "near_tau": statistics.fmean(r["near_tau"] for r in chunk),
                    "grad": statistics.median(r["grad_norm"] for r in chunk)})
    return out


def first_step_above(rows: list[dict], threshold: float, span: int = 10) -> int | None:
    kd = [r["loss_target"] for r in rows]
    return next((rows[i - 1]["step"] for i in range(span, len(rows) + 1)
                 if statistics.fmean(kd[i - span:i]) > threshold), None)


def label(path: Path) -> str:
    """A checkpoint's log is its directory's train_log.jsonl: name it by the directory, so two stay apart."""
    return path.parent.name if path.name == "train_log.jsonl" else path.name.removesuffix(".jsonl")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("logs", type=Path, nargs="+")
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--diverged-above", type=float, help="distillation loss that counts as diverged")
    args = parser.parse_args()
    logs = {label(path): read_log(path) for path in args.logs}
    if len(logs) < len(args.logs):
        parser.error("two logs share a name: pass logs from different directories")
    runs = {name: windows(rows, args.window) for name, rows in logs.items()}
    header = " | ".join(f"{name}: kd | skip % | near tau | grad" for name in runs)
    print(f"| steps | {header} |")
    print("|---" * (1 + 4 * len(runs)) + "|")
    for i in range(max(len(w) for w in runs.values())):
        cells = []
        steps = ""
        for w in runs.values():
            if i < len(w):
                steps = steps or w[i]["steps"]
                row = w[i]
                cells.append(f"{row['kd']:.2f} | {100 * row['skip']:.1f} | {row['near_tau']:.2f} | {row['grad']:.2f}")
            else:
                cells.append("– | – | – | –")
        print(f"| {steps} | {' | '.join(cells)} |")
    if args.diverged_above is not None:
        print(f"\nfirst step with a 10-step mean distillation loss above {args.diverged_above:g}:")
        for name, rows in logs.items():
            print(f"  {name}: {first_step_above(rows, args.diverged_above) or 'never'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
