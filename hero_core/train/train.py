"""Train HeRo routers and adapters on a frozen backbone (``python -m hero_core train``).

Objective (docs/method.md, Eq. 11): ``L = L_target + alpha * L_skip``.

* ``L_target`` defaults to **self-distillation**: cross-entropy against the dense model's own next-token
  distribution (its top-k, renormalised, k = 32), precomputed once per data set and shared by every run.
  Why: the routed model is judged by how well it keeps the dense model's behaviour (Retain, KL, top-1
  agreement), and the full distribution carries far more signal per token than one label; at init the
  target loss is the teacher's entropy (~1.45 nats on our mix), so distance from dense is read off the log.
  ``--target lm`` uses the data's next tokens instead.
* **Budget** (``--budget``). Default ``hinge``: ``alpha * relu(mean_tokens(sum_j g_j) - E*)^2`` with E* the
  FFNs per token the target skip leaves, alpha fixed: no pull once the soft FFN use meets the budget.
  ``controller``: the paper's ``L_skip = mean_tokens (sum_j g_j)^2`` with ``log alpha`` moved by
  ``gain * (target_skip - realised_skip)`` each step; in our runs it swung +-20 points around its target.
  Either way a checkpoint can then get tau calibrated to the budget (hero_core.calibration).
* **Gate gradient** (``--gate-gradient``). Default ``straight_through``: the forward value is the hard
  branch, but g also receives d out / d g = FFN(u) - Adapter(u) on skipped tokens; ``paper``: only the
  g / 1 - g scaling carries gradient (every gate collapsed below tau at step 16 in our CPU-sized run).

Only router and adapter parameters train. The loop runs on CPU or one GPU, and unchanged under
``accelerate launch`` on several (gradients are averaged across processes explicitly, because the
router is called through the routing context rather than through a DDP-wrapped forward).
State (router, optimiser, step, alpha, RNG) is saved every ``--save-every`` steps, atomically, and a
rerun of the same command resumes from it.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import torch
import torch.nn.functional as F

from ..core.choices import check_choice
from ..core.config import BRANCH_SCALINGS, TRAINABLE_VARIANTS, HeroConfig
from ..core.memory import MEMORY_KERNELS
from ..core.model import HeroModel, load_hero
from ..core.precision import DTYPES
from .health import ON_DEGRADE
from .losses import (
    budget_hinge,
    distill_loss,
    hard_executed,
    near_tau_share,
    separation_penalty,
    usage_penalty,
    weighted_mean,
)
from .train_data import block_order
from .train_guard import attach_guard, check_health_if_due, keep_best_if_degraded
from .train_memory import memory_log_row
from .train_steps import (
    BlockSet,
    RunClock,
    TrainingRun,
    progress_bar,
    resume,
    save_state_if_due,
    set_threads_and_seeds,
    set_up_run,
    warm_start_or_restore,
    write_checkpoint,
)

log = logging.getLogger(__name__)


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
        if not 0.0 <= self.target_skip < 1.0:
            raise ValueError(f"target_skip must be in [0, 1), got {self.target_skip}")
        if not self.memory_lr_scale > 0 or not self.memory_scale_init > 0 or not 0 < self.rho_init < 1:
            raise ValueError("memory_lr_scale and memory_scale_init must be positive, rho_init in (0, 1)")
        if not self.answer_weight > 0:
            raise ValueError(f"answer_weight must be positive, got {self.answer_weight}")
        if self.eval_every < 0 or self.eval_blocks < 1 or self.degrade_patience < 1:
            raise ValueError("eval_every must be >= 0 (0: no guard), eval_blocks and degrade_patience positive")
        if not self.degrade_tolerance > 0 or not 0 < self.rollback_lr_factor <= 1:
            raise ValueError("degrade_tolerance must be positive and rollback_lr_factor in (0, 1]")
        if not 0.0 <= self.budget_ramp <= 1.0:
            raise ValueError(f"budget_ramp must be in [0, 1], got {self.budget_ramp}")
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


# -- one step ------------------------------------------------------------------------------------------
def _step_blocks(run: TrainingRun, order: torch.Tensor, step: int) -> tuple[BlockSet, torch.Tensor]:
    """The block set step ``step`` reads and its rows there, cycling through the set; each process takes its
    share. A long step (cfg.is_long_step) reads one long block per process, in their cached order."""
    rank, world = run.accelerator.process_index, run.accelerator.num_processes
    if run.cfg.is_long_step(step):
        nth = step // run.cfg.long_every
        rows = torch.arange(nth * world, (nth + 1) * world) % len(run.long.blocks)
        return run.long, rows[rank:rank + 1]
    rows = order[torch.arange(step * run.cfg.batch_size, (step + 1) * run.cfg.batch_size) % len(run.data.blocks)]
    return run.data, rows[rank::world] if world > 1 else rows


def _target_loss(run: TrainingRun, data: BlockSet, logits: torch.Tensor, batch: torch.Tensor,
                 rows: torch.Tensor) -> torch.Tensor:
    """L_target: distillation from the teacher's top-k, or cross-entropy on the data's next tokens."""
    device = run.hero.device
    # weights of the predicted tokens (positions 1..T-1), as the targets below are shifted
    step_weights = None if data.weights is None else data.weights[rows][:, 1:].to(device)
    if data.targets is not None:
        return distill_loss(logits[:, :-1], data.targets["indices"][rows][:, :-1].to(device),
                            data.targets["logprobs"][rows][:, :-1].to(device),
                            tail=run.cfg.distill_target == "topk_tail", weights=step_weights)
    token_nll = F.cross_entropy(logits[:, :-1].transpose(1, 2).float(), batch[:, 1:], reduction="none")
    return weighted_mean(token_nll, step_weights)


def _loss_with_budget(run: TrainingRun, loss_target: torch.Tensor, l_skip: torch.Tensor, call, step_target: float,
                 alpha: float, n_sequences: int) -> tuple[torch.Tensor, float]:
    """L = L_target + alpha * (the budget's penalty) [+ the separation term]; returns L and the alpha used."""
    cfg, hero = run.cfg, run.hero
    gates = call.passes[-1].gates
    if cfg.budget in ("hinge", "hard"):
        # E*: FFNs a token may run on average so that the skipped ones make up the step's target skip.
        executed_budget = hero.config.n_routed - step_target * hero.profile.total_params / hero.profile.ffn_params
        alpha = cfg.hinge_alpha
        counted = hard_executed(gates, call.tau) if cfg.budget == "hard" else gates
        sequences = n_sequences if cfg.budget_scope == "sequence" else 1
        loss = loss_target + alpha * budget_hinge(counted, executed_budget, sequences)
    else:
        loss = loss_target + alpha * l_skip
    if cfg.separation > 0:
        loss = loss + cfg.separation * separation_penalty(gates, call.tau)
    return loss, alpha


def _apply_gradients(run: TrainingRun, loss: torch.Tensor) -> torch.Tensor:
    """Backpropagate, average across processes, clip and step the optimiser; returns the gradient norm."""
    run.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if run.accelerator.num_processes > 1:  # the router is not DDP-wrapped: average its gradients by hand
        for p in run.hero.router.parameters():
            if p.grad is not None:
                p.grad = run.accelerator.reduce(p.grad, reduction="mean")
    grad_norm = torch.nn.utils.clip_grad_norm_(run.hero.router.parameters(), run.cfg.clip)
    run.optimizer.step()
    return grad_norm


def _steered_alpha(cfg: TrainConfig, alpha: float, realised: float) -> float:
    """The controller budget moves log alpha by gain * skip error; the hinge budgets keep alpha fixed."""
    if cfg.budget != "controller":
        return alpha
    step_factor = math.exp(cfg.controller_gain * (cfg.target_skip - realised))
    return float(min(cfg.alpha_max, max(1e-6, alpha * step_factor)))


def _train_step(run: TrainingRun, order: torch.Tensor, step: int, alpha: float) -> tuple[dict, float]:
    """One optimisation step; returns its log row and the alpha the next step starts from."""
    cfg, hero = run.cfg, run.hero
    t0 = time.perf_counter()
    data, rows = _step_blocks(run, order, step)
    batch = data.blocks[rows].to(hero.device)
    lr_scale = run.guard.lr_scale if run.guard else 1.0  # lowered by each rollback of the degradation guard
    for group in run.optimizer.param_groups:
        group["lr"] = lr_at(step, cfg) * group["lr_scale"] * lr_scale
    call = hero.new_call(cfg.variant, record=True, keep_gates=True,
                         straight_through=cfg.gate_gradient == "straight_through")
    step_target = target_skip_at(step, cfg, run.start_skip)
    with torch.autocast(hero.device.type, dtype=torch.bfloat16, enabled=run.compute_dtype == torch.bfloat16):
        logits = hero.forward(batch, None, call, use_cache=False)
    loss_target = _target_loss(run, data, logits, batch, rows)
    gates = call.passes[-1].gates
    l_skip = usage_penalty(gates)
    loss, alpha = _loss_with_budget(run, loss_target, l_skip, call, step_target, alpha, batch.shape[0])
    grad_norm = _apply_gradients(run, loss)

    executed = call.passes[-1].executed()  # (R, N)
    skipped = (~executed).float().sum(0)
    realised = float((skipped * hero.profile.ffn_params / hero.profile.total_params).mean())
    alpha = _steered_alpha(cfg, alpha, realised)
    dt = time.perf_counter() - t0
    row = {"step": step + 1, "loss": loss.item(), "loss_target": loss_target.item(), "l_skip": l_skip.item(),
           "alpha": alpha, "param_skip": realised, "target_skip": step_target,
           "mean_gate": torch.stack(gates).mean().item(), "near_tau": near_tau_share(gates, call.tau),
           "grad_norm": float(grad_norm), "lr": lr_at(step, cfg) * lr_scale,
           "tokens": batch.numel(), "tokens_per_s": batch.numel() * run.accelerator.num_processes / dt,
           **memory_log_row(hero.router, call.passes[-1].records)}
    return row, alpha


def _log_step(run: TrainingRun, bar, row: dict) -> None:
    """Append the step's row to train_log.jsonl and show it on the progress bar (main process only)."""
    if not run.accelerator.is_main_process:
        return
    with run.log_path.open("a") as fh:
        fh.write(json.dumps(row) + "\n")
    bar.set_postfix(skip=f"{100 * row['param_skip']:.1f}%", kd=f"{row['loss_target']:.3f}",
                    tok_s=f"{row['tokens_per_s']:.0f}", near_tau=f"{row['near_tau']:.2f}")


def train(cfg: TrainConfig, hero: HeroModel | None = None, *, progress: bool = True,
          stop_after: int | None = None) -> Path:
    """Train and write the checkpoint to ``cfg.out``; returns its directory.

    ``stop_after`` ends the process's work early (tests of resume); the saved state lets a rerun finish."""
    from accelerate import Accelerator

    # cpu=True on a machine without CUDA: accelerate otherwise ignores the launcher's WORLD_SIZE there and every
    # process trains alone on the full batch.
    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    clock = RunClock()  # this process's share of the run's time
    set_threads_and_seeds(cfg)
    if hero is None:
        hero = load_hero(device=str(accelerator.device.type))
    run = set_up_run(cfg, hero, accelerator, clock, progress)
    warm_start_or_restore(run, progress)
    attach_guard(run)
    start, alpha = resume(run)
    run.hero.router.train()
    bar = progress_bar(run, start, progress)
    order = block_order(cfg, len(run.data.blocks))
    for step in bar:
        row, alpha = _train_step(run, order, step, alpha)
        done = step + 1
        verdict = check_health_if_due(run, done, row)
        _log_step(run, bar, row)
        save_state_if_due(run, done, alpha)
        if verdict == "stop":
            break
        if stop_after is not None and done >= stop_after:
            return run.out
    keep_best_if_degraded(run)
    write_checkpoint(run)
    return run.out
