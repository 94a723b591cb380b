"""Short training runs that choose the recipe (``python scripts/recipe_probes.py [--only NAME ...]``).

Each probe trains a fresh ``hero`` router at the 10 % budget for the same few steps as the others, changing
one lever of the recipe against ``recipe`` (hero_core.train.train.TrainConfig's defaults), and is then scored on
held-out text at its own tau: perplexity ratio routed / dense per domain (bootstrap 95 % interval over texts),
top-1 agreement, realised param skip and the share of gates within 0.1 of tau. Results go to
docs/experiments/recipe-probes/<name>.json; ``--report`` renders the table in README.md of that folder.
Two lanes (``--only a b`` and ``--only c d``, one thread each) run side by side on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from hero_core.backbones.loading import load_backbone
from hero_core.method.model import HeroModel, fresh_router, load_checkpoint
from hero_core.train.train import train
from hero_core.train.train_config import TrainConfig
from hero_core.words.ratio_text import ratio_text

ROOT = Path(__file__).resolve().parents[1]

OUT = ROOT / "docs" / "experiments" / "recipe-probes"
PROBES = {  # name: (what it changes, TrainConfig overrides)
    "recipe": ("unscaled branches, warm-started adapters and gates, hard budget at 10 %, bf16 (lr 1e-3)", {}),
    "paper-scaling": ("as recipe, but executed FFN scaled by g, skipped adapter by 1 - g (the paper's form)",
                      {"branch_scaling": "paper"}),
    "cold-adapters": ("adapters start at zero (plain skip) instead of the local-distillation fit",
                      {"warm_start": False}),
    "separation": ("plus the gate-separation term (weight 0.05)", {"separation": 0.05}),
    "soft-hinge": ("budget on the soft gate sum instead of the executed FFNs (previous default)",
                   {"budget": "hinge"}),
    "fp32": ("fp32 instead of bf16 autocast (throughput reference)", {"dtype": "fp32"}),
}
STEPS = 100
PROBE_LR = 1e-3  # the rate these probes ran at (the bundled checkpoints then moved to 1e-4: see the report)
DATA_BLOCKS = 3000  # the same data and teacher cache as scripts/make_checkpoints.py


def score(hero: HeroModel, limit: int) -> dict:
    from hero_core.data.texts import held_out_texts
    from hero_core.eval.frontier.curves import evaluate_points
    from hero_core.eval.methods import HeroMethod

    texts = held_out_texts(limit, hero)
    method = HeroMethod(hero, hero.config.variant, name="probe")
    return evaluate_points(hero, [method], texts, max_tokens=256)["probe"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="*", default=list(PROBES))
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--limit", type=int, default=12, help="held-out texts per domain for the score")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--report", action="store_true", help="only render the table from the saved JSON")
    parser.add_argument("--at-init", action="store_true",
                        help="score warm vs cold adapters before training (at-init.json)")
    args = parser.parse_args()
    if args.report:
        return report()
    if args.at_init:
        return at_init(args.limit)
    import torch

    from hero_core.backbones.threads import set_threads

    set_threads(args.threads)
    backbone = load_backbone(device="auto")
    hero = HeroModel(backbone, fresh_router(backbone), "training")
    OUT.mkdir(parents=True, exist_ok=True)
    for name in args.only:
        what, overrides = PROBES[name]
        run_dir = Path("/tmp") / "hero-probes" / name
        cfg = TrainConfig(out=str(run_dir), target_skip=0.10, steps=args.steps, data_blocks=DATA_BLOCKS, lr=PROBE_LR,
                          threads=args.threads, **overrides)
        t0 = time.perf_counter()
        train(cfg, hero, progress=False)
        seconds = time.perf_counter() - t0
        rows = [json.loads(line) for line in (run_dir / "train_log.jsonl").read_text().splitlines()]
        scored = load_checkpoint(run_dir, hero.backbone)
        with torch.no_grad():
            quality = score(scored, args.limit)
        tail = rows[-20:]
        result = {"name": name, "changes": what, "overrides": overrides, "steps": args.steps,
                  "train_seconds": round(seconds, 1),
                  "tokens_per_s": sum(r["tokens_per_s"] for r in tail) / len(tail),
                  "train_param_skip": sum(r["param_skip"] for r in tail) / len(tail),
                  "near_tau": sum(r["near_tau"] for r in tail) / len(tail),
                  "warm_start": scored.training_info.get("warm_start"), "held_out": quality}
        (OUT / f"{name}.json").write_text(json.dumps(result, indent=1))
        print(name, json.dumps({d: round(q["perplexity_ratio"], 3) for d, q in quality.items()}), flush=True)
    return 0


def at_init(limit: int) -> int:
    """Held-out quality of the router before any end-to-end step: warm-started vs cold adapters, each with the
    gate fitted to that adapter's error at the 10 % budget (the starting point each recipe trains from)."""
    import torch

    from hero_core.train.train_data import adapter_cache_path, training_blocks
    from hero_core.train.warmstart import cached_warm_start, fit_gate_to_adapter_error

    backbone = load_backbone(device="auto")
    hero = HeroModel(backbone, fresh_router(backbone, branch_scaling="unscaled"), "init")
    cfg = TrainConfig(out="/tmp/hero-probes/init", target_skip=0.10, data_blocks=DATA_BLOCKS)
    blocks = training_blocks(hero, cfg, DATA_BLOCKS)
    share = cfg.target_skip * hero.profile.total_params / hero.profile.ffn_params / hero.config.n_routed
    rows = {}
    for name in ("warm adapters", "cold adapters (plain skip)"):
        router = fresh_router(backbone, branch_scaling="unscaled")
        if name.startswith("warm"):
            cache = adapter_cache_path(hero, cfg, router.config.adapter_rank)
            cached_warm_start(hero.model, router, blocks, cache, max_tokens=cfg.warm_start_tokens)
        gate = fit_gate_to_adapter_error(hero.model, router, blocks, share)
        model = hero.with_router(router, name)
        with torch.no_grad():
            rows[name] = {"gate_warm_start": gate, "held_out": score(model, limit)}
        print(name, json.dumps({d: round(q["perplexity_ratio"], 3) for d, q in rows[name]["held_out"].items()}),
              flush=True)
    (OUT / "at-init.json").write_text(json.dumps(rows, indent=1))
    return 0


def report() -> int:
    lines = ["# Recipe probes", "", "Generated by `python scripts/recipe_probes.py --report` from the JSON beside it. "
             "Each probe trains a fresh hero router at the 10 % budget for the same steps (4 x 128 tokens each) "
             "and changes one lever against `recipe`; scored on held-out text (hero_core.data.texts eval split) at "
             "tau = 0.5, perplexity ratio routed / dense with a 95 % bootstrap interval over texts.", "",
             "| probe | changes | tokens/s (train) | param skip held-out chat / code / reasoning % | "
             "ppl ratio chat | ppl ratio code | ppl ratio reasoning | top-1 % (mean) | gates within 0.1 of tau |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in PROBES:
        path = OUT / f"{name}.json"
        if not path.is_file():
            continue
        r = json.loads(path.read_text())
        q = r["held_out"]
        skips = " / ".join(f"{100 * q[d]['param_skip']:.1f}" for d in ("chat", "code", "reasoning"))
        ratios = [ratio_text(q[d]) for d in ("chat", "code", "reasoning")]
        top1 = sum(q[d]["top1_agreement"] for d in q) / len(q)
        lines.append(f"| {name} | {r['changes']} | {r['tokens_per_s']:.0f} | {skips} | " + " | ".join(ratios)
                     + f" | {100 * top1:.1f} | {r['near_tau']:.2f} |")
    init_path = OUT / "at-init.json"
    if init_path.is_file():
        lines += ["", "## Before training: warm-started against cold adapters", "",
                  "The router as each recipe starts it, scored without any end-to-end step: the gate is fitted to the "
                  "adapter's error at the 10 % budget (for cold adapters, which add nothing, that error is the FFN's "
                  "own output), tau = 0.5. `python scripts/recipe_probes.py --at-init`.", "",
                  "| adapters | skip share fitted / asked | decisions as the oracle's | param skip held-out "
                  "chat / code / reasoning % | ppl ratio chat | ppl ratio code | ppl ratio reasoning |",
                  "|---|---|---|---|---|---|---|"]
        for name, r in json.loads(init_path.read_text()).items():
            q, g = r["held_out"], r["gate_warm_start"]
            skips = " / ".join(f"{100 * q[d]['param_skip']:.1f}" for d in ("chat", "code", "reasoning"))
            ratios = [ratio_text(q[d]) for d in ("chat", "code", "reasoning")]
            lines.append(f"| {name} | {g['predicted_skip_share']:.3f} / {g['skip_share_target']:.3f} | "
                         f"{100 * g['decision_agreement_with_oracle']:.1f} % | {skips} | " + " | ".join(ratios) + " |")
    lines += ["", "The probes above ran at lr 1e-3. Scored before any training step (the table above), the "
              "warm-started router was already better than after 100 steps at that rate, so the bundled checkpoints "
              "train at the paper's lr 1e-4; the first steps of the abandoned 1e-3 runs of hero-10 / local-10 are in "
              "`docs/experiments/lr-1e-3/`."]
    lines += ["", "Collapse without the gate warm start (zero-initialised local head: every gate equal): "
              "`uniform-gate-init.train_log.jsonl` (unscaled) and `uniform-gate-init-paper-scaling.train_log.jsonl`, "
              "the first 26 steps of the runs that showed it (param skip 0 % -> 28 % in two steps, distillation "
              "loss 1.5 -> 7)."]
    (OUT / "README.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
