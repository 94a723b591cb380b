"""Training logs side by side, per window of steps: mean distillation loss, realised param skip, share of gates
within 0.1 of tau, median gradient norm. Prints a markdown table:

    python docs/experiments/no-pos-second-stage/log_summary.py LOG [LOG ...] [--window 100]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def windows(path: Path, size: int) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    out = []
    for first in range(0, len(rows), size):
        chunk = rows[first:first + size]
        out.append({"steps": f"{chunk[0]['step']}–{chunk[-1]['step']}",
                    "kd": statistics.fmean(r["loss_target"] for r in chunk),
                    "skip": statistics.fmean(r["param_skip"] for r in chunk),
                    "near_tau": statistics.fmean(r["near_tau"] for r in chunk),
                    "grad": statistics.median(r["grad_norm"] for r in chunk)})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("logs", type=Path, nargs="+")
    parser.add_argument("--window", type=int, default=100)
    args = parser.parse_args()
    runs = {path.name: windows(path, args.window) for path in args.logs}
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
