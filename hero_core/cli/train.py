"""Train routers on a backbone, from your own text or the built-in mix, one run or a bundled recipe
(``python -m hero_core train --help``)."""

from __future__ import annotations

import argparse
from dataclasses import MISSING, fields
from pathlib import Path

from hero_core.train.recipes import RUNS
from hero_core.train.train import train
from hero_core.train.train_config import FIELD_CHOICES, TrainConfig

# These TrainConfig fields as --field-name, in this order, with their help. Defaults and types come from the
# dataclass and choices from hero_core.train's FIELD_CHOICES, so none is written twice; a True flag becomes --no-field.
CLI_FIELDS: dict[str, str] = {
    "out": "checkpoint directory to write (a rerun of the same command resumes there)",
    "data": "your own text: a .txt, .jsonl ('text', or 'prompt'/'response' pairs) or .parquet file, or a folder "
            "of them; default: the built-in self-distilled chat / code / reasoning mix (chat left out for a "
            "tokenizer without a chat template)",
    "variant": "router to train: hero (with the depth memory) or an ablation (no_history is the local router)",
    "target_skip": "param skip (share of all parameters in skipped FFNs per token) the budget steers to",
    "steps": "optimiser steps", "batch_size": "sequences per step", "seq_len": "tokens per training sequence",
    "lr": "peak learning rate (warm-up, then cosine to 10 %%)",
    "alpha_init": "budget weight alpha at the start (--budget controller moves it)",
    "controller_gain": "--budget controller: change of log(alpha) per unit of skip error per step",
    "target": "distill: match the dense model's top-k next-token distribution; lm: the data's next token",
    "seed": "seed of the routers' initialisation, the built-in data draw and the sampling of --data blocks",
    "order_seed": "permute the order the steps read the training blocks in (the blocks stay the same)",
    "save_every": "save resumable state every this many steps",
    "routed_layers": "e.g. '0-29' or '1,3,5-9' (default: all blocks)",
    "dtype": "autocast precision; auto = bf16 where a probe shows it faster",
    "threads": "torch threads (0: every core)",
    "branch_scaling": "scale executed/skipped branches by g / 1-g (paper) or not (unscaled)",
    "budget_ramp": "share of steps over which the budget rises",
    "warm_start": "start adapters cold instead of fitting them to their FFNs",
    "separation": "weight of the gate-separation term",
    "gate_warm_start": "start the local head at zero (every gate equal) instead of fitting it to adapter error",
    "data_blocks": "training blocks of --seq-len tokens: the built-in mix draws this many, --data uses at most "
                   "this many (steps cycle through them)",
    "long_seq_len": "mixed lengths: every --long-every-th step reads one block of this many tokens instead of the "
                    "batch (0: off)",
    "long_every": "with --long-seq-len: how often a step reads a long block",
    "long_blocks": "with --long-seq-len: long blocks drawn (with their own teacher cache)",
    "init_from": "checkpoint to start from",
    "budget": "how the target skip is reached (see hero_core.train.TrainConfig)",
    "budget_scope": "each sequence meets the budget, or only the batch mean (see TrainConfig)",
    "hinge_alpha": "weight of the budget hinge (--budget hinge / hard)",
    "gate_gradient": "how the gate learns on skipped tokens (see TrainConfig)",
    "distill_target": "top-k renormalised (sharper than the teacher) or top-k plus a tail bucket (see TrainConfig)",
    "answer_weight": "weight of assistant-reply tokens in the target loss (1: all tokens alike; needs a chat "
                     "template)",
    "memory_kernel": "depth-memory kernel: elu1 (the paper's linear attention) or softmax (see HeroConfig)",
    "memory_scale_init": "softmax kernel: initial temperature beta as a multiple of 1/sqrt(d_m)",
    "rho_init": "initial forgetting factor rho of every routed block",
    "memory_lr_scale": "learning-rate multiplier for the memory's q, k, v projections, eta and temperature",
    "eval_every": "degradation guard: evaluate the held-out loss every this many steps (0: no guard)",
    "eval_blocks": "degradation guard: held-out blocks of --seq-len tokens it reads",
    "degrade_tolerance": "degradation guard: share above the best held-out loss that counts as worse",
    "degrade_patience": "degradation guard: evaluations in a row that are worse before the run has degraded",
    "on_degrade": "degradation guard: roll back to the best state and lower the learning rate, stop there, or warn",
    "rollback_lr_factor": "degradation guard: learning-rate multiplier at each rollback",
}
CLI_TYPES = {"order_seed": int, "data": str, "init_from": str}  # fields whose default (None) does not tell the type


def add_arguments(p: argparse.ArgumentParser) -> None:
    declared = {f.name: f for f in fields(TrainConfig)}
    for name, help_text in CLI_FIELDS.items():
        default, flag = declared[name].default, "--" + name.replace("_", "-")
        if default is MISSING:
            p.add_argument(flag, required=True, help=help_text)
        elif isinstance(default, bool):
            p.add_argument("--no-" + flag[2:] if default else flag, dest=name,
                           action="store_false" if default else "store_true", help=help_text)
        else:
            shown = "" if default is None else " (default: %(default)s)"
            p.add_argument(flag, type=CLI_TYPES.get(name, str if default is None else type(default)), default=default,
                           choices=FIELD_CHOICES.get(name), help=help_text + shown)
    p.add_argument("--recipe", default=None, choices=tuple(RUNS), metavar="NAME",
                   help="train a bundled checkpoint's recipe on this backbone (the stages it continues from train "
                        "first, under OUT/stages); it sets variant, target skip, steps, budget scope, lr, order "
                        "seed, data blocks and memory levers itself. NAME: " + ", ".join(RUNS))
    p.add_argument("--steps-scale", type=float, default=1.0,
                   help="--recipe: multiply every stage's steps (a quick trial of the recipe)")
    p.add_argument("--backbone", default=None,
                   help="local Hugging Face model directory (default: the embedded SmolLM2-135M-Instruct)")
    p.add_argument("--device", default="auto", help="auto (CUDA when present) | cpu | cuda")


def _given(args, name: str) -> bool:
    """Whether the user set this TrainConfig field on the command line (it differs from its default)."""
    return getattr(args, name) != next(f for f in fields(TrainConfig) if f.name == name).default


def check_recipe_flags(args) -> None:
    """Refuse, before anything loads, a flag for a setting the recipe's stages fix themselves."""
    from hero_core.train.recipes import RECIPE_FIELDS, stages

    stages(args.recipe)  # an unknown name fails here
    clash = [f"--{name.replace('_', '-')}" for name in RECIPE_FIELDS if name in CLI_FIELDS and _given(args, name)]
    if clash:
        raise ValueError(f"--recipe {args.recipe} sets {', '.join(clash)} itself: leave them out")


def run_recipe(args, hero, layers) -> Path:
    """The recipe's stages, oldest first: earlier ones under OUT/stages/NAME, the last one in OUT itself."""
    from hero_core.train.recipes import RECIPE_FIELDS, RUNS, already_trained, stage_config, stages

    chain = stages(args.recipe)
    settings = {name: getattr(args, name) for name in CLI_FIELDS if name not in RECIPE_FIELDS and name != "out"}
    out = Path(args.out)
    where = {name: out / "stages" / name for name in chain[:-1]} | {chain[-1]: out}
    for name in chain:
        run = RUNS[name]
        steps = max(1, round(run.steps * args.steps_scale))
        if already_trained(where[name], run, steps, args.data):  # written only when a stage has finished
            print(f"{name}: already trained in {where[name]}, skipped")
            continue
        cfg = stage_config(run, where[name], steps=steps, start_dir=where[run.start] if run.start else None,
                           **settings | {"routed_layers": layers})
        print(f"{name}: {steps} steps, variant {run.variant}, target skip {run.target_skip:g}")
        train(cfg, hero)
    return out


def run_cli(args) -> int:
    from hero_core.backbones.loading import load_backbone
    from hero_core.method.config import parse_layers
    from hero_core.method.model import HeroModel, fresh_router

    if args.recipe is not None:
        check_recipe_flags(args)
    backbone = load_backbone(args.backbone, device=args.device)
    layers = parse_layers(args.routed_layers, backbone.model.config.num_hidden_layers) if args.routed_layers else None
    hero = HeroModel(backbone, fresh_router(backbone, routed_layers=layers), "training")
    if args.recipe is not None:
        out = run_recipe(args, hero, layers)
    else:
        cfg = TrainConfig(**{name: getattr(args, name) for name in CLI_FIELDS} | {"routed_layers": layers})
        out = train(cfg, hero)
    print(f"checkpoint written to {out}")
    return 0
