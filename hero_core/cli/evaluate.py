"""``python -m hero_core eval``: the suites, task selection, BIG-bench fetching and lm-eval runs.

    python -m hero_core eval --checkpoint hero-25 --variants hero,no_history,dense \\
        --suites main,extended,humaneval,reasoning,domains --limit 50 --out results.json
    python -m hero_core eval --fetch-bigbench          # once: download BIG-bench, extract candidates
    python -m hero_core eval --select-tasks            # once, dense only: rewrite eval_tasks.json
    python -m hero_core eval --lm-eval-task hero_core/lm_eval_tasks/hero_reasoning_mc.yaml --variants hero,dense
    python -m hero_core eval --answers --checkpoint hero-10,local-10 --limit 20 --out answers.json
    python -m hero_core eval --answers --checkpoint headline --twins --limit 120 --out docs/answers.json
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from hero_core.backbones.threads import set_threads
from hero_core.eval.benchmarks import bigbench, humaneval
from hero_core.eval.suites import registry
from hero_core.eval.suites.harness import run_lm_eval
from hero_core.eval.suites.runner import evaluate, select_bigbench_tasks
from hero_core.method.config import INFERENCE_VARIANTS

DESCRIPTION = ("Evaluation: BIG-bench multiple choice with Retain, HumanEval, generated reasoning, per-domain quality; "
               "--answers: the share of dense's correct chat answers each checkpoint keeps.")
SUITE_LIMIT = 50  # --limit's default for the suites (the answers suite runs every prompt by default)
SUITE_VARIANTS = "hero,dense"  # --variants' default for the suites
HEADLINE = "headline"  # --answers --checkpoint headline: every checkpoint of the README's headline table


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``python -m hero_core eval``: the suites, task selection, BIG-bench fetching and lm-eval runs."""
    from hero_core.method.model_args import add_backbone_arguments

    p.description = DESCRIPTION
    p.add_argument("--checkpoint", default=None,
                   help="bundled name (hero-25, …) or checkpoint directory; with --answers a comma-separated list "
                        "(default: the bundled default checkpoint and its local twin), or 'headline': every "
                        "checkpoint of the README's headline table (bundled hero-/local- and recipe-2 ones)")
    add_backbone_arguments(p)
    p.add_argument("--variants", default=None,
                   help=f"comma-separated, from {', '.join(INFERENCE_VARIANTS)} (dense always runs as reference; "
                        f"default {SUITE_VARIANTS}; with --answers: the variant each checkpoint was trained as)")
    p.add_argument("--suites", default="main", help=f"comma-separated, from {', '.join(registry.SUITES)}")
    p.add_argument("--limit", type=int, default=None,
                   help=f"examples per task / problems / texts per domain (default {SUITE_LIMIT}); with --answers: "
                        "prompts in all, each category in turn (default: every prompt)")
    p.add_argument("--tau", type=float, default=None, help="gate threshold (default: the checkpoint's)")
    p.add_argument("--humaneval-tokens", type=int, default=300, help="max new tokens per HumanEval completion")
    p.add_argument("--humaneval-style", choices=("auto",) + humaneval.PROMPT_STYLES, default="auto",
                   help="completion: raw prompt (original protocol); chat: instruction + code fence; "
                        "auto: chat when the model has a chat template")
    p.add_argument("--no-samples", action="store_true",
                   help="leave generated completions (with --answers: the answer texts) out of the JSON")
    p.add_argument("--out", type=Path, default=None, help="write the results JSON here")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (use 1 when another job shares the cores: oversubscription is ~7x slower)")
    p.add_argument("--select-tasks", action="store_true",
                   help="run the BIG-bench task-selection rule on the dense model and write hero_core/eval_tasks.json")
    p.add_argument("--selection-examples", type=int, default=bigbench.SELECTION_EXAMPLES,
                   help="with --select-tasks: examples per candidate task the dense model is scored on")
    p.add_argument("--fetch-bigbench", action="store_true", help="download BIG-bench once and extract the candidates")
    p.add_argument("--lm-eval-task", type=Path, default=None,
                   help="an lm-evaluation-harness task YAML to run on each variant (needs lm-eval installed)")
    p.add_argument("--answers", action="store_true",
                   help="run the answers suite (hero_core/eval/answers/answers.jsonl): greedy chat answers of dense "
                        "and each checkpoint, the share of dense's correct answers each keeps (95 %% bootstrap), "
                        "param skip on the answer tokens")
    p.add_argument("--answers-file", type=Path, default=None,
                   help="with --answers: a JSONL of prompts in the answers format "
                        "(default: hero_core/eval/answers/answers.jsonl)")
    p.add_argument("--resume-dir", type=Path, default=None,
                   help="with --answers: keep every answer in a JSONL file per run in this folder as it is checked, "
                        "and reuse the answers already there (a stopped run resumes where it stopped)")
    p.add_argument("--reuse", type=Path, default=None,
                   help="with --answers and --resume-dir: first copy into --resume-dir the answers of an earlier "
                        "report (its JSON, with texts) for dense and each checkpoint it ran at its own tau, so only "
                        "new checkpoints are generated")
    p.add_argument("--answers-tokens", type=int, default=None,
                   help="with --answers: cap on new tokens per answer (default: each prompt's own max_new_tokens)")
    p.add_argument("--random", action="store_true",
                   help="with --answers: also the random-skip reference (not a router) at the first checkpoint's "
                        "param skip on calibration text, seeded per prompt")
    p.add_argument("--oracle", action="store_true",
                   help="with --answers: also the oracle reference (not deployable: runs both branches) at the first "
                        "checkpoint's param skip on calibration text")
    p.add_argument("--twins", action="store_true",
                   help="with --answers: also run each checkpoint's local twin (hero-10 -> local-10) at the tau whose "
                        "param skip on calibration text matches the checkpoint's (hero_core.eval.twins)")


def run_cli(args) -> int:
    progress = not args.quiet
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be at least 1, got {args.threads}")
        set_threads(args.threads)
    if args.fetch_bigbench:
        paths = bigbench.ensure_tasks(bigbench.all_candidates())
        print(f"BIG-bench {bigbench.BIGBENCH_VERSION}: {len(paths)} candidate tasks under {bigbench.tasks_dir()}")
        if not (args.select_tasks or args.lm_eval_task):
            return 0
    from hero_core.method.model_args import load_from_args

    if args.answers:
        return _run_answers(args, load_from_args, progress)
    args.limit = SUITE_LIMIT if args.limit is None else args.limit
    hero = load_from_args(args)
    if args.select_tasks:
        return _select_tasks(hero, args, progress)
    variants = _suite_variants(args.variants)
    if args.lm_eval_task is not None:
        return _lm_eval(hero, variants, args)
    suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    result = evaluate(hero, variants, suites, args.limit, tau=args.tau, progress=progress,
                      humaneval_tokens=args.humaneval_tokens, humaneval_style=args.humaneval_style,
                      keep_samples=not args.no_samples)
    _print_summary(result)
    _write_results(args.out, result)
    return 0


def _select_tasks(hero, args, progress: bool) -> int:
    """``--select-tasks``: dense's accuracy on every candidate BIG-bench task, and the tasks it passes."""
    out = args.out if args.out is not None else registry.EVAL_TASKS_FILE
    record = select_bigbench_tasks(hero, n=args.selection_examples, out=out, progress=progress)
    for name, r in record["dense"].items():
        print(f"{name:42s} {r['pool']:11s} acc {100 * r['accuracy']:5.1f}  chance {100 * r['chance']:5.1f}  "
              f"{'pass' if name in record['passed'] else '-'}")
    print(f"main: {', '.join(record['main'])}\nextended: {', '.join(record['extended'])}")
    return 0


def _suite_variants(given: str | None) -> list[str]:
    """``--variants`` (default: the suites'), each checked."""
    variants = [v.strip() for v in (given or SUITE_VARIANTS).split(",") if v.strip()]
    for v in variants:
        if v not in INFERENCE_VARIANTS:
            raise ValueError(f"unknown variant {v!r}; choose from {', '.join(INFERENCE_VARIANTS)}")
    return variants


def _lm_eval(hero, variants: list[str], args) -> int:
    """``--lm-eval-task``: one lm-evaluation-harness task per variant."""
    output = {"lm_eval": [run_lm_eval(hero, args.lm_eval_task, v, tau=args.tau, limit=args.limit) for v in variants]}
    print(json.dumps(output, indent=2))
    if args.out:
        _write_json(args.out, output)
    return 0


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _write_results(path: Path | None, data: dict) -> None:
    """``--out``: the results JSON, and a line that says where it went."""
    if path:
        _write_json(path, data)
        print(f"results written to {path}")


def _percent(value, digits: int) -> str:
    """A share as a percentage for the printed tables; "-" where the figure is missing (None, or not a number)."""
    return f"{100 * value:.{digits}f}" if isinstance(value, (int, float)) else "-"


def _print_columns(columns: Sequence[tuple[str, int]], rows: Iterable[Sequence[str]]) -> None:
    """A plain-text table: each (header, width) column left-aligned when its width is negative, else right; a longer
    cell widens its line rather than being cut (a method name must stay whole)."""
    def line(cells: Sequence[str]) -> str:
        return " ".join(f"{c:<{-w}s}" if w < 0 else f"{c:>{w}s}" for c, (_, w) in zip(cells, columns, strict=True))

    print(line([header for header, _ in columns]))
    for cells in rows:
        print(line(cells))


def _print_summary(result: dict) -> None:
    pct = partial(_percent, digits=2)

    def number(value, fmt: str) -> str:
        return format(value, fmt) if isinstance(value, (int, float)) else "-"

    _print_columns([("method", -14), ("suite", -18), ("score", 8), ("retain %", 9), ("param skip %", 13),
                    ("net %", 7), ("FLOPs saved %", 14)],
                   ([row["method"], row["suite"], number(row.get("score"), ".4f"), number(row.get("retain"), ".2f"),
                     pct(row.get("param_skip")), pct(row.get("net_param_skip")), pct(row.get("flop_share_saved"))]
                    for row in result["summary"]))


def _run_answers(args, load, progress: bool) -> int:
    """``--answers``: every checkpoint (on one loaded backbone) against dense on the answers suite."""
    from hero_core.eval.answers import run as answers
    from hero_core.eval.methods import HeroMethod
    from hero_core.eval.sweep.run import with_checkpoint

    names = _answer_checkpoints(args.checkpoint)
    hero = load(argparse.Namespace(**{**vars(args), "checkpoint": names[0]}))
    # the tiny test model has no checkpoints of its own: it stands in for the first one only
    models = [hero] if os.environ.get("HERO_LENS_TINY") == "1" else [with_checkpoint(hero, n) for n in names]
    methods = _checkpoint_methods(models, args.variants, args.tau)
    matched = _matched_twins(hero, models, args) if args.twins else {}
    methods += [HeroMethod(m.twin_model, m.twin_model.config.variant, m.match.tau, name=m.match.method)
                for m in matched.values()]
    references = _references(models[0], matched, random=args.random, oracle=args.oracle)
    methods += [reference for reference, _ in references]
    rows = answers.select_rows(answers.load_rows(args.answers_file), args.limit)
    if args.reuse is not None:
        _reuse_answers(args.reuse, args.resume_dir, rows, hero.backbone.name)
    frame = answers.run_answers(hero, methods, rows, max_new_tokens=args.answers_tokens, progress=progress,
                                resume_dir=args.resume_dir)
    report = answers.answers_report(frame, keep_texts=not args.no_samples)
    report["config"] = {"backbone": hero.backbone.name, "checkpoints": [m.checkpoint_name for m in models],
                        "methods": [m.name for m in methods], "tau": args.tau, "limit": args.limit,
                        "rows": len(rows), "answers_file": str(args.answers_file or answers.ANSWERS_FILE),
                        "answers_tokens": args.answers_tokens,
                        "matched": {name: m.match.to_dict() for name, m in matched.items()},
                        "references": {reference.name: about for reference, about in references}}
    _print_answers(report)
    _write_results(args.out, report)
    return 0


def _answer_checkpoints(given: str | None) -> list[str]:
    """``--checkpoint`` as a list: the default and its twin when not given, every headline checkpoint for
    ``headline``."""
    from hero_core.eval import twins
    from hero_core.method.model import DEFAULT_CHECKPOINT

    names = [c.strip() for c in (given or "").split(",") if c.strip()]
    names = names or [DEFAULT_CHECKPOINT, *filter(None, [twins.twin_name(DEFAULT_CHECKPOINT)])]
    if names == [HEADLINE]:
        names = twins.headline_checkpoints()
        if not names:
            raise ValueError("no headline checkpoint is bundled; `make checkpoints` trains them")
    return names


def _checkpoint_methods(models: list, given_variants: str | None, tau: float | None) -> list:
    """Every checkpoint under each of ``--variants`` (its own variant when none is given; dense is the reference,
    never a method), named by checkpoint, variant and tau where those were chosen."""
    from hero_core.eval.methods import HeroMethod

    variants = [v.strip() for v in given_variants.split(",") if v.strip()] if given_variants else None
    methods = []
    for model in models:
        for variant in variants or [model.config.variant]:
            if variant == "dense":
                continue
            name = model.checkpoint_name + (f" · {variant}" if variants else "")
            name += f" @tau={tau:g}" if tau is not None else ""
            methods.append(HeroMethod(model, variant, tau, name=name))
    return methods


def _reuse_answers(reuse: Path, resume_dir: Path | None, rows: list, backbone: str) -> None:
    """``--reuse``: an earlier report's answers copied into ``--resume-dir``, so they are not generated again."""
    from hero_core.eval.answers import run as answers

    if resume_dir is None:
        raise ValueError("--reuse copies answers into --resume-dir: give both")
    report = json.loads(reuse.read_text(encoding="utf-8"))
    seeded = answers.seed_from_report(report, resume_dir, rows, backbone)
    print(f"reused {seeded} answers from {reuse}")


def _print_answers(report: dict) -> None:
    pct = partial(_percent, digits=1)
    rows = []
    for method, kept in report["kept"].items():
        for category, r in [("overall", kept["overall"]), *kept["categories"].items()]:
            interval = f"{pct(r['kept_low'])}-{pct(r['kept_high'])}" if r["kept"] is not None else "-"
            rows.append([method, category, str(r["n"]), pct(r["dense_accuracy"]), pct(r["method_accuracy"]),
                         pct(r["kept"]), interval, pct(r["answer_param_skip"]), pct(r["param_skip"])])
    _print_columns([("method", -24), ("category", -14), ("n", 4), ("dense %", 8), ("method %", 9), ("kept %", 7),
                    ("95 % interval", 14), ("answer skip %", 14), ("all skip %", 11)], rows)


def _references(first, matched: dict, *, random: bool, oracle: bool) -> list[tuple[Any, dict[str, Any]]]:
    """``--random`` / ``--oracle``: the reference policies at the first checkpoint's param skip on calibration
    text (the skip its twin was matched to, when --twins measured it), each with what the report says of it."""
    from hero_core.eval.answers.references import oracle_reference, random_reference
    from hero_core.eval.calibration import calibration_blocks
    from hero_core.method.tau_search import realised_skip

    if not (random or oracle):
        return []
    name = first.checkpoint_name
    # read by the oracle's threshold search, and for the skip itself when no twin was matched to it
    blocks = calibration_blocks(first) if oracle or name not in matched else None
    if name in matched:
        param_skip = matched[name].match.target_skip
    else:
        param_skip = realised_skip(first, blocks, first.config.variant, first.config.tau)
    references = []
    if random:
        reference = random_reference(first, param_skip, f"random@{name}")
        references.append((reference, {"checkpoint": name, "param_skip": param_skip,
                                       "skip_probability": reference.setting, "seed": "crc32 of the prompt id"}))
    if oracle:
        reference, realised = oracle_reference(first, param_skip, f"oracle@{name}", blocks)
        references.append((reference, {"checkpoint": name, "param_skip": param_skip, "threshold": reference.setting,
                                       "realised_param_skip": realised}))
    return references


@dataclass(frozen=True)
class _Twin:
    match: Any  # twins.MatchedTwin
    twin_model: Any  # the twin's HeroModel


def _matched_twins(hero, models: list, args) -> dict[str, _Twin]:
    """``--twins``: each checkpoint's local twin at matched param skip on calibration text (loaded onto the same
    backbone when it is not among ``models``). Refused with --tau: the match is to each checkpoint's own tau."""
    from hero_core.eval import twins
    from hero_core.eval.calibration import calibration_blocks
    from hero_core.eval.sweep.run import with_checkpoint
    from hero_core.method.checkpoint import bundled_names

    if args.tau is not None:
        raise ValueError("--twins matches each twin to its checkpoint's own tau; leave out --tau")
    by_name = {m.checkpoint_name: m for m in models}
    loaded: dict[str, Any] = {}

    def load(name: str):
        return loaded.setdefault(name, with_checkpoint(hero, name))

    found = twins.match_twins(by_name, calibration_blocks(hero), load, bundled_names())
    return {name: _Twin(m, by_name[m.twin] if m.twin in by_name else load(m.twin)) for name, m in found.items()}
