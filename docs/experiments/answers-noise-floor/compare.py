"""How many of dense's right answers survive a change that is not routing at all: the same backbone in bf16
instead of fp32. Scores, with the suite's own rule (hero_core.eval.answers.run.answers_kept), the answers of two
`eval --answers` reports, one per precision, each holding dense and the default checkpoint:

    python docs/experiments/answers-noise-floor/compare.py docs/answers.json \
        docs/experiments/answers-noise-floor/bf16.json --out docs/experiments/answers-noise-floor/kept.json
"""

import argparse
import json
from pathlib import Path

import pandas as pd

from hero_core.eval.answers.run import answers_kept

# (run, reference): what each line of the table keeps of what
COMPARISONS = [("dense bf16", "dense fp32"), ("hero-10-r4 fp32", "dense fp32"), ("hero-10-r4 bf16", "dense bf16"),
               ("hero-10-r4 bf16", "dense fp32")]


def items(report: Path, precision: str) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(json.loads(report.read_text(encoding="utf-8"))["items"])
    frame = frame[frame["method"].isin(["dense", "hero-10-r4"])].copy()
    frame["method"] = frame["method"] + f" {precision}"
    return frame


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fp32_report", type=Path)
    parser.add_argument("bf16_report", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    frame = pd.concat([items(args.fp32_report, "fp32"), items(args.bf16_report, "bf16")], ignore_index=True)
    texts = frame.pivot_table(index="id", columns="method", values="text", aggfunc="first")
    result = {"same_text": {"dense": int((texts["dense bf16"] == texts["dense fp32"]).sum()),
                            "hero-10-r4": int((texts["hero-10-r4 bf16"] == texts["hero-10-r4 fp32"]).sum()),
                            "prompts": len(texts)},
              "kept": {}}
    print(f"answers word for word the same in both precisions: dense {result['same_text']['dense']} / {len(texts)}, "
          f"hero-10-r4 {result['same_text']['hero-10-r4']} / {len(texts)}")
    for run, reference in COMPARISONS:
        r = answers_kept(frame, run, reference=reference)["overall"]
        result["kept"][f"{run} of {reference}"] = r
        print(f"{run:16s} keeps {100 * r['kept']:5.1f} % [{100 * r['kept_low']:.1f}, {100 * r['kept_high']:.1f}] "
              f"of the {r['dense_correct']} answers {reference} gets right; gains {r['gained']}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
