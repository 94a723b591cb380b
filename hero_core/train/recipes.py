"""The recipes that trained the bundled checkpoints, as data: one :class:`Run` per stage, each continuing from the
stage named in ``start``. ``make checkpoints`` (scripts/make_checkpoints.py) trains them on the embedded model;
``python -m hero_core train --recipe hero-10`` runs one of them, with the stages before it, on any backbone.

One recipe for every run (hero_core.train.TrainConfig's defaults): self-distillation from the dense model,
executed branches unscaled with the straight-through gate gradient, adapters warm-started by local
distillation, the hard budget with a curriculum, bf16 autocast where the CPU runs it faster.

* ``hero-10`` / ``local-10`` train in two stages: 750 steps from fresh routers with the batch-mean budget
  (``hero-10-s1``), then 1,220 steps on at half the peak learning rate with the same budget, for ~1 M tokens seen.
* ``-25`` / ``-40`` continue from ``hero-10-seq``, a second stage that held every sequence to the budget (it lost
  quality at 10 %, docs/experiments/two-stage-10), ``-40`` from its ``-25`` (the budget curriculum ramps from the
  start checkpoint's skip), so the tokens each has seen add up.
* the paper's ablations ``no_memread-10``, ``no_aux-10``, ``no_pos-10`` take hero-10's two stages; ``local-10`` is
  the ablation without history. ``no_pos-10``'s second stage reads the same blocks in another order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from hero_core.method.checkpoint_info import EXTRA_SEEDS, SEED_ARMS, WIDTH_ARMS
from hero_core.method.config import PAPER_ENCODER, PAPER_HEAD_HIDDEN, router_widths
from hero_core.method.trained_settings import trained_otherwise, trained_settings
from hero_core.train.train_config import TrainConfig


@dataclass(frozen=True)
class Run:
    variant: str
    target_skip: float
    steps: int  # of 4 x 128 tokens
    start: str | None = None  # run whose checkpoint this one continues from
    budget_scope: str = "sequence"
    bundled: bool = True  # False: an intermediate stage, kept under make_checkpoints' STAGE_DIR
    lr: float = TrainConfig.lr  # peak; a continuation starts lower so it refines instead of re-heating
    order_seed: int | None = None  # TrainConfig.order_seed: None reads the blocks in hero-10's order
    levers: tuple[tuple[str, object], ...] = ()  # further TrainConfig fields (memory kernel, target, ...)
    seed: int = 0  # TrainConfig.seed: the routers' initialisation and the draw of the training blocks
    folder: str = ""  # a subfolder of the bundled checkpoints ("seeds"), so the app's main list stays short
    # The router's hidden widths (TrainConfig.head_hidden, d_encoder): every run before recipe 7 used the paper's;
    # 0 sizes them to the backbone (hero_core.method.config.router_widths).
    head_hidden: int = PAPER_HEAD_HIDDEN
    d_encoder: int = PAPER_ENCODER


RUNS = {
    # bundled too: the reference the second stage is measured against (docs/results.md)
    "hero-10-s1": Run("hero", 0.10, 750, budget_scope="batch"),
    "local-10-s1": Run("no_history", 0.10, 750, budget_scope="batch"),
    # stage 2 holding every sequence to the budget: the start of -25 / -40, not bundled (it lost quality)
    "hero-10-seq": Run("hero", 0.10, 1220, "hero-10-s1", bundled=False),
    "local-10-seq": Run("no_history", 0.10, 1220, "local-10-s1", bundled=False),
    "hero-10": Run("hero", 0.10, 1220, "hero-10-s1", budget_scope="batch", lr=5e-5),
    "local-10": Run("no_history", 0.10, 1220, "local-10-s1", budget_scope="batch", lr=5e-5),
    "hero-25": Run("hero", 0.25, 300, "hero-10-seq"),
    "local-25": Run("no_history", 0.25, 300, "local-10-seq"),
    "hero-40": Run("hero", 0.40, 150, "hero-25"),
    "local-40": Run("no_history", 0.40, 150, "local-25"),
    # The ablations follow hero-10's two stages exactly, so each differs from it in one component only.
    "no_memread-10-s1": Run("no_memread", 0.10, 750, budget_scope="batch"),
    "no_aux-10-s1": Run("no_aux", 0.10, 750, budget_scope="batch"),
    "no_pos-10-s1": Run("no_pos", 0.10, 750, budget_scope="batch"),
    "no_memread-10": Run("no_memread", 0.10, 1220, "no_memread-10-s1", budget_scope="batch", lr=5e-5),
    "no_aux-10": Run("no_aux", 0.10, 1220, "no_aux-10-s1", budget_scope="batch", lr=5e-5),
    # Its second stage in hero-10's block order diverged after 300 steps; this one reads the same blocks in another
    # order, to tell the ablation from one trajectory, and diverged at the same step
    # (docs/experiments/no-pos-second-stage).
    "no_pos-10": Run("no_pos", 0.10, 1220, "no_pos-10-s1", budget_scope="batch", lr=5e-5, order_seed=1),
}
# Recipe 2 (the -r2 runs): hero-10's two stages with a selective depth memory: the softmax kernel at an initial
# temperature of 16/sqrt(d_m) and the memory's parameters at 30x the learning rate (docs/experiments/memory-probes).
# no_memread-10-r2 is its twin, trained the same way (same levers, same teacher cache), so the two differ in the
# memory read alone. The second stage runs 900 steps, not hero-10's 1,220, to fit the session that trained it:
# 845k training tokens against hero-10's 1.01 M (R2_STAGE_TWO); the comparison is conservative for recipe 2.
R2_STAGE_TWO = 900
MEMORY_R2 = (("memory_kernel", "softmax"), ("memory_scale_init", 16.0), ("memory_lr_scale", 30.0))
RUNS.update({
    "hero-10-r2-s1": Run("hero", 0.10, 750, budget_scope="batch", levers=MEMORY_R2),
    "hero-10-r2": Run("hero", 0.10, R2_STAGE_TWO, "hero-10-r2-s1", budget_scope="batch", lr=5e-5,
                      levers=MEMORY_R2),
    "no_memread-10-r2-s1": Run("no_memread", 0.10, 750, budget_scope="batch", levers=MEMORY_R2),
    "no_memread-10-r2": Run("no_memread", 0.10, R2_STAGE_TWO, "no_memread-10-r2-s1", budget_scope="batch", lr=5e-5,
                            levers=MEMORY_R2),
})
# Recipe 3 (hero-10-r3): recipe 2's second stage from the same first stage (hero-10-r2-s1), with assistant-reply
# tokens weighted 3x in the distillation loss (hero_core.train.answer_tokens): one lever against hero-10-r2, aimed at
# the answers a user reads (docs/experiments/answer-weight).
ANSWER_WEIGHT_R3 = (("answer_weight", 3.0),)
# no_memread-10-r3 is its twin, continuing no_memread-10-r2-s1 the same way.
RUNS["hero-10-r3"] = Run("hero", 0.10, R2_STAGE_TWO, "hero-10-r2-s1", budget_scope="batch", lr=5e-5,
                         levers=MEMORY_R2 + ANSWER_WEIGHT_R3)
RUNS["no_memread-10-r3"] = Run("no_memread", 0.10, R2_STAGE_TWO, "no_memread-10-r2-s1", budget_scope="batch",
                               lr=5e-5, levers=MEMORY_R2 + ANSWER_WEIGHT_R3)
# Recipe 4 (hero-10-r4): recipe 2's memory levers with hero-10's full second stage (1,220 steps, 1.01 M tokens), so it
# differs from hero-10 in the memory alone and is measured against hero-10 and local-10 on the same token count; the
# candidate default of the issue "A depth memory that learns". The answer weight of recipe 3 is left out: it kept no
# more answers than recipe 2 and moved skip off the answer tokens (docs/experiments/answer-weight).
RUNS["hero-10-r4"] = Run("hero", 0.10, 1220, "hero-10-r2-s1", budget_scope="batch", lr=5e-5, levers=MEMORY_R2)
RUNS["no_memread-10-r4"] = Run("no_memread", 0.10, 1220, "no_memread-10-r2-s1", budget_scope="batch", lr=5e-5,
                               levers=MEMORY_R2)
# Recipe 5 (issue "Answers that survive routing"): a third stage of 300 steps on hero-10-r4 (then the default) with
# mixed lengths, every fourth step one 1,024-token block instead of 4 x 128 (TrainConfig.long_seq_len), so the
# routers train on the positions long prompts reach. hero-10-r5 keeps the 10 % budget; hero-13-r5 raises it to
# 13 %, because the default's skip on answer tokens (6.8 %) falls short of its 10 % on text
# (docs/experiments/long-blocks).
LONG_BLOCKS = (("long_seq_len", 1024), ("long_every", 4), ("long_blocks", 160))
R5_STEPS = 300
RUNS["hero-10-r5"] = Run("hero", 0.10, R5_STEPS, "hero-10-r4", budget_scope="batch", lr=5e-5,
                         levers=MEMORY_R2 + LONG_BLOCKS)
RUNS["hero-13-r5"] = Run("hero", 0.13, R5_STEPS, "hero-10-r4", budget_scope="batch", lr=5e-5,
                         levers=MEMORY_R2 + LONG_BLOCKS)
# Recipe 6 (issue "Answers that survive routing", lever "more and broader data"): 300 steps on top of hero-10-r4 on
# the built-in mix plus short-answer chat prompts (hero_core.data.short_answers: facts, counts, sums, one-word and
# formatted answers, with the dense model's own replies), so the routers see replies whose value is one token.
# hero-10-r6c is its control, the same 300 steps on the built-in mix: the two differ in the data alone. Neither is
# bundled: neither kept more answers than the default (docs/experiments/short-answers).
QA_MIX = (("data_mix", {"chat": 2.0, "code": 1.5, "reasoning": 1.0, "qa": 1.0}),)
R6_STEPS = 300
RUNS["hero-10-r6"] = Run("hero", 0.10, R6_STEPS, "hero-10-r4", budget_scope="batch", lr=5e-5, bundled=False,
                         levers=MEMORY_R2 + QA_MIX)
RUNS["hero-10-r6c"] = Run("hero", 0.10, R6_STEPS, "hero-10-r4", budget_scope="batch", lr=5e-5, bundled=False,
                          levers=MEMORY_R2)
# Training seeds (issue "Does history help?"): the first stage of the three arms of the memory question -- HeRo with
# the default's memory levers, its local twin (no history) and its twin without the memory read -- again with
# seeds 1 and 2. The seed changes the routers' initialisation, the adapters' warm-start sample and the draw of the
# 3,000 training blocks (which code files and reasoning problems, in which order; so each seed has its own teacher
# cache); everything else is the recipe. The bundled runs of each arm are seed 0. Kept under checkpoints/seeds/.
RUNS.update({f"{arm}-seed{seed}": replace(RUNS[arm], seed=seed, folder="seeds")
             for seed in EXTRA_SEEDS for arm in SEED_ARMS})

# Recipe 7 (issue "A router that pays"): recipe 2's first stage and recipe 4's second with the router sized to its
# backbone (router_widths: 32 / 32 units on SmolLM2-135M against the paper's 256 / 128), so the router costs ~1.4 % of
# the model a token instead of 6.3 %; the runs differ from hero-10-r2-s1 / hero-10-r4 in the widths alone. Recipe 8
# is the narrowest arm of the width study, 16 / 16 units. local-10-r7 is the default's local twin at recipe 7's widths.
SIZED = {"head_hidden": 0, "d_encoder": 0}
NARROWEST = {"head_hidden": 16, "d_encoder": 16}
RUNS.update({
    "hero-10-r7-s1": replace(RUNS["hero-10-r2-s1"], **SIZED),
    "hero-10-r7": replace(RUNS["hero-10-r4"], start="hero-10-r7-s1", **SIZED),
    "hero-10-r8-s1": replace(RUNS["hero-10-r2-s1"], **NARROWEST),
    "local-10-r7-s1": replace(RUNS["local-10-s1"], **SIZED),
    "local-10-r7": replace(RUNS["local-10"], start="local-10-r7-s1", **SIZED),
})
# The higher budgets at recipe 7's widths: hero-25's 300 steps at 25 % (every sequence held to it) and hero-40's 150 at
# 40 %, continuing the sized hero-10-r7 with its memory levers. The paper-width hero-25 starts from hero-10-seq, a
# 1,220-step stage that is not bundled; these skip that stage, so they differ from hero-25 / hero-40 in the widths,
# the memory levers and that start.
RUNS.update({
    "hero-25-r7": replace(RUNS["hero-25"], start="hero-10-r7", levers=MEMORY_R2, **SIZED),
    "hero-40-r7": replace(RUNS["hero-40"], start="hero-25-r7", levers=MEMORY_R2, **SIZED),
})
# The width study's extra seeds (hero_core.eval.study.widths), under checkpoints/seeds/ as the memory question's are.
RUNS.update({f"{arm}-seed{seed}": replace(RUNS[arm], seed=seed, folder="seeds")
             for seed in EXTRA_SEEDS for arm in WIDTH_ARMS if f"{arm}-seed{seed}" not in RUNS})

DATA_BLOCKS = 3000  # 3000 x 128 tokens = 384k distinct tokens (chat : code : reasoning = 2 : 1.5 : 1), shared
# The TrainConfig fields a recipe's stages set (a run of --recipe refuses a flag for any of them).
RECIPE_FIELDS = ("variant", "target_skip", "steps", "budget_scope", "lr", "order_seed", "seed", "init_from",
                 "data_blocks", "memory_kernel", "memory_scale_init", "memory_lr_scale", "answer_weight",
                 "long_seq_len", "long_every", "long_blocks", "data_mix", "head_hidden", "d_encoder")


def stages(name: str) -> list[str]:
    """The runs recipe ``name`` trains, oldest first: the run and every run it continues from."""
    if name not in RUNS:
        raise ValueError(f"unknown recipe {name!r}; choose one of {', '.join(RUNS)}")
    chain = [name]
    while RUNS[chain[0]].start is not None:
        chain.insert(0, RUNS[chain[0]].start)
    return chain


def stage_config(run: Run, out: Path | str, *, steps: int, start_dir: Path | str | None, **settings) -> TrainConfig:
    """The TrainConfig of one stage, writing to ``out`` and starting from ``start_dir`` (the stage before it);
    ``settings`` are the run-wide fields (threads, backbone data, seq_len, ...), never a field the stage sets."""
    clash = sorted(set(settings) & set(RECIPE_FIELDS))
    if clash:
        raise ValueError(f"a recipe sets {', '.join(clash)} itself; leave them out")
    return TrainConfig(out=str(out), variant=run.variant, target_skip=run.target_skip, steps=steps,
                       budget_scope=run.budget_scope, lr=run.lr, order_seed=run.order_seed, seed=run.seed,
                       data_blocks=DATA_BLOCKS, init_from=str(start_dir) if start_dir else None,
                       head_hidden=run.head_hidden, d_encoder=run.d_encoder,
                       **dict(run.levers), **settings)


def already_trained(out: Path, run: Run, steps: int, data: str | None = None) -> bool:
    """A finished checkpoint of this exact stage, trained on ``data`` (None: the built-in mix), is at ``out``."""
    done = trained_settings(out)
    return done is not None and not trained_otherwise(done, stage_settings(run, steps, data, done["d_model"]))


def stage_settings(run: Run, steps: int, data: str | None, d_model: int | None) -> dict:
    """What a finished checkpoint of ``run``'s stage was trained with (the keys of
    :func:`hero_core.method.trained_settings.trained_settings`), its router widths as sized on a backbone of width
    ``d_model`` (a width of 0 is sized to it)."""
    scaled = router_widths(int(d_model or 1))
    return {"variant": run.variant, "target_skip": run.target_skip, "steps": steps, "budget_scope": run.budget_scope,
            "lr": run.lr, "order_seed": run.order_seed, "data": data, "seed": run.seed, **dict(run.levers),
            "init_from": run.start or "", "branch_scaling": TrainConfig.branch_scaling,
            "router_widths": (run.head_hidden or scaled[0], run.d_encoder or scaled[1])}
