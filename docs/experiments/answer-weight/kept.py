"""Answers kept per run from the answer stores of one `python -m hero_core eval --answers --resume-dir DIR` run:
the suite's own scoring (hero_core.eval.answers.answers_kept) over the prompts every listed run has answered.

    python docs/experiments/answer-weight/kept.py DIR [--runs NAME,NAME] [--out kept.json]
"""

import argparse
import json
from pathlib import Path

import pandas as pd

from hero_core.eval.answers import REFERENCE, answers_kept, stored_answers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, help="the --resume-dir of an answers run")
    parser.add_argument("--runs", default=None, help="comma-separated runs to score (default: every store in DIR)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    records = [record for path in sorted(args.directory.glob("*.jsonl")) for _, record in stored_answers(path)]
    frame = pd.DataFrame.from_records(records)
    if args.runs:
        frame = frame[frame["method"].isin([REFERENCE, *args.runs.split(",")])]
    answered = frame.groupby("method")["id"].apply(set)
    common = set.intersection(*answered)  # only prompts every run has answered: the same prompts for each
    frame = frame[frame["id"].isin(common)]
    kept = {m: answers_kept(frame, m)["overall"] for m in sorted(answered.index) if m != REFERENCE}
    for method, r in kept.items():
        print(f"{method:26s} n {r['n']:3d}  dense right {r['dense_correct']:3d}  kept {100 * r['kept']:5.1f} % "
              f"[{100 * r['kept_low']:.1f}, {100 * r['kept_high']:.1f}]  answer-token param skip "
              f"{100 * r['answer_param_skip']:.1f} %")
    if args.out:
        args.out.write_text(json.dumps({"prompts": len(common), "kept": kept}, indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
