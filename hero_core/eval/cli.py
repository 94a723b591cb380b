"""``python -m hero_core eval``: the suites, task selection, BIG-bench fetching and lm-eval runs.

    python -m hero_core eval --checkpoint hero-25 --variants hero,no_history,dense \\
        --suites main,extended,humaneval,reasoning,domains --limit 50 --out results.json
    python -m hero_core eval --fetch-bigbench          # once: download BIG-bench, extract candidates
    python -m hero_core eval --select-tasks            # once, dense only: rewrite eval_tasks.json
    python -m hero_core eval --lm-eval-task hero_core/lm_eval_tasks/hero_reasoning_mc.yaml --variants hero,dense
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from ..config import INFERENCE_VARIANTS
from . import bigbench, humaneval
from . import suites as registry
from .harness import run_lm_eval
from .runner import evaluate, select_bigbench_tasks

DESCRIPTION = "Evaluation: BIG-bench multiple choice with Retain, HumanEval, generated reasoning, per-domain quality."


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``python -m hero_core eval``: the suites, task selection, BIG-bench fetching and lm-eval runs."""
    p.description = DESCRIPTION
    p.add_argument("--checkpoint", default=None, help="bundled name (hero-25, …) or checkpoint directory")
    p.add_argument("--backbone", default=None, help="local HF model directory (default: embedded SmolLM2-135M)")
    p.add_argument("--quantization", choices=["nf4"], default=None)
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    p.add_argument("--variants", default="hero,dense",
                   help=f"comma-separated, from {', '.join(INFERENCE_VARIANTS)} (dense always runs as reference)")
    p.add_argument("--suites", default="main", help=f"comma-separated, from {', '.join(registry.SUITES)}")
    p.add_argument("--limit", type=int, default=50, help="examples per task / problems / texts per domain")
    p.add_argument("--tau", type=float, default=None, help="gate threshold (default: the checkpoint's)")
    p.add_argument("--humaneval-tokens", type=int, default=300, help="max new tokens per HumanEval completion")
    p.add_argument("--humaneval-style", choices=("auto",) + humaneval.PROMPT_STYLES, default="auto",
                   help="completion: raw prompt (original protocol); chat: instruction + code fence; "
                        "auto: chat when the model has a chat template")
    p.add_argument("--no-samples", action="store_true", help="leave generated completions out of the JSON")
    p.add_argument("--out", type=Path, default=None, help="write the results JSON here")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (use 1 when another job shares the cores: oversubscription is ~7x slower)")
    p.add_argument("--select-tasks", action="store_true",
                   help="run the BIG-bench task-selection rule on the dense model and write hero_core/eval_tasks.json")
    p.add_argument("--selection-examples", type=int, default=bigbench.SELECTION_EXAMPLES)
    p.add_argument("--fetch-bigbench", action="store_true", help="download BIG-bench once and extract the candidates")
    p.add_argument("--lm-eval-task", type=Path, default=None,
                   help="an lm-evaluation-harness task YAML to run on each variant (needs lm-eval installed)")


def run_cli(args) -> int:
    progress = not args.quiet
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be at least 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    if args.fetch_bigbench:
        paths = bigbench.ensure_tasks(bigbench.all_candidates())
        print(f"BIG-bench {bigbench.BIGBENCH_VERSION}: {len(paths)} candidate tasks under {bigbench.tasks_dir()}")
        if not (args.select_tasks or args.lm_eval_task):
            return 0
    from ..cli import _load

    hero = _load(args)
    if args.select_tasks:
        out = args.out if args.out is not None else registry.EVAL_TASKS_FILE
        record = select_bigbench_tasks(hero, n=args.selection_examples, out=out, progress=progress)
        for name, r in record["dense"].items():
            print(f"{name:42s} {r['pool']:11s} acc {100 * r['accuracy']:5.1f}  chance {100 * r['chance']:5.1f}  "
                  f"{'pass' if name in record['passed'] else '-'}")
        print(f"main: {', '.join(record['main'])}\nextended: {', '.join(record['extended'])}")
        return 0
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in variants:
        if v not in INFERENCE_VARIANTS:
            raise ValueError(f"unknown variant {v!r}; choose from {', '.join(INFERENCE_VARIANTS)}")
    if args.lm_eval_task is not None:
        output = {"lm_eval": [run_lm_eval(hero, args.lm_eval_task, v, tau=args.tau, limit=args.limit)
                              for v in variants]}
        print(json.dumps(output, indent=2))
        if args.out:
            args.out.write_text(json.dumps(output, indent=2) + "\n", encoding="utf-8")
        return 0
    suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    result = evaluate(hero, variants, suites, args.limit, tau=args.tau, progress=progress,
                      humaneval_tokens=args.humaneval_tokens, humaneval_style=args.humaneval_style,
                      keep_samples=not args.no_samples)
    _print_summary(result)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"results written to {args.out}")
    return 0


def _print_summary(result: dict) -> None:
    print(f"{'method':14s} {'suite':18s} {'score':>8s} {'retain %':>9s} {'param skip %':>13s} {'net %':>7s} "
          f"{'FLOPs saved %':>14s}")
    for row in result["summary"]:
        def pct(v):
            return f"{100 * v:.2f}" if isinstance(v, (int, float)) else "-"

        retain_text = f"{row['retain']:.2f}" if isinstance(row.get("retain"), (int, float)) else "-"
        score = f"{row['score']:.4f}" if isinstance(row.get("score"), (int, float)) else "-"
        print(f"{row['method']:14s} {row['suite']:18s} {score:>8s} {retain_text:>9s} "
              f"{pct(row.get('param_skip')):>13s} {pct(row.get('net_param_skip')):>7s} "
              f"{pct(row.get('flop_share_saved')):>14s}")
