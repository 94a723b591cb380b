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
from pathlib import Path

import torch
import torch.nn.functional as F

from hero_core.measures.accounting import mean_param_skip
from hero_core.method.model import HeroModel, load_hero
from hero_core.train.losses import (
    budget_hinge,
    distill_loss,
    hard_executed,
    near_tau_share,
    separation_penalty,
    usage_penalty,
    weighted_mean,
)
from hero_core.train.train_config import TrainConfig, lr_at, target_skip_at
from hero_core.train.train_data import block_order
from hero_core.train.train_guard import attach_guard, check_health_if_due, keep_best_if_degraded
from hero_core.train.train_memory import memory_log_row
from hero_core.train.train_steps import (
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

    realised = mean_param_skip(call.passes[-1].executed(), hero.profile)
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
        verdict, alpha = check_health_if_due(run, done, row, alpha)  # a rollback restores alpha too
        _log_step(run, bar, row)
        save_state_if_due(run, done, alpha)
        if verdict == "stop":
            break
        if stop_after is not None and done >= stop_after:
            return run.out
    keep_best_if_degraded(run)
    write_checkpoint(run)
    return run.out
