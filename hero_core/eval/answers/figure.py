"""The "answers kept vs param skip" figure: one point per routed run of an answers report, with its 95 % interval.

Answers kept is the share of the prompts dense answers correctly that a run also answers correctly
(:func:`hero_core.eval.answers.run.answers_kept`); the x axis is param skip on the **answer tokens** (what the run saved
while writing its answer, the system prompt aside). A trained router and its local twin at matched compute
(``local-10@hero-10``) share a colour family, so a reader compares points at equal x. The dashed line at 100 % is
dense itself. The reference policies of :mod:`hero_core.eval.answers.references` (``random@<checkpoint>``, a grey
cross; ``oracle@<checkpoint>``, a black diamond: not deployable, it runs both branches at every block) are drawn when
the report holds them, and the caption names each one as not run when it does not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hero_core.words.reference_labels import DENSE_LABEL, reference_run_label

ORACLE_NOTE = "Oracle reference: not run on the answers suite (docs/results.md has it on held-out text)"
RANDOM_NOTE = "Random-skip reference: not run on the answers suite"


@dataclass(frozen=True)
class _ReferenceKind:
    style: dict[str, Any]  # errorbar style
    not_run: str  # the caption's note when the report holds no such run


REFERENCES = {  # by name prefix, in the caption's order
    "oracle@": _ReferenceKind({"fmt": "D", "color": "black", "mfc": "none", "mew": 1.5}, ORACLE_NOTE),
    "random@": _ReferenceKind({"fmt": "x", "color": "grey", "mew": 2}, RANDOM_NOTE),
}


def _reference_kind(method: str) -> _ReferenceKind | None:
    return next((kind for prefix, kind in REFERENCES.items() if method.startswith(prefix)), None)


def is_reference(method: str) -> bool:
    return _reference_kind(method) is not None


def kept_points(answers: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One point per run with a defined answers kept: method, x (answer param skip %), y and its interval (%)."""
    points = []
    for method, report in (answers.get("kept") or {}).items():
        overall = report["overall"]
        if overall.get("kept") is None or overall.get("answer_param_skip") is None:
            continue  # dense answered none of the prompts this run saw: nothing to keep
        points.append({"method": method, "x": 100 * overall["answer_param_skip"], "y": 100 * overall["kept"],
                       "low": 100 * overall["kept_low"], "high": 100 * overall["kept_high"],
                       "n": overall["dense_correct"]})
    return points


def plot_answers_kept(answers: Mapping[str, Any], out: Path) -> bool:
    """Draw the figure into ``out`` (PNG); False (and no file) when no run has a defined answers kept."""
    points = kept_points(answers)
    if not points:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    for p in points:
        kind = _reference_kind(p["method"])
        style = {"fmt": "o"}
        if kind is not None:
            style = kind.style
        elif "@" in p["method"] or p["method"].startswith("local"):
            style = {"fmt": "s"}
        ax.errorbar(p["x"], p["y"], yerr=[[p["y"] - p["low"]], [p["high"] - p["y"]]], capsize=3, ms=6, alpha=0.85,
                    label=reference_run_label(p["method"]) or p["method"], **style)
    ax.axhline(100, color="grey", ls="--", lw=1)
    ax.annotate(DENSE_LABEL, (0.01, 100), xycoords=("axes fraction", "data"), fontsize=7,
                color="grey", xytext=(0, 3), textcoords="offset points")
    n = max(p["n"] for p in points)
    ax.set_xlabel("param skip % on the answer tokens")
    ax.set_ylabel("answers kept % (95 % bootstrap interval)")
    ax.set_title(f"Answers kept vs param skip: greedy chat answers, {n} prompts dense answers correctly", fontsize=9)
    notes = [kind.not_run for prefix, kind in REFERENCES.items()
             if not any(p["method"].startswith(prefix) for p in points)]
    caption = " ".join(["Squares: local routers (twins at matched compute).", *(note + "." for note in notes)])
    fig.text(0.01, 0.01, caption, fontsize=7,
             color="dimgrey")
    ax.set_ylim(min(0.0, min(p["low"] for p in points) - 5), 105)
    ax.set_xlim(0, max(p["x"] for p in points) * 1.25 + 1)  # from 0: a 1-point skip gap is not drawn as a chasm
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")  # the routers sit high and the random reference low right
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=130)
    plt.close(fig)
    return True
