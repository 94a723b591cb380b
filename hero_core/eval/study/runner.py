"""A study in one call: :func:`run_study` prints the plan, trains every arm x seed that is not finished (lanes),
measures every finished run that lacks a stored measurement, and writes ``OUT/study.json`` and ``OUT/study.md``.

The same call continues an interrupted study: finished runs are never trained again, stored measurements are
reused while their settings match, and the report is rebuilt from everything stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from hero_core.eval.study.checks import check_inputs, identified
from hero_core.eval.study.collection import collect
from hero_core.eval.study.lanes import finished, train_missing
from hero_core.eval.study.report import build_report, render_markdown
from hero_core.eval.study.spec import (
    RunJob,
    StudyError,
    StudySpec,
    load_or_write_spec,
    measure_step_seconds,
    plan,
    plan_lines,
    plan_runs,
)

REPORT_FILE, PAGE_FILE = "study.json", "study.md"


def run_study(spec: StudySpec, *, train_run: Callable[[dict], None] | None = None, plan_only: bool = False,
              render_only: bool = False, max_runs: int | None = None, progress: bool = True,
              n_boot: int | None = None, draw: Callable[[dict, Path], dict] | None = None,
              say: Callable[[str], None] = print, rank: int = 0, world_size: int = 1,
              wait: Callable[[], None] | None = None) -> dict:
    """Run (or continue) the study ``spec``; returns the plan (``plan_only``) or the report. ``train_run`` trains
    one run from its job's JSON (hero_core.cli.study.train_study_run; needed only when a run is unfinished).
    ``render_only``: neither train nor measure; report what is stored. ``max_runs``: train at most that many
    runs in this call. ``draw(report, out)``: the study's figures, written under ``out``; returns the report's
    ``figures`` (name -> path relative to ``out``) or a ``figures_note`` saying why there are none. ``rank`` of
    ``world_size`` (several processes, one per GPU): this process trains its share of the unfinished runs, then
    ``wait()`` holds it until every rank has (a barrier); rank 0 goes on to measure and report, the others return
    the plan."""
    spec, jobs, done, backbone, probe = _checked(spec, render_only=render_only, plan_only=plan_only)
    step = None if probe is None or len(done) == len(jobs) else measure_step_seconds(probe, spec)
    the_plan = plan(spec, jobs, done, step, backbone.name if backbone else (spec.backbone or "the embedded model"))
    for line in plan_lines(the_plan):
        say(line)
    if plan_only:
        return the_plan
    if not render_only and len(done) < len(jobs):
        _train(spec, jobs, train_run, max_runs=max_runs, progress=progress, rank=rank, world_size=world_size)
    if not _reports_here(rank, world_size, wait):
        return the_plan
    if not render_only:
        done = {j.name for j in jobs if finished(j, spec)}
    report = _report(spec, the_plan, jobs, [j for j in jobs if j.name in done], backbone, progress, n_boot, draw)
    for sentence in report.get("verdicts", {}).values():
        say(sentence)
    return report


def _checked(spec: StudySpec, *, render_only: bool, plan_only: bool) -> tuple:
    """The study as it will run: its spec (``--data`` identified), its runs, the names of those already finished,
    the backbone and a fresh router on it (both None with ``render_only``); the spec is written unless
    ``plan_only``."""
    # Everything is checked before anything is written: a refused start leaves OUT as it was (checks.py)
    spec = identified(spec, render_only=render_only)  # --data by its content; a missing --data is refused
    load_or_write_spec(spec, write=False)  # another study's folder is refused before anything is loaded
    jobs = plan_runs(spec)
    done = {j.name for j in jobs if finished(j, spec)}
    backbone = None if render_only else _load_backbone(spec)
    probe = None if backbone is None else _probe(backbone)
    if probe is not None:
        check_reachable(spec.skip, probe)
    check_inputs(spec, probe)
    load_or_write_spec(spec, write=not plan_only)
    return spec, jobs, done, backbone, probe


def _train(spec: StudySpec, jobs: list[RunJob], train_run: Callable[[dict], None] | None, **lanes) -> None:
    """Train this process's share of the unfinished runs (lanes.py)."""
    if train_run is None:
        raise ValueError("runs are unfinished and no trainer was given (python -m hero_core study trains them)")
    train_missing(spec, jobs, train_run, **lanes)


def _reports_here(rank: int, world_size: int, wait: Callable[[], None] | None) -> bool:
    """Whether this process goes on to measure and report: of several, each waits until every rank has trained
    its share (the barrier), then rank 0 alone goes on."""
    if world_size > 1:
        if wait is not None:
            wait()
        return rank == 0
    return True


def _report(spec: StudySpec, the_plan: dict, jobs: list[RunJob], done: list[RunJob], backbone, progress: bool,
            n_boot: int | None, draw: Callable[[dict, Path], dict] | None) -> dict:
    """Measure what the finished runs lack, build the report with its figures and write it under OUT."""
    measured, dense, notes = collect(spec, done, backbone, progress)
    report = build_report(spec, the_plan, jobs, measured, dense, notes, n_boot=n_boot)
    if draw is not None:
        report |= draw(report, Path(spec.out))
    write_report(Path(spec.out), report)
    return report


def write_report(out: Path, report: dict) -> None:
    from hero_core.files import atomic_write_text

    out.mkdir(parents=True, exist_ok=True)
    # compact: every per-text number is in it, one a line would be most of the file
    atomic_write_text(out / REPORT_FILE, json.dumps(report, sort_keys=True) + "\n")
    atomic_write_text(out / PAGE_FILE, render_markdown(report))


def _load_backbone(spec: StudySpec):
    from hero_core.backbones.loading import load_backbone

    return load_backbone(spec.backbone, device="auto")


def _probe(backbone):
    """A fresh router on the backbone: its compute profile and a timed step."""
    from hero_core.method.model import HeroModel, fresh_router

    return HeroModel(backbone, fresh_router(backbone), "plan")


def check_reachable(skip: float, hero) -> None:
    """Refuse a param skip that skipping every routed FFN of every token would not reach (a small model's
    embeddings can outweigh its FFNs)."""
    from hero_core.measures.accounting import ffns_for_param_skip

    most = hero.config.n_routed / ffns_for_param_skip(1.0, hero.profile)
    if skip >= most:
        raise StudyError(f"--skip {skip:g} is out of reach on {hero.backbone.name}: skipping every routed FFN of "
                         f"every token gives {most:.1%} param skip; choose a smaller --skip")
