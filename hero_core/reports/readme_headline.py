"""The README's headline block: one small table a newcomer reads (the default, the 25 % and 40 % budgets, each beside
its local twin at matched compute) and the sentences that carry the finer measures, every number read from the
project's result files. The full tables (every checkpoint, every measure) are in docs/bigbench.md and
docs/results.md; a row whose numbers are missing is left out here and named below the table, never shown empty.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from hero_core.eval.suites.headline import NOT_MEASURED, kept_figures, retain_figures
from hero_core.eval.twins import twin_name
from hero_core.method.checkpoint import BUNDLED_DIR, CONFIG_FILE
from hero_core.method.model import DEFAULT_CHECKPOINT

ROOT = Path(__file__).resolve().parents[2]
PAIRS = (DEFAULT_CHECKPOINT, "hero-25-r7", "hero-40-r7")  # each shown beside its local twin; the budgets at the
# default's router widths (their paper-width predecessors hero-25 / hero-40 are in docs/results.md)
DOMAINS = ("chat", "code", "reasoning")
HEADER = ("run", "what it is", "param skip % (chat / code / reasoning)",
          "perplexity ratio (chat / code / reasoning)", "Retain % [95 % CI]")  # + the examples the rows were run on
RETAIN_100 = ROOT / "docs" / "experiments" / "retain-100" / "bigbench-100.json"
RESULTS = ROOT / "docs" / "results.json"
SEEDS = ROOT / "docs" / "seeds.json"
NOISE_FLOOR = ROOT / "docs" / "experiments" / "answers-noise-floor" / "kept.json"
NOISE_FLOOR_RUN = "dense bf16 of dense fp32"  # the comparison of kept.json that skips nothing (compare.py's name)


def _load(path: Path) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def examples_per_task(figures: Iterable[Mapping[str, Any] | None]) -> str | None:
    """How many BIG-bench examples per task the Retain figures were graded on ("10 examples per task"; "up to 100
    examples per task (riddle_sense 49)" where a task holds fewer), from their ``examples`` counts; None when no
    figure records them."""
    counts: dict[str, int] = {}
    for fig in figures:
        for task, n in ((fig or {}).get("examples") or {}).items():
            counts[task] = min(n, counts.get(task, n))
    if not counts:
        return None
    most = max(counts.values())
    fewer = ", ".join(f"{task} {n}" for task, n in sorted(counts.items()) if n < most)
    return f"up to {most} examples per task ({fewer})" if fewer else f"{most} examples per task"


def stage_steps(training: Mapping[str, Mapping[str, Any] | None]) -> str | None:
    """The steps the seed runs trained for ("750 steps", or "700–750 steps" when they differ), from each run's
    training record (``steps_done``); None when a run's record is missing."""
    steps = [(record or {}).get("steps_done") for record in training.values()]
    if not steps or None in steps:
        return None
    low, high = min(steps), max(steps)
    return f"{low} steps" if low == high else f"{low}–{high} steps"


def _seed_training(seeds: Mapping[str, Any] | None) -> dict[str, dict | None]:
    """Each seed run's training record, read from its bundled hero_config.json (None where it is not bundled)."""
    runs = [r for arm in ((seeds or {}).get("summary") or {}).get("arms", {}).values() for r in arm["runs"]]
    configs = {run: _load(BUNDLED_DIR / run / CONFIG_FILE) for run in runs}
    return {run: (config or {}).get("training") for run, config in configs.items()}


def _matched_rows(measured: Mapping[str, Any], hero: str, twin: str) -> dict[str, dict] | None:
    rows = {r["domain"]: r for r in measured.get("matched", []) if r["reference"] == hero and r["other"] == twin}
    return rows if all(d in rows for d in DOMAINS) else None


def _retain_cell(fig: Mapping[str, Any] | None) -> str | None:
    if not fig or fig.get("retain") is None:
        return None
    return f"{fig['retain']:.1f} [{fig['low']:.1f}, {fig['high']:.1f}]"


def pair_rows(measured: Mapping[str, Any], retain: Mapping[str, Any], hero: str) -> list[list[str]] | None:
    """The two rows of ``hero`` and its local twin (at hero's param skip), or None when the perplexity rows are
    missing. A Retain the BIG-bench grades do not hold reads "not measured" (grading needs the task data)."""
    twin = twin_name(hero)
    rows = _matched_rows(measured, hero, twin) if twin else None
    if rows is None:
        return None
    hero_retain = _retain_cell(retain.get(hero)) or NOT_MEASURED
    twin_retain = _retain_cell(retain.get(f"{twin}@{hero}")) or NOT_MEASURED
    skips = " / ".join(f"{100 * rows[d]['param_skip']:.1f}" for d in DOMAINS)
    label = "default: HeRo, with history" if hero == DEFAULT_CHECKPOINT else "HeRo, with history"
    return [[f"**{hero}**", f"{label}, trained to {hero.split('-')[1]} % param skip", skips,
             " / ".join(f"{rows[d]['reference_perplexity_ratio']:.3f}" for d in DOMAINS), hero_retain],
            [twin, "its local twin (no history) at the same param skip", skips,
             " / ".join(f"{rows[d]['other_perplexity_ratio']:.3f}" for d in DOMAINS), twin_retain]]


def _retain_100_sentence(report: Mapping[str, Any] | None) -> str | None:
    if report is None:
        return None
    figs = report.get("retain") or {}
    hero, twin = figs.get(DEFAULT_CHECKPOINT), figs.get(f"{twin_name(DEFAULT_CHECKPOINT)}@{DEFAULT_CHECKPOINT}")
    if not hero or not twin:
        return None
    diff = hero.get("vs_twin") or {}
    gap = (f" (HeRo − twin {diff['difference']:+.1f} points [{diff['low']:+.1f}, {diff['high']:+.1f}])"
           if {"difference", "low", "high"} <= set(diff) else "")
    examples = examples_per_task([hero, twin])
    title = f"Retain at {examples}" if examples else "Retain on the larger sample"
    return (f"**{title}** (the yardstick; one training seed each): the default "
            f"{_retain_cell(hero)} %, its local twin {_retain_cell(twin)} %{gap} "
            "([retain-100](docs/experiments/retain-100/README.md)).")


def _kept_cell(fig: Mapping[str, Any]) -> str:
    return f"{100 * fig['kept']:.1f} % [{100 * fig['kept_low']:.1f}, {100 * fig['kept_high']:.1f}]"


def _answers_sentence(answers: Mapping[str, Any] | None, noise_floor: Mapping[str, Any] | None = None) -> str | None:
    kept = kept_figures(answers)
    hero, twin = kept.get(DEFAULT_CHECKPOINT), kept.get(f"{twin_name(DEFAULT_CHECKPOINT)}@{DEFAULT_CHECKPOINT}")
    if not hero or not twin or hero.get("kept") is None or twin.get("kept") is None:
        return None
    of = f" (of the {hero['dense_correct']} answers-suite prompts dense gets right)"
    floor = ((noise_floor or {}).get("kept") or {}).get(NOISE_FLOOR_RUN)
    floor_words = (f" This measure has a floor here: dense in bf16 keeps {_kept_cell(floor)} of the "
                   f"{floor['dense_correct']} answers dense fp32 gets right "
                   "([answers-noise-floor](docs/experiments/answers-noise-floor/README.md))." if floor else "")
    return (f"**Answers kept**{of}: the default {_kept_cell(hero)}, its twin {_kept_cell(twin)} (one training seed "
            f"each).{floor_words}")


def baselines_sentence(results: Mapping[str, Any] | None) -> str | None:
    """The default against the baselines at its own param skip, per domain, from docs/results.json's frontier."""
    from hero_core.eval.frontier.curves import at_skip
    from hero_core.words.reference_labels import REFERENCE_LABELS

    curves = ((results or {}).get("frontier") or {}).get("curves", {})
    default = curves.get(DEFAULT_CHECKPOINT)
    own = next((p for p in (default or {}).get("points", []) if abs(p["knob"] - default.get("tau", -1)) < 1e-9), None)
    if own is None or "static" not in curves:
        return None
    parts = []
    for name, label in REFERENCE_LABELS.items():
        if name not in curves:
            continue
        cells = [at_skip(curves[name], d, own[d]["param_skip"]) for d in DOMAINS]
        if all(cells):
            ratios = " / ".join(format(c["perplexity_ratio"], ".3f") for c in cells)
            parts.append(f"{label} {ratios}")
    mine = " / ".join(f"{own[d]['perplexity_ratio']:.3f}" for d in DOMAINS)
    skips = " / ".join(f"{100 * own[d]['param_skip']:.1f}" for d in DOMAINS)
    adapters = curves["static"].get("adapters_of")
    return (f"**Against the baselines** at the default's own param skip ({skips} % on chat / code / reasoning), "
            f"perplexity ratio: the default {mine}; " + "; ".join(parts)
            + (f" (each reference on {adapters}'s adapters)" if adapters else "")
            + " ([docs/results.md](docs/results.md); the app's Learn page draws them).")


def headline_block(measured: Mapping[str, Any] | None, bigbench: Mapping[str, Any] | None,
                   answers: Mapping[str, Any] | None, retain_100: Mapping[str, Any] | None = None,
                   seeds: Mapping[str, Any] | None = None, results: Mapping[str, Any] | None = None,
                   noise_floor: Mapping[str, Any] | None = None,
                   seed_training: Mapping[str, Mapping[str, Any] | None] | None = None) -> list[str]:
    """The markdown lines between the README's ``headline`` markers. ``seed_training`` holds each seed run's
    training record (default: read from the bundled checkpoints the seed report names)."""
    retain = retain_figures(bigbench)
    rows, left_out, shown = [], [], []
    for hero in PAIRS:
        pair = pair_rows(measured or {}, retain, hero)
        if pair is None:
            left_out.append(hero)
        else:
            rows += pair
            shown += [retain.get(hero), retain.get(f"{twin_name(hero)}@{hero}")]
    examples = examples_per_task(shown)
    header = (*HEADER[:-1], f"{HEADER[-1]}, {examples}" if examples else HEADER[-1])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    notes = ["Perplexity ratio: routed / dense on held-out text (1 = unchanged; below 1 on chat is the sharpened-"
             "target artefact explained in docs/results.md). Each twin is read at its checkpoint's param skip. "
             "All checkpoints and measures: [docs/results.md](docs/results.md), [docs/bigbench.md](docs/bigbench.md)."]
    if left_out:
        notes.append(f"Not in the table (a result file lacks their numbers): {', '.join(left_out)}.")
    if any(NOT_MEASURED in cell for row in rows for cell in row):
        notes.append(f"Retain \"{NOT_MEASURED}\": the stored BIG-bench grades hold no run of that checkpoint, and "
                     "grading one needs the task data on the machine (`python -m hero_core eval --fetch-bigbench`, "
                     "then `make results-headline`).")
    if seeds is not None:
        from hero_core.eval.study.bundled import answer_sentence

        steps = stage_steps(_seed_training(seeds) if seed_training is None else seed_training)
        stage = f"The seeds are the first training stage{f' ({steps})' if steps else ''} of each arm."
        retain = ("" if "retain" in seeds["summary"]["measures"] else
                  " Retain across seeds is not measured yet: " + seeds.get("retain_missing", ""))
        notes.append(f"{answer_sentence(seeds)} {stage}{retain} Every seed: [docs/seeds.md](docs/seeds.md).")
    for sentence in (baselines_sentence(results), _retain_100_sentence(retain_100),
                     _answers_sentence(answers, noise_floor)):
        if sentence:
            notes.append(sentence)
    return lines + [line for note in notes for line in ("", note)]


def write_readme_headline(readme: Path, measured_path: Path, bigbench: dict | None, answers: dict | None) -> bool:
    """Refresh the README's headline block; whether it changed."""
    from hero_core.reports.readme_block import refresh_block

    return refresh_block(readme, "headline", headline_block(_load(measured_path), bigbench, answers,
                                                            _load(RETAIN_100), _load(SEEDS), _load(RESULTS),
                                                            _load(NOISE_FLOOR)))
