"""A study in one call: :func:`run_study` prints the plan, trains every arm x seed that is not finished (lanes),
measures every finished run that lacks a stored measurement, and writes ``OUT/study.json`` and ``OUT/study.md``.

The same call continues an interrupted study: finished runs are never trained again, stored measurements are
reused while their settings match, and the report is rebuilt from everything stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from hero_core.eval.study import measures as m
from hero_core.eval.study.checks import check_inputs, identified
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
    step = None if probe is None or len(done) == len(jobs) else measure_step_seconds(probe, spec)
    the_plan = plan(spec, jobs, done, step, backbone.name if backbone else (spec.backbone or "the embedded model"))
    for line in plan_lines(the_plan):
        say(line)
    if plan_only:
        return the_plan
    if not render_only and len(done) < len(jobs):
        if train_run is None:
            raise ValueError("runs are unfinished and no trainer was given (python -m hero_core study trains them)")
        train_missing(spec, jobs, train_run, max_runs=max_runs, progress=progress, rank=rank,
                      world_size=world_size)
    if world_size > 1:
        if wait is not None:
            wait()
        if rank != 0:
            return the_plan
    if not render_only:
        done = {j.name for j in jobs if finished(j, spec)}
    measured, dense, notes = collect(spec, [j for j in jobs if j.name in done], backbone, progress)
    report = build_report(spec, the_plan, jobs, measured, dense, notes, n_boot=n_boot)
    if draw is not None:
        report |= draw(report, Path(spec.out))
    write_report(Path(spec.out), report)
    for sentence in report.get("verdicts", {}).values():
        say(sentence)
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


def graded_kinds(spec: StudySpec) -> dict[str, dict]:
    """The graded measures this study takes, with the settings their stored files carry: multiple choice on
    ``--tasks``, BIG-bench on ``--bigbench`` where that path is here."""
    kinds = {"mc": m.tasks_settings(spec)} if spec.tasks else {}
    if spec.bigbench and Path(spec.bigbench).expanduser().exists():
        kinds["bigbench"] = m.bigbench_settings(spec)
    if spec.answers:
        kinds["answers"] = m.answers_settings(spec)
    return kinds


GRADERS = {"mc": (lambda spec: m.read_tasks(spec.tasks), m.measure_mc),
           "bigbench": (m.bigbench_examples, m.measure_bigbench), "answers": (m.answer_rows, m.measure_answers)}


def collect(spec: StudySpec, jobs: list[RunJob], backbone, progress: bool) -> tuple[dict, dict, dict]:
    """Every finished run's measurements, from the store or measured now (``backbone`` None: stored only); the
    dense model's grades per graded measure; the report's notes."""
    from hero_core.eval.benchmarks.bigbench import BigBenchError

    ppl_settings = m.ppl_settings(spec)
    refs_settings = ppl_settings | {"references": list(m.REFERENCES)}
    kinds = graded_kinds(spec)
    notes = {"mc": (f"Multiple choice: the items of {spec.tasks}, accuracy and accuracy retained against dense on the "
                    "same items." if spec.tasks else "Multiple-choice accuracy left out: no --tasks file given."),
             "bigbench": bigbench_note(spec),
             "answers": (f"Answers kept: the first {spec.answers} prompts of the answers suite (every category in "
                         "turn), greedy; the share of dense's correct answers each run also gets right." if spec.answers
                         else "Answers kept left out: no --answers N given.")}
    if not spec.data:
        notes["chat"] = ("A chat ratio below 1 is not a gain over dense: the held-out chat texts are the dense model's "
                         "own replies, and routers trained on the renormalised top-k target put more probability on "
                         "dense's own tokens than dense does (docs/results.md). Compare arms with each other, not "
                         "with 1.")
    store = spec.store
    dense = {k: (m.stored(m.store_file(store, "dense", k), st) or {}).get("grades") for k, st in kinds.items()}
    texts = blocks = None
    items: dict = {}
    measured = {}
    for job in jobs:
        ppl = m.stored(m.store_file(store, job.name, "ppl"), ppl_settings)
        refs = m.stored(m.store_file(store, job.name, "refs"), refs_settings) if spec.references else None
        graded = {k: m.stored(m.store_file(store, job.name, k), st) for k, st in kinds.items()}
        lacking = (ppl is None or (spec.references and refs is None)
                   or any(graded[k] is None or dense[k] is None for k in kinds))
        if lacking and backbone is not None:
            from hero_core.method.model import load_checkpoint

            hero = load_checkpoint(job.folder, backbone)
            if texts is None:
                texts, blocks = m.held_out_texts(hero, spec), m.calibration(hero, spec)
            if ppl is None:
                info = hero.training_info
                ppl = m.measure_ppl(hero, texts, blocks, spec) | {
                    "settings": ppl_settings, "seed": info.get("train_config", {}).get("seed", job.seed),
                    "variant": hero.config.variant, "health": info.get("health"),
                    "tokens_seen": int(info.get("tokens_seen", 0))}
                m.write(m.store_file(store, job.name, "ppl"), ppl)
            if spec.references and refs is None:
                refs = m.measure_references(hero, texts, blocks, spec) | {"settings": refs_settings}
                m.write(m.store_file(store, job.name, "refs"), refs)
            for kind in list(kinds):
                load, grade = GRADERS[kind]
                try:
                    items[kind] = items[kind] if kind in items else load(spec)
                except BigBenchError as err:  # the tasks are not usable here: said in the report, the study goes on
                    notes[kind] = f"BIG-bench left out: {err}"
                    del kinds[kind]
                    continue
                if dense[kind] is None:
                    dense[kind] = grade(hero, items[kind], None)
                    m.write(m.store_file(store, "dense", kind), {"settings": kinds[kind], "grades": dense[kind]})
                if graded[kind] is None:
                    graded[kind] = {"settings": kinds[kind], "grades": grade(hero, items[kind], ppl["tau"])}
                    m.write(m.store_file(store, job.name, kind), graded[kind])
        if ppl is not None:
            measured[job.name] = {"ppl": ppl, "refs": refs, "health": ppl.get("health"),
                                  **{k: graded.get(k) for k in GRADERS}}
    unreferenced = [name for name, run in measured.items() if spec.references and run["refs"] is None]
    if unreferenced:
        notes["references"] = (f"References at the same skip not measured yet for {len(unreferenced)} run(s) "
                               f"({', '.join(unreferenced)}): the command without --render measures them.")
    return measured, dense, notes


def bigbench_note(spec: StudySpec) -> str:
    if not spec.bigbench:
        return "BIG-bench left out: no checkout or archive given (--bigbench PATH)."
    if not Path(spec.bigbench).expanduser().exists():
        return f"BIG-bench left out: {spec.bigbench} is not on this machine."
    return (f"BIG-bench: Retain (mean over the main suite's tasks of routed / dense accuracy, %) on the first "
            f"{m.BIGBENCH_LIMIT} examples of each task, from {spec.bigbench}.")
