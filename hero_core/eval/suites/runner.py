"""The whole evaluation (:func:`evaluate`): every method on every suite of
:data:`~hero_core.eval.suites.registry.SUITES`, Retain against the dense reference, the summary table; and the one-off
BIG-bench task selection.

    param skip     paper's metric, averaged over every token the model processed in that suite
                   (prompts, choices, generated tokens); plus its net form and the FLOP share saved
                   (:mod:`hero_core.measures.accounting`).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hero_core.choices import check_distinct
from hero_core.eval.benchmarks import bigbench
from hero_core.eval.methods import HeroMethod, Method
from hero_core.eval.scoring import retain, score_multiple_choice
from hero_core.eval.suites.registry import DEFAULT_DOMAIN_TOKENS, EVAL_TASKS_FILE, SUITES, RunOptions, load_eval_tasks

log = logging.getLogger(__name__)


def evaluate(hero, variants: Sequence[str] = ("hero", "dense"), suites: Sequence[str] = ("main",),
             limit: int | None = 50, *, tau: float | None = None, methods: Sequence[Method] = (),
             progress: bool = False, tasks_file: Path | None = None,
             humaneval_tokens: int = 300, humaneval_style: str = "auto", reasoning_tokens: int = 96,
             domain_tokens: int = DEFAULT_DOMAIN_TOKENS,
             keep_samples: bool = True) -> dict[str, Any]:
    """Evaluate ``variants`` of ``hero`` (and any extra ``methods``) on ``suites``.

    The dense model is always evaluated as the reference (reported under ``dense``); every suite of
    every other method gets its Retain against it. ``limit`` caps examples per BIG-bench task,
    HumanEval problems, reasoning problems and texts per domain (None = all; domains default to 20).
    Returns a JSON-ready dict: ``{"config", "results": {method: {suite: ...}}, "summary": [...]}``."""
    _check_request(suites, limit)
    reference = HeroMethod(hero, "dense")
    runs: list[Method] = [reference] + [HeroMethod(hero, v, tau) for v in dict.fromkeys(variants) if v != "dense"]
    runs += list(methods)
    names = [m.name for m in runs]
    check_distinct("method names", names)
    selection = load_eval_tasks(tasks_file) if any(SUITES[s].uses_selection for s in suites) else {}
    options = RunOptions(hero, limit, progress=progress, selection=selection, humaneval_tokens=humaneval_tokens,
                         humaneval_style=humaneval_style, reasoning_tokens=reasoning_tokens,
                         domain_tokens=domain_tokens, keep_samples=keep_samples)
    results: dict[str, dict[str, Any]] = {m.name: {} for m in runs}
    timing: dict[str, dict[str, float]] = {m.name: {} for m in runs}
    for suite in suites:
        for name, (result, timed_as, seconds) in _run_suite(suite, runs, reference, options).items():
            results[name][suite] = result
            timing[name][timed_as] = seconds
    _add_retain(results, reference.name)
    return {"config": {"backbone": hero.backbone.name, "checkpoint": hero.checkpoint_name, "variants": list(variants),
                       "methods": names, "suites": list(suites), "limit": limit, "tau": tau,
                       "tasks": {s: selection.get(s) for s in SUITES if SUITES[s].uses_selection and s in suites},
                       "seconds": timing},
            "results": results, "summary": summary_rows(results, reference.name)}


def _check_request(suites: Sequence[str], limit: int | None) -> None:
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        raise ValueError(f"unknown suites {unknown}; choose from {', '.join(SUITES)}")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")


def _run_suite(suite: str, runs: Sequence[Method], reference: Method,
               options: RunOptions) -> dict[str, tuple[dict[str, Any], str, float]]:
    """One suite for every method: per method its result, the name its time is kept under and the seconds. A joint
    suite runs every method at once (one time for all); without ``keep_samples`` a result keeps no problems."""
    spec = SUITES[suite]
    if spec.joint:
        start = time.perf_counter()
        per_method = spec.run(runs, reference, options)
        seconds = time.perf_counter() - start
        return {m.name: (per_method[m.name], f"{suite} (all methods)", seconds) for m in runs}
    done = {}
    for m in runs:
        start = time.perf_counter()
        result = spec.run(m, options)
        done[m.name] = (result, suite, time.perf_counter() - start)
        if not options.keep_samples:
            result.pop("problems", None)
    return done


def _add_retain(results: dict[str, dict[str, Any]], reference: str) -> None:
    for suites in results.values():
        for suite, result in suites.items():
            scores = SUITES[suite].scores
            if scores is not None:
                result["retain"] = retain(scores(result), scores(results[reference][suite]))


def summary_rows(results: dict[str, dict[str, Any]], reference: str) -> list[dict[str, Any]]:
    """One row per (method, suite) (per domain for ``domains``): score, Retain and compute, for tables."""
    return [{"method": name, **row} for name, suites in results.items()
            for suite, result in suites.items() for row in SUITES[suite].headline(result)]


# == task selection (dense only) ===================================================================
def select_bigbench_tasks(hero, n: int = bigbench.SELECTION_EXAMPLES, out: Path | None = EVAL_TASKS_FILE, *,
                          progress: bool = True) -> dict[str, Any]:
    """Run the selection rule once: dense accuracy of every candidate on its first ``n`` examples,
    :func:`hero_core.eval.benchmarks.bigbench.select_tasks`, and (with ``out``) the record written as JSON."""
    method = HeroMethod(hero, "dense")
    candidates = bigbench.all_candidates()
    bigbench.ensure_tasks(candidates)
    dense: dict[str, dict[str, Any]] = {}
    start = time.perf_counter()
    for name in candidates:
        task = bigbench.load_task(name)
        t0 = time.perf_counter()
        result = score_multiple_choice(method, task.head(n), progress=progress, desc=f"dense · {name}")
        dense[name] = {"pool": bigbench.pool_of(name), "accuracy": result["accuracy"], "chance": result["chance"],
                       "n": result["n"], "accuracy_norm": result["accuracy_norm"],
                       "seconds": round(time.perf_counter() - t0, 1)}
        log.info("%s: dense accuracy %.3f (chance %.3f)", name, result["accuracy"], result["chance"])
    record = selection_record(dense, n, hero.backbone.name, time.perf_counter() - start)
    if out is not None:
        Path(out).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record


def selection_record(dense: dict[str, dict[str, Any]], n: int, backbone: str, seconds: float) -> dict[str, Any]:
    """The selection outcome as stored in ``eval_tasks.json``: the rule, every candidate's dense figures
    (with the margin over chance and its z-score under chance, for reading the evidence), the suites."""
    for r in dense.values():
        r["margin"] = r["accuracy"] - r["chance"]
        spread = math.sqrt(max(r["chance"] * (1 - r["chance"]), 1e-12) / max(r["n"], 1))
        r["z_vs_chance"] = round(r["margin"] / spread, 2)
    chosen = bigbench.select_tasks(dense)
    return {
        "rule": (f"dense accuracy on the first {n} examples (fixed shuffled order) at least "
                 f"{100 * bigbench.SELECTION_MARGIN:.0f} points above BIG-bench chance; main = the "
                 f"{bigbench.MAIN_SUITE_SIZE} passing commonsense tasks with the largest margin (filled from "
                 f"reasoning, then code, by margin, if fewer pass); extended = every passing reasoning and code "
                 f"task (it may overlap main). Decided on dense results only, before any routed model was scored."),
        "examples_per_task": n, "margin": bigbench.SELECTION_MARGIN, "backbone": backbone,
        "bigbench_version": bigbench.BIGBENCH_VERSION, "scoring": "sum of continuation token log-probs (lm-eval acc)",
        "main": chosen["main"], "extended": chosen["extended"], "passed": chosen["passed"], "failed": chosen["failed"],
        "candidates": {pool: list(names) for pool, names in bigbench.CANDIDATE_POOLS.items()},
        "dense": dense, "seconds": round(seconds, 1),
    }
