"""The README's headline table: Retain and answers kept beside param skip, one row per checkpoint, with each
checkpoint's local twin at matched param skip.

Inputs are the two result files ``make results`` writes: ``docs/bigbench.json`` (``scripts/make_results.py``:
BIG-bench main suite + HumanEval, with per-example scores; Retain from :mod:`hero_core.eval.suites.retain`) and
``docs/answers.json`` (``python -m hero_core eval --answers --twins``: answers kept from
:func:`hero_core.eval.answers.run.answers_report`). Either may be missing, and so may a checkpoint in either: its
cells then say "not measured", never an empty row or a dropped one. ``scripts/results_report.py`` writes the
lines between the README's ``headline`` markers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hero_core.eval.suites.retain import REFERENCE, retain_summary
from hero_core.eval.twins import ALWAYS_SHOWN, headline_checkpoints, headline_order, is_headline, parse_name, twin_name

NOT_MEASURED = "not measured"
HEADER = ["checkpoint", "param skip % (tasks)", "Retain % [95 % CI]", "param skip % (answers)",
          "answers kept % [95 % CI]", "local twin at equal param skip", "twin Retain % [95 % CI]",
          "Retain − twin, points [95 % CI]", "twin answers kept % [95 % CI]"]


def load_json(path: Path) -> dict[str, Any] | None:
    """A result file, or None when it does not exist (a file that exists but is not JSON raises)."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


# == figures out of the two files ===============================================================
def retain_figures(bigbench: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Per method: Retain with intervals, param skip on the task tokens, the paired difference from its twin
    (stored by make_results under ``retain``; recomputed from the per-example scores when absent). Empty for a
    missing file or one written before per-example scores were kept (no interval can be drawn from it)."""
    if bigbench is None:
        return {}
    if bigbench.get("retain"):
        return bigbench["retain"]
    try:
        return retain_summary(bigbench)
    except ValueError:
        return {}


def kept_figures(answers: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Per method: the overall answers kept of an answers report."""
    return {m: k["overall"] for m, k in (answers or {}).get("kept", {}).items()}


def matched_twins(bigbench: Mapping[str, Any] | None, answers: Mapping[str, Any] | None) -> dict[str, dict]:
    """The matched twins recorded by either run (BIG-bench's first: both use the same calibration blocks)."""
    return {**((answers or {}).get("config", {}).get("matched") or {}), **((bigbench or {}).get("matched") or {})}


def headline_names(expected: Sequence[str], bigbench: Mapping[str, Any] | None,
                   answers: Mapping[str, Any] | None) -> list[str]:
    """Rows: the expected checkpoints and every headline checkpoint either file measured, in table order."""
    measured = list((bigbench or {}).get("checkpoints", {})) + list((answers or {}).get("config", {})
                                                                    .get("checkpoints", []))
    return sorted({*expected, *(n for n in measured if is_headline(n))}, key=headline_order)


# == cells ======================================================================================
def _num(value: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "–" if value is None else f"{scale * value:.{digits}f}"


def _figure_cell(fig: Mapping[str, Any] | None, key: str, undefined: Callable[[Mapping[str, Any]], str],
                 shown: Callable[[Mapping[str, Any]], str]) -> str:
    """A figure's cell: "not measured" without its record, ``undefined(record)`` where the record holds no value
    under ``key`` (the figure has no meaning there), else ``shown(record)``."""
    if fig is None:
        return NOT_MEASURED
    return undefined(fig) if fig.get(key) is None else shown(fig)


def retain_cell(fig: Mapping[str, Any] | None) -> str:
    return _figure_cell(fig, "retain", lambda f: "undefined (dense scores 0 on every task)",
                        lambda f: f"{f['retain']:.1f} [{_num(f.get('low'))}, {_num(f.get('high'))}]")


def kept_cell(fig: Mapping[str, Any] | None) -> str:
    return _figure_cell(fig, "kept", lambda f: f"undefined (dense right on none of {f['n']})",
                        lambda f: f"{100 * f['kept']:.1f} [{_num(f['kept_low'], 100)}, {_num(f['kept_high'], 100)}] "
                                  f"(of {f['dense_correct']})")


def difference_cell(diff: Mapping[str, Any] | None) -> str:
    return _figure_cell(diff, "difference", lambda d: "undefined",
                        lambda d: f"{d['difference']:+.1f} [{d['low']:+.1f}, {d['high']:+.1f}]")


def twin_cell(name: str, match: Mapping[str, Any] | None, retain: Mapping, kept: Mapping) -> str:
    """Which twin, at which tau, and its param skip on the tasks and the answers (the match is made on
    calibration text, so these show how close it landed on the evaluated tokens)."""
    if match is None:
        return NOT_MEASURED
    method = match["method"]
    on_tasks = (retain.get(method) or {}).get("param_skip")
    on_answers = (kept.get(method) or {}).get("answer_param_skip")
    tasks = f"{_num(on_tasks, 100)} %" if method in retain else NOT_MEASURED
    answers = f"{_num(on_answers, 100)} %" if method in kept else NOT_MEASURED
    return (f"{match['twin']} at tau {match['tau']:.3f} (calibration skip {100 * match['realised_skip']:.1f} % "
            f"vs {100 * match['target_skip']:.1f} %); skip on tasks {tasks}, on answers {answers}")


def headline_row(name: str, retain: Mapping, kept: Mapping, matched: Mapping, available: set[str]) -> list[str]:
    """One checkpoint's cells; a figure missing from ``retain`` / ``kept`` (its file or its run is missing)
    reads "not measured"."""
    own_retain, own_kept = retain.get(name), kept.get(name)
    cells = [name,
             _num(own_retain["param_skip"], 100) if own_retain else NOT_MEASURED, retain_cell(own_retain),
             _num(own_kept["answer_param_skip"], 100) if own_kept else NOT_MEASURED, kept_cell(own_kept)]
    twin = twin_name(name)
    if twin is None:
        return cells + ["— (the twin itself)"] + ["—"] * 3
    if twin not in available and name not in matched:
        return cells + [f"no {twin} bundled"] + ["—"] * 3
    match = matched.get(name)
    method = (match or {}).get("method")
    diff = (own_retain or {}).get("vs_twin")
    return cells + [twin_cell(name, match, retain, kept), retain_cell(retain.get(method)),
                    difference_cell(diff), kept_cell(kept.get(method))]


# == the block ==================================================================================
def reference_line(bigbench: Mapping[str, Any] | None, answers: Mapping[str, Any] | None,
                   retain: Mapping[str, Any]) -> str:
    """What dense scored (the reference every ratio divides by) and which tasks entered Retain."""
    parts = []
    if bigbench is not None:
        cfg, dense = bigbench["config"], bigbench["results"].get(REFERENCE, {})
        main = dense.get("main", {})
        parts.append(f"BIG-bench main suite, {cfg.get('limit')} examples per task: dense mean accuracy "
                     f"{_num(main.get('mean_accuracy'), 100)} % over {len(main.get('tasks', {}))} tasks")
        code = dense.get("humaneval")
        if code is not None:
            parts.append(f"HumanEval (first {code['n']} problems, greedy): dense passes {code['passed']}"
                         + (", so it is left out of Retain (its ratio is undefined)" if not code["passed"] else ""))
        left_out = sorted({t for fig in retain.values() for t in fig.get("left_out", [])} - {"humaneval"})
        if left_out:
            parts.append(f"left out of Retain because dense scores 0 there: {', '.join(left_out)}")
    if answers is not None:
        first = next(iter(kept_figures(answers).values()), None)
        if first is not None:
            parts.append(f"answers suite: dense right on {first['dense_correct']} of {first['n']} prompts")
    return ("Reference (dense): " + "; ".join(parts) + ".") if parts else ""


def reference_runs(answers: Mapping[str, Any] | None, kept: Mapping[str, Any]) -> list[str]:
    """A line per reference policy the answers suite ran (random skip: not a router, the floor a router must
    beat at the same compute; the oracle: not deployable, a block-local reference at the same skip)."""
    lines = []
    for name, ref in ((answers or {}).get("config", {}).get("references") or {}).items():
        fig = kept.get(name)
        if fig is None:
            continue
        if "threshold" in ref:
            how = (f"is the oracle (not deployable: it runs both branches and skips where the adapter's relative "
                   f"error is below {ref['threshold']:.3g}, a threshold matched to {ref['checkpoint']}'s calibration "
                   f"param skip, {_num(ref['param_skip'], 100)} %)")
        else:
            how = (f"skips each routed FFN at random with probability {_num(ref['skip_probability'], 100)} % "
                   f"({ref['checkpoint']}'s calibration param skip, {_num(ref['param_skip'], 100)} %)")
        lines.append(f"Reference, not a router: `{name}` {how} and keeps {kept_cell(fig)} of dense's correct "
                     f"answers, at {_num(fig['answer_param_skip'], 100)} % param skip on the answer tokens.")
    return lines


def headline_lines(bigbench: Mapping[str, Any] | None, answers: Mapping[str, Any] | None,
                   expected: Sequence[str] | None = None, *, sources: Sequence[str] = ("docs/bigbench.json",
                                                                                      "docs/answers.json"),
                   available: Sequence[str] | None = None) -> list[str]:
    """The markdown block: a line on the reference, the table, and a line per missing file.

    ``expected``: the rows to show even if unmeasured (default: the bundled finished headline checkpoints, not
    their earlier stages, and :data:`~hero_core.eval.twins.ALWAYS_SHOWN`); ``available``: the bundled checkpoints
    (default: as found). A measured earlier stage still gets its row."""
    if expected is None or available is None:
        from hero_core.method.checkpoint import bundled_names

        bundled = bundled_names()
        finished = [n for n in headline_checkpoints(bundled) if not parse_name(n).stage]
        expected = [*finished, *ALWAYS_SHOWN] if expected is None else expected
        available = bundled if available is None else available
    retain, kept = retain_figures(bigbench), kept_figures(answers)
    matched = matched_twins(bigbench, answers)
    measured = {"bigbench": bigbench is not None, "answers": answers is not None}
    names = headline_names(expected, bigbench, answers)
    rows = [headline_row(n, retain, kept, matched, set(available)) for n in names]
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    notes = [f"{src}: not found, so its columns read \"{NOT_MEASURED}\" (`make results` writes it)."
             for src, present in zip(sources, measured.values(), strict=True) if not present]
    unbundled = [n for n in names if n not in available]
    if unbundled:
        notes.append(f"Not bundled (yet): {', '.join(unbundled)}; `make checkpoints` trains them.")
    if bigbench is not None and not retain:
        notes.append(f"{sources[0]} holds no per-example scores (written before they were kept), so Retain reads "
                     f"\"{NOT_MEASURED}\": rerun `make results`.")
    notes = reference_runs(answers, kept) + notes
    ref = reference_line(bigbench, answers, retain)
    spaced = [line for note in notes for line in ("", note)]  # a paragraph each: markdown joins adjacent lines
    return ([ref, ""] if ref else []) + lines + spaced
