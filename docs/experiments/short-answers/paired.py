"""Answers kept per run, and paired comparisons, from the answer stores of `python -m hero_core eval --answers
--resume-dir DIR` runs: the suite's own scoring (hero_core.eval.answers.run.answers_kept) over the prompts every listed
run has answered, and for each pair the prompts dense answers right that only one of the two keeps, with the exact
two-sided McNemar p (a binomial test on those discordant prompts).

    python docs/experiments/short-answers/paired.py DIR --runs hero-10-r6,hero-10-r6c,hero-10-r4 \
        --pairs hero-10-r6:hero-10-r6c,hero-10-r6:hero-10-r4 --out paired.json
"""

import argparse
import json
import math
from pathlib import Path

import pandas as pd

from hero_core.eval.answers.run import REFERENCE, answers_kept, stored_answers


def mcnemar_p(only_first: int, only_second: int) -> float:
    """Exact two-sided McNemar p: twice the smaller binomial tail of the discordant pairs at 1/2, at most 1."""
    n = only_first + only_second
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(only_first, only_second) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory", type=Path, help="the --resume-dir of the answers runs")
    parser.add_argument("--runs", default=None, help="comma-separated runs to score (default: every store in DIR)")
    parser.add_argument("--pairs", default="", help="comma-separated FIRST:SECOND pairs to compare")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    records = [record for path in sorted(args.directory.glob("*.jsonl")) for _, record in stored_answers(path)]
    frame = pd.DataFrame.from_records(records)
    runs = args.runs.split(",") if args.runs else sorted(set(frame["method"]) - {REFERENCE})
    frame = frame[frame["method"].isin([REFERENCE, *runs])]
    answered = frame.groupby("method")["id"].apply(set)
    missing = sorted(set(runs) - set(answered.index))
    if missing:
        raise SystemExit(f"no stored answers for {', '.join(missing)} in {args.directory}")
    common = set.intersection(*answered)  # only prompts every run has answered: the same prompts for each
    frame = frame[frame["id"].isin(common)]
    kept = {m: answers_kept(frame, m)["overall"] for m in runs}
    for method, r in kept.items():
        print(f"{method:26s} n {r['n']:3d}  dense right {r['dense_correct']:3d}  kept {100 * r['kept']:5.1f} % "
              f"[{100 * r['kept_low']:.1f}, {100 * r['kept_high']:.1f}]  answer-token param skip "
              f"{100 * r['answer_param_skip']:.1f} %")
    correct = frame.pivot_table(index="id", columns="method", values="correct", aggfunc="first")
    right = correct[correct[REFERENCE].astype(bool)]  # the prompts dense answers right
    pairs = {}
    for pair in filter(None, args.pairs.split(",")):
        first, second = pair.split(":")
        a, b = right[first].astype(bool), right[second].astype(bool)
        only_first, only_second = int((a & ~b).sum()), int((~a & b).sum())
        pairs[pair] = {"only_first_keeps": only_first, "only_second_keeps": only_second,
                       "p": mcnemar_p(only_first, only_second)}
        print(f"{first} vs {second}: {only_first} / {only_second}, p = {pairs[pair]['p']:.3g}")
    if args.out:
        args.out.write_text(json.dumps({"prompts": len(common), "kept": kept, "pairs": pairs}, indent=1,
                                       default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
