"""Short training runs that choose the depth memory's levers (``python scripts/memory_probes.py --only NAME ...``).

Each probe trains a fresh ``hero`` router with hero-10-s1's recipe (10 % budget over the batch, lr 1e-4, the same
cached blocks) for the same few steps, changing one lever against ``baseline`` (the paper's elu1 kernel), and is
then scored on held-out text at its own tau: perplexity ratio per domain (95 % bootstrap interval over texts),
top-1 agreement, realised param skip; for the memory: the mean normalised read entropy (1 = uniform), how far rho
moved, the share of decisions that flip when the read is replaced by the uniform one, and the quality with that
uniform read. Results: docs/experiments/memory-probes/<name>.json; ``--report`` renders README.md there.
Two lanes (one thread each) run side by side on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from hero_core.backbones.loading import load_backbone
from hero_core.data.texts import DOMAINS
from hero_core.method.model import HeroModel, fresh_router, load_checkpoint
from hero_core.train.train import train
from hero_core.train.train_config import TrainConfig
from hero_core.words.ratio_text import ratio_text

ROOT = Path(__file__).resolve().parents[1]

OUT = ROOT / "docs" / "experiments" / "memory-probes"
SOFTMAX = {"memory_kernel": "softmax"}
PROBES = {  # name: (what it changes, TrainConfig overrides)
    "baseline": ("hero-10-s1's recipe, the paper's elu1 kernel", {}),
    "memory-lr-30": ("elu1, memory parameters (q, k, v, eta) at 30x the learning rate", {"memory_lr_scale": 30.0}),
    "softmax": ("softmax kernel over the stored keys, beta = 1/sqrt(d_m) at init", SOFTMAX),
    "softmax-beta-4": ("softmax kernel, beta = 4/sqrt(d_m) at init", {**SOFTMAX, "memory_scale_init": 4.0}),
    "softmax-beta-4-lr-30": ("softmax, beta 4/sqrt(d_m), memory at 30x the learning rate",
                             {**SOFTMAX, "memory_scale_init": 4.0, "memory_lr_scale": 30.0}),
    "softmax-beta-16-lr-30": ("softmax, beta 16/sqrt(d_m), memory at 30x the learning rate",
                              {**SOFTMAX, "memory_scale_init": 16.0, "memory_lr_scale": 30.0}),
    "softmax-beta-16": ("softmax, beta 16/sqrt(d_m), memory at the shared learning rate",
                        {**SOFTMAX, "memory_scale_init": 16.0}),
    "rho-0.8": ("elu1, rho initialised to 0.8 instead of 0.98", {"rho_init": 0.8}),
    "tail-target": ("elu1, distillation target top-k plus a tail bucket instead of renormalised top-k",
                    {"distill_target": "topk_tail"}),
}
STEPS = 200
DATA_BLOCKS = 3000  # the same data and teacher cache as scripts/make_checkpoints.py


def score(hero: HeroModel, limit: int) -> dict:
    from hero_core.analysis.read_ablation import read_effect
    from hero_core.data.texts import held_out_texts
    from hero_core.eval.frontier.curves import evaluate_points
    from hero_core.eval.methods import HeroMethod

    texts = held_out_texts(limit, hero)
    variant = hero.config.variant
    methods = [HeroMethod(hero, variant, name="learned"), HeroMethod(hero, variant, name="uniform",
                                                                      memory_read="uniform")]
    quality = evaluate_points(hero, methods, texts, max_tokens=256)
    effect = {d: read_effect(hero, texts[d], max_tokens=256) for d in DOMAINS}
    rho = hero.router.forgetting().detach()
    return {"held_out": quality["learned"], "uniform_read": quality["uniform"], "read_effect": effect,
            "rho": [float(x) for x in rho], "rho_moved": float((rho - hero.config.rho_init).abs().max())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    parser.add_argument("--only", nargs="*", default=list(PROBES), choices=list(PROBES), help="probes to run")
    parser.add_argument("--steps", type=int, default=STEPS, help="training steps of 4 x 128 tokens per probe")
    parser.add_argument("--limit", type=int, default=12, help="held-out texts per domain for the score")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--report", action="store_true", help="only render the table from the saved JSON")
    args = parser.parse_args()
    if args.report:
        return report()
    import torch

    from hero_core.backbones.threads import set_threads

    set_threads(args.threads)
    backbone = load_backbone(device="auto")
    hero = HeroModel(backbone, fresh_router(backbone), "training")
    OUT.mkdir(parents=True, exist_ok=True)
    for name in args.only:
        what, overrides = PROBES[name]
        run_dir = Path("/tmp") / "hero-memory-probes" / name
        cfg = TrainConfig(out=str(run_dir), target_skip=0.10, steps=args.steps, data_blocks=DATA_BLOCKS,
                          budget_scope="batch", threads=args.threads, **overrides)
        t0 = time.perf_counter()
        train(cfg, hero, progress=False)
        seconds = time.perf_counter() - t0
        rows = [json.loads(line) for line in (run_dir / "train_log.jsonl").read_text().splitlines()]
        scored = load_checkpoint(run_dir, hero.backbone)
        with torch.no_grad():
            result = score(scored, args.limit)
        tail = rows[-20:]
        result.update({"name": name, "changes": what, "overrides": overrides, "steps": args.steps,
                       "train_seconds": round(seconds, 1),
                       "train_loss_target": sum(r["loss_target"] for r in tail) / len(tail),
                       "train_param_skip": sum(r["param_skip"] for r in tail) / len(tail),
                       "train_memory_entropy": [rows[0].get("memory_entropy"), rows[-1].get("memory_entropy")]})
        (OUT / f"{name}.json").write_text(json.dumps(result, indent=1))
        (OUT / f"{name}.train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        print(name, json.dumps({d: round(q["perplexity_ratio"], 3) for d, q in result["held_out"].items()}),
              {d: round(e["read_entropy"], 3) for d, e in result["read_effect"].items()}, flush=True)
    return 0


def report() -> int:
    """The probe table, written between the ``probes`` markers of README.md (the findings around it are prose)."""
    from hero_core.reports.readme_block import replace_block

    lines = ["Generated by `python scripts/memory_probes.py --report` from the JSON beside it; the runs by "
             "`python scripts/memory_probes.py --only NAME ... --steps N` (two lanes side by side, one thread each). "
             "Each probe trains a fresh hero router with hero-10-s1's recipe (10 % budget over the batch, lr 1e-4, "
             "the same cached training blocks in the same order) and changes one lever against `baseline`. Scored on "
             "held-out text (the eval split of hero_core.data.texts) at tau = 0.5: perplexity ratio routed / dense "
             "with a 95 % bootstrap interval over texts. Read entropy: mean normalised entropy of the memory-attention "
             "rows with two or more entries (1 = uniform). Flips: share of (token, block) decisions that change when "
             "the read is replaced by the uniform average of the same values. rho moved: max |rho_j - rho_init|.", "",
             "| probe | changes | steps | param skip chat / code / reasoning % | ppl ratio chat | ppl ratio code | "
             "ppl ratio reasoning | top-1 % (mean) | read entropy (held-out, mean) | flips with uniform read % | "
             "ppl ratio with uniform read (chat / code / reasoning) | rho moved |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in PROBES:
        path = OUT / f"{name}.json"
        if not path.is_file():
            continue
        r = json.loads(path.read_text())
        q, u, e = r["held_out"], r["uniform_read"], r["read_effect"]
        skips = " / ".join(f"{100 * q[d]['param_skip']:.1f}" for d in DOMAINS)
        top1 = sum(q[d]["top1_agreement"] for d in DOMAINS) / len(DOMAINS)
        entropy = sum(e[d]["read_entropy"] for d in DOMAINS) / len(DOMAINS)
        flips = sum(e[d]["flip_share"] for d in DOMAINS) / len(DOMAINS)
        uniform = " / ".join(f"{u[d]['perplexity_ratio']:.3f}" for d in DOMAINS)
        lines.append(f"| {name} | {r['changes']} | {r['steps']} | {skips} | "
                     + " | ".join(ratio_text(q[d]) for d in DOMAINS)
                     + f" | {100 * top1:.1f} | {entropy:.3f} | {100 * flips:.2f} | {uniform} | {r['rho_moved']:.4f} |")
    readme = OUT / "README.md"
    if not replace_block(readme, "probes", lines) and "<!-- probes:start -->" not in readme.read_text():
        raise SystemExit(f"{readme} has no <!-- probes:start --> / <!-- probes:end --> markers")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
