"""The degradation guard inside a training run (hero_core.train.health holds its rule): the held-out blocks and
their teacher targets, the evaluation every ``eval_every`` steps, the best state kept on disk, rollback and the
final choice between the last and the best state. For hero_core.train.train.train alone."""

from __future__ import annotations

import json
import logging
import math

import torch
import torch.nn.functional as F

from hero_core.measures.accounting import mean_param_skip
from hero_core.train.health import HealthGuard
from hero_core.train.losses import distill_loss
from hero_core.train.train_data import dense_topk, validation_blocks
from hero_core.train.train_steps import BlockSet, TrainingRun, load_state, save_state

log = logging.getLogger("hero_core.train")


def attach_guard(run: TrainingRun) -> None:
    """Give ``run`` its held-out blocks and guard (restored from the saved state of an interrupted run)."""
    cfg = run.cfg
    if cfg.eval_every == 0:
        return
    blocks = validation_blocks(run.hero, cfg)
    if blocks is None or not len(blocks):
        log.warning("degradation guard off: the held-out split makes no block of %d tokens", cfg.seq_len)
        return
    targets = dense_topk(run.hero, cfg, blocks) if cfg.target == "distill" else None
    run.validation = BlockSet(blocks, targets, None)
    # Comparisons start once the budget curriculum reaches its target: before that a rising loss is the budget's.
    ramps = run.start_skip != cfg.target_skip and cfg.budget_ramp > 0
    watch_from = math.ceil(cfg.budget_ramp * cfg.steps) if ramps else 0
    saved = run.state_dir / "state.json"
    meta = json.loads(saved.read_text()) if saved.is_file() else {}
    rule = HealthGuard(cfg.degrade_tolerance, cfg.degrade_patience, cfg.on_degrade, cfg.rollback_lr_factor, watch_from)
    if meta.get("guard"):  # a resumed run keeps what its guard saw, under the rule of this run's settings
        saved = HealthGuard.from_json(meta["guard"])
        rule.evaluations, rule.best, rule.bad_in_a_row = saved.evaluations, saved.best, saved.bad_in_a_row
        rule.lr_scale, rule.rollbacks, rule.stopped_at = saved.lr_scale, saved.rollbacks, saved.stopped_at
    run.guard = rule


@torch.no_grad()
def held_out_loss(run: TrainingRun) -> tuple[float, float]:
    """The target loss and param skip of the routed model on the held-out blocks."""
    hero, data = run.hero, run.validation
    # The router stays in training mode: the same forward as a training step (its inference path takes a bf16
    # backbone, not autocast over an fp32 one), with the hard decisions the checkpoint will make.
    losses, skips = [], []
    for start in range(0, len(data.blocks), 8):
        batch = data.blocks[start:start + 8].to(hero.device)
        call = hero.new_call(run.cfg.variant, record=True, keep_gates=True,
                             straight_through=run.cfg.gate_gradient == "straight_through")
        with torch.autocast(hero.device.type, dtype=torch.bfloat16, enabled=run.compute_dtype == torch.bfloat16):
            logits = hero.forward(batch, None, call, use_cache=False)
        if data.targets is not None:
            rows = slice(start, start + len(batch))
            loss = distill_loss(logits[:, :-1], data.targets["indices"][rows][:, :-1].to(hero.device),
                                data.targets["logprobs"][rows][:, :-1].to(hero.device),
                                tail=run.cfg.distill_target == "topk_tail")
        else:
            loss = F.cross_entropy(logits[:, :-1].transpose(1, 2).float(), batch[:, 1:])
        losses.append(float(loss) * len(batch))
        skips.append(mean_param_skip(call.passes[-1].executed(), hero.profile) * len(batch))
    n = len(data.blocks)
    return sum(losses) / n, sum(skips) / n


def check_health_if_due(run: TrainingRun, done: int, row: dict, alpha: float) -> tuple[str, float]:
    """Every ``eval_every`` steps (and after the last): evaluate, add the result to the step's log row, keep the
    best state (with the budget's alpha, which the controller budget steers with the weights) and act on a
    degradation. Returns the guard's verdict, or "stop" when the run must end now, and the alpha the next step
    starts from: the best state's after a rollback, else ``alpha`` unchanged."""
    guard = run.guard
    if guard is None or (done % run.cfg.eval_every and done != run.cfg.steps):
        return "ok", alpha
    loss, skip = held_out_loss(run)
    verdict = guard.observe(done, loss, skip)
    row.update(held_out_loss=loss, held_out_skip=skip, health=verdict)
    if verdict == "best" and run.accelerator.is_main_process:
        save_state(run.state_dir / "best", run.hero, run.optimizer, done, alpha, run.clock.spent())
    if verdict == "degraded" and guard.on_degrade != "warn":
        run.accelerator.wait_for_everyone()  # the best state is on disk, written by the main process
        restored = load_state(run.state_dir / "best", run.hero, run.optimizer)
        if restored is None:  # the record must not claim a rollback whose state was never loaded
            raise RuntimeError(f"the degradation guard found no best state under {run.state_dir / 'best'}")
        alpha = restored[1]
        if guard.on_degrade == "stop":
            return "stop", alpha
        guard.rollbacks[-1]["alpha"] = alpha  # on record: the alpha the run goes on from, with the best weights
    return verdict, alpha


def keep_best_if_degraded(run: TrainingRun) -> None:
    """Before the checkpoint is written: the best state replaces the last when the run ended degraded (or was
    stopped), and the health record goes into the checkpoint's training summary."""
    guard = run.guard
    if guard is None:
        return
    kept = "final"
    if guard.stopped_at is not None:
        kept = "best"  # already restored when the guard stopped the run
    elif guard.final_is_degraded():
        log.warning("the run ended %.1f %% above its best held-out loss: the checkpoint keeps step %d's state",
                    100 * (guard.evaluations[-1].loss / guard.best.loss - 1), guard.best.step)
        load_state(run.state_dir / "best", run.hero, run.optimizer)
        kept = "best"
    run.hero.router.config.extra["health"] = guard.record(kept)
