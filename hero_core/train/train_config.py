"""One training run's settings (:class:`TrainConfig`, checked on construction), the fixed choices its fields take
(:data:`FIELD_CHOICES`, also the command line's choices) and the two schedules a run follows from them: the
learning rate (:func:`lr_at`) and the budget curriculum (:func:`target_skip_at`).

Its own module so the run's helpers (data, steps, guard, memory groups) and the readers of a run's settings
(recipes, the command line, the memory diagnosis) share it without importing the loop, :mod:`hero_core.train.train`,
which builds on all of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType

from hero_core.backbones.precision import DTYPES
from hero_core.choices import check_choice
from hero_core.method.config import BRANCH_SCALINGS, TRAINABLE_VARIANTS, HeroConfig
from hero_core.method.memory import MEMORY_KERNELS
from hero_core.train.health import ON_DEGRADE

BUDGETS = ("hinge", "hard", "controller")
BUDGET_SCOPES = ("sequence", "batch")


TRAIN_TARGETS = ("distill", "lm")
# The distillation target over the teacher's top-k: "topk_renorm" renormalises those k probabilities to sum to 1
# (so the student learns a sharper distribution than the teacher's, and its perplexity on dense-written text can
# fall below dense); "topk_tail" keeps them as they are and adds one bucket holding the rest of the teacher's mass,
# matched by the student's mass outside the top-k: a target whose optimum is the teacher itself.
DISTILL_TARGETS = ("topk_renorm", "topk_tail")
GATE_GRADIENTS = ("straight_through", "paper")
# The TrainConfig fields that take one of a fixed set of values: checked by TrainConfig, offered as the CLI's choices.
FIELD_CHOICES = MappingProxyType({
    "variant": TRAINABLE_VARIANTS, "target": TRAIN_TARGETS, "dtype": DTYPES, "branch_scaling": BRANCH_SCALINGS,
    "budget": BUDGETS, "budget_scope": BUDGET_SCOPES, "gate_gradient": GATE_GRADIENTS,
    "distill_target": DISTILL_TARGETS, "memory_kernel": MEMORY_KERNELS, "on_degrade": ON_DEGRADE,
})


@dataclass
class TrainConfig:
    """One training run. The measurements behind the defaults: docs/experiments/training-config-notes.md."""

    out: str  # checkpoint directory written at the end (and run state kept in out/_state)
    variant: str = "hero"
    target_skip: float = 0.25  # param skip (paper definition) the controller steers to
    steps: int = 300
    batch_size: int = 4
    seq_len: int = 128
    lr: float = 1e-4  # the paper's (1e-3 measured worse: see the notes)
    weight_decay: float = 0.01
    warmup: float = 0.03
    clip: float = 1.0
    alpha_init: float = 1e-3  # paper's alpha; the controller adapts it
    controller_gain: float = 0.5  # d log(alpha) per unit of skip error per step: 10x in ~18 steps at 25 % error
    alpha_max: float = 0.1
    target: str = "distill"  # distill | lm
    topk: int = 32
    distill_target: str = "topk_renorm"  # see DISTILL_TARGETS
    # Weight of assistant-reply tokens in the target loss (1: every token alike); hero_core.train.answer_tokens says
    # which tokens those are. Leans the routers towards keeping what a user reads, at the prompt's expense.
    answer_weight: float = 1.0
    # The depth memory (HeroConfig): its kernel, the softmax kernel's initial temperature (x 1/sqrt(d_m)) and
    # rho's initial value; memory_lr_scale multiplies the learning rate of the parameters that choose where the
    # memory reads (to_q, to_k, to_v, eta, the softmax temperature), whose gradients are 10-1000x smaller than
    # the heads' (docs/experiments/memory-diagnosis). The first three default to what HeroConfig does.
    memory_kernel: str = HeroConfig.memory_kernel
    memory_scale_init: float = HeroConfig.memory_scale_init
    rho_init: float = HeroConfig.rho_init
    memory_lr_scale: float = 1.0
    # The router's hidden widths (HeroConfig): both heads' and the state encoder's W_hd. 0 sizes them to the backbone
    # (hero_core.method.config.router_widths: 32 / 32 on SmolLM2-135M, the paper's 256 / 128 at d = 4096).
    head_hidden: int = 0
    d_encoder: int = 0
    data_mix: dict = field(default_factory=lambda: {"chat": 2.0, "code": 1.5, "reasoning": 1.0})
    data: str | None = None  # your own text (hero_core.corpus); None: the built-in mix of data_mix
    seed: int = 0
    # None: the steps read the training blocks in their cached order (every bundled run but one). A number
    # permutes that order with this seed and keeps the blocks themselves, so the dense teacher's cached targets
    # serve unchanged (``seed`` draws other blocks, and the teacher is computed again).
    order_seed: int | None = None
    save_every: int = 25
    routed_layers: list[int] | None = None
    storage_dtype: str = "float16"  # bundled checkpoints stay < 10 MB
    # Autocast precision of the forward/backward (master weights stay fp32): "auto" takes bf16 where a probe
    # shows it faster (hero_core.precision).
    dtype: str = "auto"
    threads: int = 0  # torch threads; 0 keeps torch's default (every core)
    data_blocks: int = 1600  # size of the (cached) training set in blocks; steps cycle through it
    # Mixed lengths: every ``long_every``-th step reads one block of ``long_seq_len`` tokens (per process) instead
    # of batch_size blocks of seq_len, drawn from ``long_blocks`` blocks of the same data with their own teacher
    # cache, so the routers meet the positions a long prompt reaches (0: every step reads seq_len blocks).
    long_seq_len: int = 0
    long_every: int = 4
    long_blocks: int = 160
    init_from: str | None = None  # start from this checkpoint's weights (e.g. a tighter budget from a looser one)
    # "straight_through": g also learns from FFN(u) - Adapter(u) on skipped tokens; "paper": the paper's pure
    # hard-branch gradient.
    gate_gradient: str = "straight_through"
    # "hinge": alpha * relu(mean_tokens(sum_j g_j) - E*)^2 with E* the executed FFNs per token that the target
    # skip leaves, alpha fixed (``hinge_alpha``): no pull below the budget, so no overshoot. "controller": the
    # paper's L_skip with alpha steered by the controller. "hard": the same hinge on the *executed* FFNs per
    # token, 1[g >= tau] counted with a straight-through gradient, so training runs at the skip the router
    # will run at.
    budget: str = "hard"
    hinge_alpha: float = 0.05
    # Budget curriculum: the target skip rises linearly from the starting skip (0, or the init checkpoint's
    # target) to ``target_skip`` over this share of the steps, so the router leaves the dense model gradually.
    budget_ramp: float = 0.3
    # "sequence": every training sequence meets the budget on its own; "batch": only the batch mean does.
    budget_scope: str = "sequence"
    # "unscaled": executed FFN / adapter outputs are not multiplied by g or 1 - g (see config.BRANCH_SCALINGS);
    # "paper": the paper's scaling. Recorded in the checkpoint's HeroConfig.
    branch_scaling: str = "unscaled"
    warm_start: bool = True  # fit adapters to their FFNs by local distillation before training (warmstart.py)
    # Fit the local head to the warm-started adapters' error so training starts at the budget with the oracle's
    # choices instead of identical gates that all cross tau together (warmstart.fit_gate_to_adapter_error).
    gate_warm_start: bool = True
    warm_start_tokens: int = 8192
    # Gate separation: weight of mean(relu(m - |g - tau|)) / m with m = 0.1, which pushes gates out of the band
    # around tau where bf16 rounding or a tiny input change flips the decision. 0 turns it off.
    separation: float = 0.0
    # The degradation guard (hero_core.train.health): every ``eval_every`` steps the target loss on ``eval_blocks``
    # held-out blocks; a run whose held-out loss stays more than ``degrade_tolerance`` above its best for
    # ``degrade_patience`` evaluations in a row has degraded, and ``on_degrade`` says what happens (rollback to
    # the best state with the learning rate x ``rollback_lr_factor``, stop there, or warn). 0 turns the guard off.
    eval_every: int = 25
    eval_blocks: int = 24
    # 15 %: the held-out loss of a healthy first stage moves by up to ~7 % between evaluations, because its realised
    # skip moves by 2-4 points around the budget; the degradations this guard is for rose by 40 % and more.
    degrade_tolerance: float = 0.15
    degrade_patience: int = 3
    on_degrade: str = "rollback"
    rollback_lr_factor: float = 0.5

    def __post_init__(self) -> None:
        for name, allowed in FIELD_CHOICES.items():
            check_choice(name, getattr(self, name), allowed)
        self._check_objective()
        self._check_guard()
        if not 0.0 <= self.budget_ramp <= 1.0:
            raise ValueError(f"budget_ramp must be in [0, 1], got {self.budget_ramp}")
        self._check_sizes()

    def _check_objective(self) -> None:
        """The budget, the memory's scales and the answer weight."""
        if not 0.0 <= self.target_skip < 1.0:
            raise ValueError(f"target_skip must be in [0, 1), got {self.target_skip}")
        if not self.memory_lr_scale > 0 or not self.memory_scale_init > 0 or not 0 < self.rho_init < 1:
            raise ValueError("memory_lr_scale and memory_scale_init must be positive, rho_init in (0, 1)")
        if not self.answer_weight > 0:
            raise ValueError(f"answer_weight must be positive, got {self.answer_weight}")

    def _check_guard(self) -> None:
        """The degradation guard's settings."""
        if self.eval_every < 0 or self.eval_blocks < 1 or self.degrade_patience < 1:
            raise ValueError("eval_every must be >= 0 (0: no guard), eval_blocks and degrade_patience positive")
        if not self.degrade_tolerance > 0 or not 0 < self.rollback_lr_factor <= 1:
            raise ValueError("degrade_tolerance must be positive and rollback_lr_factor in (0, 1]")

    def _check_sizes(self) -> None:
        """The router's widths, the counts of steps and blocks, the long blocks' length."""
        if any(not isinstance(w, int) or isinstance(w, bool) or w < 0 for w in (self.head_hidden, self.d_encoder)):
            raise ValueError("head_hidden and d_encoder must be integers >= 0 (0: sized to the backbone)")
        for name in ("steps", "batch_size", "seq_len", "topk", "save_every", "data_blocks", "long_every",
                     "long_blocks"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive")
        if self.long_seq_len and self.long_seq_len <= self.seq_len:
            raise ValueError(f"long_seq_len ({self.long_seq_len}) must exceed seq_len ({self.seq_len}), or be 0")

    def is_long_step(self, step: int) -> bool:
        """Whether step ``step`` (from 0) reads a long block (see ``long_seq_len``)."""
        return self.long_seq_len > 0 and (step + 1) % self.long_every == 0

    def tokens_per_process(self) -> int:
        """Tokens one process reads over the whole run, long steps included."""
        n_long = self.steps // self.long_every if self.long_seq_len else 0
        return (self.steps - n_long) * self.batch_size * self.seq_len + n_long * self.long_seq_len


# -- budget curriculum ----------------------------------------------------------------------------
def target_skip_at(step: int, cfg: TrainConfig, start_skip: float) -> float:
    """Budget curriculum: linear from ``start_skip`` to ``cfg.target_skip`` over the first budget_ramp of steps."""
    ramp_steps = cfg.budget_ramp * cfg.steps
    if ramp_steps < 1:
        return cfg.target_skip
    return start_skip + (cfg.target_skip - start_skip) * min(1.0, (step + 1) / ramp_steps)


# -- the loop ------------------------------------------------------------------------------------------
def lr_at(step: int, cfg: TrainConfig) -> float:
    warm = max(1, int(cfg.warmup * cfg.steps))
    if step < warm:
        return cfg.lr * (step + 1) / warm
    progress = (step - warm) / max(1, cfg.steps - warm)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))  # cosine to 10 %
