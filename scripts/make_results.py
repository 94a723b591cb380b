"""Retain of every headline checkpoint, at its own tau and against its local twin at matched compute
(``make results``): docs/bigbench.json.

Runs, all on the embedded SmolLM2-135M-Instruct (one backbone, routers swapped):

    dense                     the reference every Retain divides by
    <checkpoint>              every headline checkpoint at its own tau (hero_core.eval.twins.headline_checkpoints:
                              the bundled hero-/local- checkpoints and recipe 2's no_memread twin)
    <twin>@<checkpoint>       the checkpoint's local twin (hero-10 -> local-10, hero-10-r2 -> local-10) at the tau
                              whose param skip on calibration text equals the checkpoint's (hero_core.eval.twins)
    --ablations               the trained ablations no_memread-10, no_aux-10, no_pos-10 at their own tau
    --baselines               static pruning, random skip, expert choice at hero-25's / hero-40's calibration skip

Suites: the BIG-bench main suite (hero_core/eval_tasks.json) at ``--limit`` examples per task, and HumanEval pass@1
on the first ``--humaneval-limit`` problems (greedy). HumanEval runs dense first and the routed runs only when dense
passes at least one problem: otherwise its ratio is undefined for every method (Retain leaves the task out), which
is recorded rather than paid for (``--humaneval-all`` runs them anyway). Retain with its 95 % bootstrap intervals
(hero_core.eval.suites.retain) is stored under ``retain``; ``scripts/results_report.py`` renders docs/bigbench.md and
the README's headline block.

Rough run times on this project's 2-core CPU (2 torch threads, nothing else running; ~2x with a training run beside
it): matching the twins ~1 min each (8 twins with recipe 2 bundled); BIG-bench at 10 examples per task ~25 s per run
(~21 runs: ~10 min); HumanEval dense, 20 problems, ~5-7 min; if dense passes any, every run adds as much (~2 h).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from hero_core.backbones.loading import load_backbone
from hero_core.data.texts import domain_texts
from hero_core.eval import baselines
from hero_core.eval.calibration import calibration_blocks
from hero_core.eval.methods import HeroMethod
from hero_core.eval.suites.retain import retain_summary
from hero_core.eval.suites.runner import evaluate
from hero_core.eval.sweep.run import with_checkpoint
from hero_core.eval.twins import headline_checkpoints, match_twins
from hero_core.method import checkpoint as ckpt
from hero_core.method.model import HeroModel, load_checkpoints
from hero_core.method.tau_search import realised_skip

ROOT = Path(__file__).resolve().parents[1]

TRAINED_ABLATIONS = ("no_memread-10", "no_aux-10", "no_pos-10")
BASELINE_BUDGETS = ("hero-25", "hero-40")


def baseline_methods(models: dict[str, HeroModel], blocks) -> tuple[list[HeroMethod], dict[str, float]]:
    """Policy baselines at the param skip hero-25 and hero-40 realise on the calibration blocks."""
    methods, skips = [], {}
    for name in BASELINE_BUDGETS:
        if name not in models:
            continue
        hero = models[name]
        texts = [t for d in ("chat", "code", "reasoning") for t in domain_texts(d, "train", 4, hero=hero)]
        skips[name] = realised_skip(hero, blocks, hero.config.variant, hero.config.tau)
        for kind, policy in baselines.matched_policies(hero, skips[name], texts).items():
            methods.append(HeroMethod(hero, "hero", name=f"{kind}-{name.split('-')[1]}", policy=policy))
    return methods, skips


def run_humaneval(hero: HeroModel, methods: list[HeroMethod], limit: int, run_all: bool) -> dict:
    """HumanEval of dense, then of ``methods`` only when dense passes a problem (or ``run_all``); the result says
    which happened under ``config["humaneval"]``."""
    dense = evaluate(hero, variants=(), suites=["humaneval"], limit=limit, progress=True, keep_samples=False)
    passed = dense["results"]["dense"]["humaneval"]["passed"]
    if passed == 0 and not run_all:
        dense["config"]["humaneval"] = {"limit": limit, "methods": [], "skipped": (
            f"dense passes 0 of the first {limit} problems, so HumanEval's routed / dense ratio is undefined "
            "for every method; the routed runs were left out (--humaneval-all runs them)")}
        return dense
    code = evaluate(hero, variants=(), suites=["humaneval"], limit=limit, methods=methods, progress=True,
                    keep_samples=False)
    code["config"]["humaneval"] = {"limit": limit, "methods": [m.name for m in methods]}
    return code


def merge(result: dict, extra: dict) -> None:
    """Add another evaluate() result's suites and summary rows to ``result``."""
    for name, suites in extra["results"].items():
        result["results"].setdefault(name, {}).update(suites)
    result["summary"] += extra["summary"]
    result["config"]["suites"] += [s for s in extra["config"]["suites"] if s not in result["config"]["suites"]]
    result["config"]["humaneval"] = extra["config"]["humaneval"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoints", default=None,
                        help="comma-separated checkpoints (default: every headline checkpoint bundled)")
    parser.add_argument("--suites", default="main", help="BIG-bench / other suites of hero_core.eval (not humaneval)")
    parser.add_argument("--limit", type=int, default=10, help="examples per BIG-bench task")
    parser.add_argument("--humaneval-limit", type=int, default=20, help="HumanEval problems (0: no code suite)")
    parser.add_argument("--humaneval-all", action="store_true",
                        help="run HumanEval for every method even when dense passes none")
    parser.add_argument("--ablations", action="store_true", help=f"also {', '.join(TRAINED_ABLATIONS)}")
    parser.add_argument("--baselines", action="store_true", help="also the policy baselines at hero-25/40's skip")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "bigbench.json")
    args = parser.parse_args()

    bundled = ckpt.bundled_names()
    names = args.checkpoints.split(",") if args.checkpoints else headline_checkpoints(bundled)
    extra = [n for n in TRAINED_ABLATIONS if args.ablations and n in bundled]
    models = load_checkpoints(names + extra, load_backbone(device="auto"))
    first = models[names[0]]
    blocks = calibration_blocks(first)

    start = time.perf_counter()

    def load(name: str) -> HeroModel:  # a twin the checkpoint list left out (e.g. --checkpoints hero-10)
        if name not in models:
            models[name] = with_checkpoint(first, name)
        return models[name]

    matched = match_twins({n: models[n] for n in names}, blocks, load, bundled)
    runs = [HeroMethod(models[n], models[n].config.variant, name=n) for n in names + extra]
    twins = [HeroMethod(models[m.twin], models[m.twin].config.variant, m.tau, name=m.method)
             for m in matched.values()]
    policies, policy_skips = baseline_methods(models, blocks) if args.baselines else ([], {})
    suites = [s for s in args.suites.split(",") if s and s != "humaneval"]
    result = evaluate(first, variants=(), suites=suites, limit=args.limit, methods=runs + twins + policies,
                      progress=True, keep_samples=False)
    if args.humaneval_limit > 0:  # generation is the slow part: checkpoints and twins, not the policy baselines
        merge(result, run_humaneval(first, runs + twins, args.humaneval_limit, args.humaneval_all))

    result["config"]["wall_seconds"] = round(time.perf_counter() - start, 1)
    result["config"]["calibration"] = {"blocks": list(blocks.shape), "source": "hero_core.eval.calibration"
                                                                                ".calibration_blocks"}
    result["config"]["matched_param_skip"] = policy_skips
    result["matched"] = {n: m.to_dict() for n, m in matched.items()}
    result["checkpoints"] = {n: {"tau": m.config.tau, "variant": m.config.variant,
                                 "training": {k: v for k, v in m.training_info.items() if k != "train_config"}}
                             for n, m in models.items() if n in names + extra}
    result["retain"] = retain_summary(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True))
    print(f"wrote {args.out} in {result['config']['wall_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
