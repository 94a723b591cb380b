"""Retain as the paper defines it, with 95 % bootstrap intervals.

    Retain = mean over tasks of (routed score / dense score), in percent (:func:`hero_core.eval.scoring.retain`);
    tasks whose dense score is 0 are left out (their ratio is undefined).

Here the tasks are the BIG-bench main suite (``hero_core/eval_tasks.json``; a task's score is its accuracy) and
HumanEval (one more task; its score is pass@1), read from an :func:`hero_core.eval.evaluate` result that kept the
per-example scores (``grades``).

Intervals (both percentile bootstraps on :mod:`hero_core.measures.metrics`' resamples and its resampled Retain):

* **over examples** (the one the README shows): every task's examples are resampled with replacement, the
  routed method and dense on the *same* resampled examples (they answered the same ones), and Retain is
  recomputed. The tasks are fixed by a written rule, not drawn, so this is the uncertainty that more examples
  per task would shrink, and at 10 examples per task it is the large one;
* **over tasks**: the per-task ratios resampled (:func:`hero_core.measures.metrics.bootstrap_ci`), how much the mean
  rests on which tasks were chosen.

A paired difference of two methods (a hero checkpoint minus its local twin at equal param skip) resamples the
same examples for both, so what they share cancels (:func:`retain_difference`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hero_core.eval.scoring import retain
from hero_core.measures.metrics import bootstrap_ci, bootstrap_picks, percentile_interval, retain_replicates

RETAIN_SUITES = ("main", "humaneval")  # the suites whose tasks enter Retain
REFERENCE = "dense"
N_BOOT = 2000
ScoreTable = Mapping[str, Sequence[float]]  # task -> per-example scores, in the suite's fixed example order


def example_scores(result: Mapping[str, Any], method: str,
                   suites: Sequence[str] = RETAIN_SUITES) -> dict[str, np.ndarray]:
    """``{task: per-example scores}`` of ``method`` in an evaluate() result: each BIG-bench task's ``grades`` and
    HumanEval's per-problem pass (task ``humaneval``). Suites the method did not run are left out; a suite run
    without per-example scores (a result written before they were kept) raises, since no interval can be drawn."""
    runs = result["results"].get(method, {})
    table: dict[str, np.ndarray] = {}
    for suite in suites:
        run = runs.get(suite)
        if run is None:
            continue
        per_task = run["tasks"].items() if "tasks" in run else [(suite, run)]
        for task, scores in per_task:
            if "grades" not in scores:
                raise ValueError(f"{method} · {task}: no per-example scores ('grades') in this result; rerun "
                                 "scripts/make_results.py")
            table[task] = np.asarray(scores["grades"], dtype=np.float64)
    return table


def _check_paired(routed: ScoreTable, dense: ScoreTable) -> list[str]:
    """Tasks both ran, in dense's order; each must hold the same number of examples on both sides."""
    tasks = [t for t in dense if t in routed]
    for t in tasks:
        if len(routed[t]) != len(dense[t]):
            raise ValueError(f"task {t!r}: {len(routed[t])} routed scores against {len(dense[t])} dense ones; "
                             "Retain pairs the same examples")
    return tasks


def draw_picks(dense: ScoreTable, tasks: Sequence[str], *, n_boot: int = N_BOOT,
               seed: int = 0) -> dict[str, np.ndarray]:
    """Resampled example indices per task, ``(n_boot, n_task)`` each, from one seeded generator (in ``tasks``'
    order), so every method compared against the same dense run is resampled on the same examples."""
    rng = np.random.default_rng(seed)
    return {t: bootstrap_picks(len(dense[t]), n_boot=n_boot, rng=rng) for t in tasks}


def _replicates(routed: ScoreTable, dense: ScoreTable, picks: Mapping[str, np.ndarray]) -> np.ndarray:
    """Retain (%) on each resample of ``picks`` (:func:`hero_core.measures.metrics.retain_replicates`, per task)."""
    return retain_replicates([routed[t] for t in picks], [dense[t] for t in picks], list(picks.values()))


def _interval(replicates: np.ndarray, level: float) -> tuple[float | None, float | None]:
    kept = replicates[~np.isnan(replicates)]
    return percentile_interval(kept, level) if len(kept) else (None, None)


def retain_interval(routed: ScoreTable, dense: ScoreTable, *, n_boot: int = N_BOOT, level: float = 0.95,
                    seed: int = 0) -> dict[str, Any]:
    """Retain (%) of ``routed`` against ``dense`` with its bootstrap intervals.

    Returns ``retain`` (None when no task has a dense score above 0), ``low``/``high`` (over examples),
    ``task_low``/``task_high`` (over tasks), ``tasks`` (those in the mean), ``left_out`` (dense scored 0) and
    ``examples`` (per task)."""
    tasks = _check_paired(routed, dense)
    means = {t: (float(np.mean(routed[t])) if len(routed[t]) else 0.0,
                 float(np.mean(dense[t])) if len(dense[t]) else 0.0) for t in tasks}
    used = [t for t in tasks if means[t][1] > 0]
    point = retain({t: means[t][0] for t in tasks}, {t: means[t][1] for t in tasks})
    low, high = _interval(_replicates(routed, dense, draw_picks(dense, used, n_boot=n_boot, seed=seed)),
                          level) if used else (None, None)
    ratios = [100.0 * means[t][0] / means[t][1] for t in used]
    task_low, task_high = bootstrap_ci(ratios, n_boot=n_boot, level=level, seed=seed) if used else (None, None)
    return {"retain": point, "low": low, "high": high, "task_low": task_low, "task_high": task_high,
            "tasks": used, "left_out": [t for t in tasks if t not in used],
            "examples": {t: len(dense[t]) for t in tasks}}


def retain_difference(a: ScoreTable, b: ScoreTable, dense: ScoreTable, *, n_boot: int = N_BOOT,
                      level: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """Retain(a) - Retain(b) in points, with its paired bootstrap interval over examples (both resampled on the
    same examples of the tasks all three ran). ``difference`` is None when either Retain is undefined."""
    tasks = [t for t in _check_paired(a, dense) if t in _check_paired(b, dense)]
    used = [t for t in tasks if len(dense[t]) and float(np.mean(dense[t])) > 0]
    ra = retain({t: float(np.mean(a[t])) for t in tasks}, {t: float(np.mean(dense[t])) for t in tasks})
    rb = retain({t: float(np.mean(b[t])) for t in tasks}, {t: float(np.mean(dense[t])) for t in tasks})
    if ra is None or rb is None:
        return {"difference": None, "low": None, "high": None, "tasks": used}
    picks = draw_picks(dense, used, n_boot=n_boot, seed=seed)
    low, high = _interval(_replicates(a, dense, picks) - _replicates(b, dense, picks), level)
    return {"difference": ra - rb, "low": low, "high": high, "tasks": used}


def task_param_skip(result: Mapping[str, Any], method: str, suites: Sequence[str] = RETAIN_SUITES) -> float | None:
    """Param skip (paper definition) over every token ``method`` processed in the Retain suites it ran
    (token-weighted: prompts, choices and generated tokens); None when it ran none."""
    runs = result["results"].get(method, {})
    pairs = [(runs[s]["compute"].get("tokens", 0), runs[s]["compute"].get("param_skip")) for s in suites if s in runs]
    pairs = [(n, p) for n, p in pairs if n and p is not None]
    total = sum(n for n, _ in pairs)
    return sum(n * p for n, p in pairs) / total if total else None


def retain_summary(result: Mapping[str, Any], *, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Every method of an evaluate() result but dense: Retain with intervals and param skip on the task tokens;
    and, for each entry of ``result["matched"]`` (``{checkpoint: {"method": twin run, ...}}``), the checkpoint's
    paired difference from its twin (``vs_twin``)."""
    dense = example_scores(result, REFERENCE)
    out: dict[str, dict[str, Any]] = {}
    for method in result["results"]:
        if method == REFERENCE:
            continue
        scores = example_scores(result, method)
        out[method] = {**retain_interval(scores, dense, seed=seed), "param_skip": task_param_skip(result, method)}
    for name, match in (result.get("matched") or {}).items():
        if name in out and match.get("method") in out:
            out[name]["vs_twin"] = {"twin": match["method"], **retain_difference(
                example_scores(result, name), example_scores(result, match["method"]), dense, seed=seed)}
    return out

