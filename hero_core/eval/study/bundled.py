"""The bundled study: the memory question over training seeds on the embedded model, one instance of
``python -m hero_core study`` (``make study``).

Its runs are the bundled checkpoints, already trained: HeRo's first stage with recipe 2's memory, its local twin
and its twin without the memory read (hero_core.method.checkpoint_info.SEED_ARMS), seed 0 the bundled run and seeds 1
and 2 under checkpoints/seeds/. The spec maps each arm x seed to its folder, so the study takes them as finished and
never trains them; their measurements are stored in docs/seeds/. The report is published as docs/seeds.md and
docs/seeds.json (the README's answer reads it) and summarised for the app in checkpoints/seeds.json.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from hero_core.eval.study.report import interval, render_markdown
from hero_core.eval.study.spec import StudySpec
from hero_core.method.checkpoint_info import SEED_ARMS, seed_runs

ROOT = Path(__file__).resolve().parents[3]
STORE = ROOT / "docs" / "seeds"  # one JSON per measured run, committed: the study's measurements and report
PUBLISHED = ROOT / "docs" / "seeds.json"  # the report the README's answer is drawn from (scripts/results_report.py)
SHIPPED = ROOT / "hero_core" / "checkpoints" / "seeds.json"  # the answer the app quotes (docs/ is not shipped)
# "local" is the bundled checkpoints' name for the no_history arm (local-10-s1 ...), the name the pages and the
# twins' caveats (hero_core.eval.twins) read the across-seed summary by; these runs are never trained here.
ARMS = ("hero", "local", "no_memread")
RETAIN_MISSING = ("no BIG-bench grades are stored for every run (the task data must be on the machine that measures "
                  "them: `python -m hero_core eval --fetch-bigbench`).")


def bundled_spec(out: Path = STORE, **settings) -> StudySpec:
    """The bundled study: every arm x seed mapped to its bundled run (seed N of an arm is its N-th seed run)."""
    existing = {}
    for arm, base in zip(ARMS, SEED_ARMS, strict=True):
        for seed, name in enumerate(seed_runs(base)):
            existing[f"{arm}/{seed}"] = name if seed == 0 else f"seeds/{name}"
    return StudySpec(out=str(out), arms=ARMS, seeds=len(seed_runs(SEED_ARMS[0])), skip=0.10, steps=750,
                     existing=existing, measures_dir=str(STORE), title="Does history help? Across training seeds",
                     **settings)


def answer_sentence(report: dict) -> str:
    """The answer to "does history help on this backbone?" that the README and the app quote."""
    s = report["summary"]
    row = s["differences"].get("hero - local")
    if row is None:
        return "No local-twin seeds are measured here: the question is not answered."
    n_hero, n_local = len(s["arms"]["hero"]["runs"]), len(s["arms"]["local"]["runs"])
    ppl = [m for m in s["measures"] if m.startswith("ppl:")]
    better = [m.split(":")[1] for m in ppl if row[m]["verdict"] == "first ahead"]
    worse = [m.split(":")[1] for m in ppl if row[m]["verdict"] == "second ahead"]
    if not better and not worse:
        on_ppl = "held-out perplexity does not separate them on any domain"
    else:
        on_ppl = "; ".join(x for x in (f"HeRo has the lower perplexity on {', '.join(better)}" if better else "",
                                       f"the local router on {', '.join(worse)}" if worse else "") if x)
    over = "seeds and texts, paired" if min(n_hero, n_local) > 1 else "texts only where an arm has one seed"
    sentence = (f"**Does history help on this backbone?** Over training seeds (HeRo {n_hero}, local {n_local}) at "
                f"{report['target_skip']:.0%} param skip, {on_ppl} (HeRo − local perplexity ratio, 95 % interval over "
                f"{over}: {_per_domain(row, ppl)}).")
    read = s["differences"].get("hero - no_memread")
    if read is not None:
        n = len(s["arms"]["no_memread"]["runs"])
        apart = [m.split(":")[1] for m in ppl if read[m]["verdict"] != "not separable"]
        said = f"separates them on {', '.join(apart)}" if apart else "does not separate them on any domain either"
        sentence += (f" Against its twin without the memory read ({n} seed{'s' if n > 1 else ''}), perplexity "
                     f"{said} (HeRo − no-read: {_per_domain(read, ppl)}).")
    return sentence


def _per_domain(row: dict, ppl: list[str]) -> str:
    return ", ".join(f"{m.split(':')[1]} {interval(m, row[m])}" for m in ppl)


def publish(report: dict) -> list[Path]:
    """docs/seeds.json and docs/seeds.md from the bundled study's report, and the app's summary."""
    from hero_core.files import atomic_write_text

    report = report | {"answer": answer_sentence(report), "retain_missing": RETAIN_MISSING}
    # the per-text numbers stay in docs/seeds/ (each run's file and study.json): this one is what pages quote
    quoted = {k: v for k, v in report.items() if k not in ("measurements", "dense_grades")}
    atomic_write_text(PUBLISHED, json.dumps(quoted, indent=1, sort_keys=True) + "\n")
    # the figures live in the study folder; the page is published beside it
    folder = os.path.relpath(STORE, PUBLISHED.parent) + "/"
    atomic_write_text(PUBLISHED.with_suffix(".md"), render_markdown(report, folder=folder))
    atomic_write_text(SHIPPED, json.dumps(shipped_summary(report), indent=1, sort_keys=True) + "\n")
    return [PUBLISHED, PUBLISHED.with_suffix(".md"), SHIPPED]


def shipped_summary(report: dict) -> dict:
    """What the app quotes: the answer, each arm's seeds and spread, the arm differences with their intervals."""
    s = report["summary"]
    return {"format_version": 2, "date": report["date"], "target_skip": report["target_skip"],
            "answer": answer_sentence(report), "measures": s["measures"],
            "arms": {arm: {"runs": row["runs"], **{m: {k: row[m][k] for k in ("mean", "sd", "per_seed")}
                                                   for m in s["measures"]}} for arm, row in s["arms"].items()},
            "differences": s["differences"], "source": "docs/seeds.json (python -m hero_core study --bundled)"}


def load_shipped(path: Path = SHIPPED) -> dict | None:
    """The shipped across-seed summary, or None when none was written (or it cannot be read)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
