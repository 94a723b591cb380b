"""Evaluate every bundled checkpoint, ablation and baseline, and write docs/bigbench.json (``make results``).

Methods (all on the embedded SmolLM2-135M-Instruct, each at its checkpoint's calibrated tau):
    hero-25, hero-40                     HeRo checkpoints
    local-25, local-40                   the no_history variant trained the same way (paper: w/o History)
    no_memread-25, no_aux-25, no_pos-25  the paper's ablations, each trained like hero-25 (local-25 is w/o History)
    hero-25/<ablation>                   inference-time ablations of hero-25: no_history, no_memread, no_aux, no_pos
    {static_pruning,random_skip,expert_choice}-{25,40}  baselines at the param skip the hero checkpoint realised on
                                         calibration text (see hero_core.eval.baselines)
    dense                                reference

Then ``scripts/results_report.py`` turns the JSON into docs/bigbench.md and the Retain-vs-skip plot.

Defaults fit this project's 2-core CPU budget (~30 min for 15 methods): the main BIG-bench suite and the
per-domain quality at 10 examples per task / texts per domain. The extended suite is left out because the
task-selection rule made it a subset of main (eval_tasks.json); generated-reasoning exact match because the
dense model scores 0 on it (Retain undefined). HumanEval pass@1 (greedy, ``--humaneval-limit`` problems, 20 by
default) runs for dense and the four checkpoints only: greedy generation for every baseline does not fit.
All three run with ``python -m hero_core eval --suites extended,reasoning,humaneval`` on any checkpoint.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hero_core import checkpoint as ckpt  # noqa: E402
from hero_core.backbones import load_backbone  # noqa: E402
from hero_core.calibration import calibration_blocks, realised_skip  # noqa: E402
from hero_core.data import domain_texts  # noqa: E402
from hero_core.eval import (  # noqa: E402
    HeroMethod,
    baselines,  # noqa: E402
    evaluate,
)
from hero_core.model import HeroModel  # noqa: E402

ABLATIONS = ("no_history", "no_memread", "no_aux", "no_pos")
CODE_METHODS = ("hero-25", "local-25", "hero-40", "local-40")  # HumanEval pass@1 (with dense as reference)
TRAINED_ABLATIONS = ("no_memread-10", "no_aux-10", "no_pos-10")  # bundled when `make checkpoints` has made them


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--suites", default="main,domains")
    parser.add_argument("--limit", type=int, default=10, help="examples per task / problems / texts")
    parser.add_argument("--humaneval-limit", type=int, default=20,
                        help="HumanEval problems for the checkpoints (0: skip the code suite)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "bigbench.json")
    args = parser.parse_args()

    backbone = load_backbone(device="auto")
    models: dict[str, HeroModel] = {}
    names = ["hero-25", "local-25", "hero-40", "local-40"]
    names += [n for n in TRAINED_ABLATIONS if n in ckpt.bundled_names()]
    for name in names:
        found = ckpt.read_checkpoint(name)
        router = ckpt.build_router(found)
        models[name] = HeroModel(backbone, router, name, found.training) if not models else \
            next(iter(models.values())).with_router(router, name, found.training)
    hero25 = models["hero-25"]

    methods = [HeroMethod(models[n], models[n].config.variant, name=n) for n in models]
    methods += [HeroMethod(hero25, v, name=f"hero-25/{v}") for v in ABLATIONS]
    calibration = [t for d in ("chat", "code", "reasoning") for t in domain_texts(d, "train", 4, hero=hero25)]
    blocks = calibration_blocks(hero25)
    matched = {}
    for budget, hero in (("25", models["hero-25"]), ("40", models["hero-40"])):
        skip = realised_skip(hero, blocks, "hero", hero.config.tau)
        matched[budget] = skip
        for kind, policy in baselines.matched_policies(hero, skip, calibration).items():
            methods.append(HeroMethod(hero, "hero", name=f"{kind}-{budget}", policy=policy))

    start = time.perf_counter()
    result = evaluate(hero25, variants=(), suites=args.suites.split(","), limit=args.limit, methods=methods,
                      progress=True, keep_samples=False)
    if args.humaneval_limit > 0:  # greedy generation is the expensive part: checkpoints only, not baselines
        code_methods = [HeroMethod(models[n], models[n].config.variant, name=n) for n in CODE_METHODS]
        code = evaluate(hero25, variants=(), suites=["humaneval"], limit=args.humaneval_limit,
                        methods=code_methods, progress=True, keep_samples=False)
        for name, suites in code["results"].items():
            result["results"].setdefault(name, {}).update(suites)
        result["summary"] += code["summary"]
        result["config"]["humaneval"] = {"limit": args.humaneval_limit, "methods": [m.name for m in code_methods]}
    result["config"]["wall_seconds"] = round(time.perf_counter() - start, 1)
    result["config"]["matched_param_skip"] = matched
    result["checkpoints"] = {n: {"tau": m.config.tau, "variant": m.config.variant,
                                 "training": {k: v for k, v in m.training_info.items() if k != "train_config"}}
                             for n, m in models.items()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True))
    print(f"wrote {args.out} in {result['config']['wall_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
