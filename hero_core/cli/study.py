"""Does history help on your model? Train every arm over several seeds and compare them at one matched param skip
(``python -m hero_core study --help``).

It prints the plan first (runs, tokens, an estimate of the time from a step measured here), then trains every arm x
seed under the degradation guard, one run per lane, measures each run at the study's param skip (held-out perplexity
per domain, multiple choice with --tasks, static pruning, random skipping and the oracle at the same skip), and
writes OUT/study.json and OUT/study.md with each arm's seeds, mean and spread and the paired arm differences. The
same command continues an interrupted study; finished runs are never trained again.

This module sits at the package root because it joins two layers: training (hero_core.train) and measuring
(hero_core.eval.study, which never imports training and is handed :func:`train_study_run`).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path

from hero_core.eval.study import StudySpec, run_study
from hero_core.eval.study.spec import DEFAULT_ARMS, MATCHES

LIMIT = 40  # held-out texts per domain a study reads unless told

ARM_RECIPES = {"hero": "hero-10-r2-s1", "no_history": "local-10-s1", "no_memread": "no_memread-10-r2-s1"}
GENERIC_RECIPE = "hero-10-s1"  # another variant (no_aux, no_pos) takes the first stage of the default memory


def first_stage_steps() -> int:
    from hero_core.train.recipes import RUNS

    return RUNS[ARM_RECIPES["hero"]].steps


def train_study_run(payload: dict) -> None:
    """Train one run of a study (a lane calls it with the job's JSON): the arm's first-stage recipe with the
    study's seed, skip and steps, under the degradation guard; resumes from the run's saved state."""
    from hero_core.backbones.loading import load_backbone
    from hero_core.eval.study.lanes import run_settings
    from hero_core.eval.study.spec import RunJob
    from hero_core.method.model import HeroModel, fresh_router
    from hero_core.train.recipes import RUNS, stage_config
    from hero_core.train.train import train

    job, spec = RunJob(**payload["job"]), StudySpec.from_json(payload["spec"])
    cfg = stage_config(RUNS[ARM_RECIPES.get(job.arm, GENERIC_RECIPE)], job.folder, steps=spec.steps, start_dir=None,
                       data=spec.data, threads=1)
    # the study's own settings over the recipe's, the same ones a finished run is checked against
    cfg = replace(cfg, **run_settings(job, spec))
    backbone = load_backbone(spec.backbone, device="auto")
    train(cfg, HeroModel(backbone, fresh_router(backbone), "training"), progress=True)


def draw_study_figures(report: dict, out: Path) -> dict:
    """The study's figures as PNG beside its page, or a note saying why they are missing (no renderer here)."""
    from hero_core.viz.figure_export import ExportError
    from hero_core.viz.study_figures import write_study_figures

    try:
        return {"figures": write_study_figures(report, out)}
    except ExportError as err:
        return {"figures_note": f"Figures not drawn: {err}"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backbone", default=None, help="local Hugging Face model directory (default: the embedded model)")
    p.add_argument("--data", default=None, help="your own text (as `train --data`); default: the built-in mix")
    p.add_argument("--arms", default=",".join(DEFAULT_ARMS), help="router variants to compare, the first against "
                   "each other (default: %(default)s)")
    p.add_argument("--seeds", type=int, default=3, help="training seeds per arm (default: %(default)s)")
    p.add_argument("--skip", type=float, default=0.10,
                   help="param skip trained to and matched at (default: %(default)s)")
    p.add_argument("--steps", type=int, default=None, help="optimiser steps per run (default: the first-stage "
                   "recipe's)")
    p.add_argument("--out", type=Path, default=Path("study"), help="study folder (default: %(default)s)")
    p.add_argument("--lanes", type=int, default=1, help="runs trained side by side, one process and one torch "
                   "thread each (default: %(default)s)")
    p.add_argument("--tasks", default=None, help="JSONL of {question, choices, answer}: multiple-choice accuracy "
                   "retained against dense")
    p.add_argument("--bigbench", default=None, help="a BIG-bench checkout or archive (left out when not given)")
    p.add_argument("--answers", type=int, default=0, help="prompts of the built-in answers suite (greedy chat "
                   "answers with a checkable result): the share of dense's correct answers each run keeps (default: "
                   "left out; each prompt is one generation per run)")
    p.add_argument("--limit", type=int, default=None, help="held-out texts per domain (default: 40; the bundled width "
                   "study 24)")
    p.add_argument("--max-tokens", type=int, default=192, help="tokens per held-out text at most")
    p.add_argument("--no-references", dest="references", action="store_false",
                   help="leave out static pruning, random skipping and the oracle")
    p.add_argument("--plan", action="store_true", help="print the plan and stop")
    p.add_argument("--render", action="store_true", help="neither train nor measure: report what is stored")
    p.add_argument("--match", choices=MATCHES, default="param", help="measure every run at the tau giving --skip "
                   "param skip (param), or at --net-saving of a dense token's FLOPs saved after its router and "
                   "adapters are charged (net: routers of different cost at equal net compute; default: %(default)s)")
    p.add_argument("--net-saving", type=float, default=0.06, help="with --match net: the share of FLOPs saved net "
                   "every run is measured at (default: %(default)s)")
    p.add_argument("--bundled", action="store_true", help="the bundled study of the memory question (docs/seeds.md; "
                   "its runs are the bundled checkpoints, never retrained)")
    p.add_argument("--bundled-widths", action="store_true", help="the bundled study of the router's width at equal "
                   "net compute (docs/widths/study.md; its runs are the bundled checkpoints, never retrained)")


def spec_from_args(args) -> StudySpec:
    if args.bundled_widths:
        from hero_core.eval.study.widths import WIDTH_LIMIT, widths_spec

        limit = WIDTH_LIMIT if args.limit is None else args.limit
        spec, left_out = widths_spec(lanes=args.lanes, limit=limit, max_tokens=args.max_tokens,
                                     references=args.references)
        for arm in left_out:
            print(f"left out: {arm}")
        return spec
    if args.bundled:
        from hero_core.eval.study.bundled import bundled_spec

        limit = LIMIT if args.limit is None else args.limit
        return bundled_spec(lanes=args.lanes, limit=limit, max_tokens=args.max_tokens, tasks=args.tasks,
                            bigbench=args.bigbench, answers=args.answers, references=args.references)
    return StudySpec(out=str(args.out), arms=tuple(a.strip() for a in args.arms.split(",") if a.strip()),
                     seeds=args.seeds, skip=args.skip,
                     steps=first_stage_steps() if args.steps is None else args.steps,  # 0 is refused, not defaulted
                     backbone=args.backbone, data=args.data, tasks=args.tasks, bigbench=args.bigbench,
                     lanes=args.lanes, limit=LIMIT if args.limit is None else args.limit, max_tokens=args.max_tokens,
                     answers=args.answers,
                     references=args.references, match=args.match, net_saving=args.net_saving)


def run_cli(args) -> int:
    from hero_core.method.config import TRAINABLE_VARIANTS

    spec = spec_from_args(args)
    # an arm is the variant its runs train; the bundled study's runs are trained already and keep their names
    unknown = [] if args.bundled or args.bundled_widths else [a for a in spec.arms if a not in TRAINABLE_VARIANTS]
    if unknown:
        raise ValueError(f"unknown arm(s) {unknown}; choose router variants from {', '.join(TRAINABLE_VARIANTS)}")
    ranks = {}
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size > 1 and not (args.plan or args.render):  # under accelerate launch: one process per GPU
        from accelerate import PartialState

        state = PartialState()  # sets this rank's device, so each rank trains on its own GPU
        spec = replace(spec, lanes=1)  # a rank trains its runs one after another on its GPU
        ranks = {"rank": state.process_index, "world_size": world_size, "wait": state.wait_for_everyone,
                 "progress": state.is_main_process}
        if not state.is_main_process:
            ranks["say"] = lambda line: None
    report = run_study(spec, train_run=train_study_run, plan_only=args.plan, render_only=args.render,
                       draw=draw_study_figures, **ranks)
    if ranks.get("rank", 0) != 0:  # the first rank measured and reports
        return 0
    if args.bundled and not args.plan and "summary" in report:
        from hero_core.eval.study.bundled import answer_sentence, publish

        for path in publish(report):
            print(f"wrote {path}")
        print(answer_sentence(report))
    elif not args.plan:
        print(f"wrote {Path(spec.out) / 'study.json'} and study.md")
    return 0
