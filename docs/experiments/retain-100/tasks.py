"""Per-task accuracy of each run in a `scripts/make_results.py` report, and a paired count over every example:
how many examples only the first of two runs gets right and how many only the second, with the exact two-sided
McNemar p (a binomial test on those discordant examples).

    python docs/experiments/retain-100/tasks.py docs/experiments/retain-100/bigbench-100.json \
        --pair hero-10-r4:local-10@hero-10-r4
"""

import argparse
import json
import math
from pathlib import Path


def mcnemar_p(only_first: int, only_second: int) -> float:
    n = only_first + only_second
    tail = sum(math.comb(n, k) for k in range(min(only_first, only_second) + 1)) / 2 ** n if n else 0.5
    return min(1.0, 2 * tail)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("report", type=Path)
    parser.add_argument("--pair", action="append", default=[], help="FIRST:SECOND, e.g. hero-10-r4:dense")
    args = parser.parse_args()
    results = json.loads(args.report.read_text(encoding="utf-8"))["results"]
    runs = list(results)
    tasks = results[runs[0]]["main"]["tasks"]
    print(f"{'task':36s}" + "".join(f"{run:>22s}" for run in runs))
    for task, info in tasks.items():
        accuracies = "".join(f"{100 * results[run]['main']['tasks'][task]['accuracy']:21.1f}%" for run in runs)
        print(f"{task:36s}{accuracies}   (n {info['n']}, chance {100 * info['chance']:.1f} %)")
    for pair in args.pair:
        first, second = pair.split(":")
        only_first = only_second = 0
        for task in tasks:
            a = results[first]["main"]["tasks"][task]["grades"]
            b = results[second]["main"]["tasks"][task]["grades"]
            only_first += sum(x > y for x, y in zip(a, b))
            only_second += sum(y > x for x, y in zip(a, b))
        print(f"{first} vs {second}: right only for the first {only_first}, only for the second {only_second}, "
              f"McNemar p = {mcnemar_p(only_first, only_second):.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
