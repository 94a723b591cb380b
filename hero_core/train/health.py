"""The degradation guard of a training run: a held-out loss at a fixed interval, the best state by it, and what to
do when the run degrades.

A run *degrades* when its held-out loss stays more than ``tolerance`` (a share) above the best seen for
``patience`` evaluations in a row. The guard then says so loudly and, by ``on_degrade``:

* ``rollback``: the router, the optimiser and the budget's alpha go back to the best state and the learning rate
  is multiplied by ``lr_factor`` (the run goes on from the best step's weights, not its step count);
* ``stop``: the best state is restored and the run ends there;
* ``warn``: only the warning, in the log and the health record.

Comparisons start once the budget curriculum has reached its target, so a loss that rises because the budget is
still tightening is not read as degradation. The record (:meth:`HealthGuard.record`) is saved in the
checkpoint's config (``training.health``), and the app and ``load_hero`` show it.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field

log = logging.getLogger("hero_core.train")

ON_DEGRADE = ("rollback", "stop", "warn")


@dataclass
class Evaluation:
    step: int
    loss: float  # held-out target loss (the training objective's first term) at the routed decisions
    param_skip: float  # held-out param skip of the same pass


@dataclass
class HealthGuard:
    """What the guard has seen so far; saved with the run's state so a resumed run keeps it."""

    tolerance: float
    patience: int
    on_degrade: str
    lr_factor: float
    watch_from: int  # first step whose evaluation may become the best (the budget's target is reached)
    evaluations: list[Evaluation] = field(default_factory=list)
    best: Evaluation | None = None
    bad_in_a_row: int = 0
    lr_scale: float = 1.0  # product of the rollbacks' lr_factor
    rollbacks: list[dict] = field(default_factory=list)
    stopped_at: int | None = None

    def observe(self, step: int, loss: float, param_skip: float) -> str:
        """Record one evaluation; returns "best", "ok", "worse" or "degraded" (the caller then acts on it)."""
        now = Evaluation(step, loss, param_skip)
        self.evaluations.append(now)
        if step < self.watch_from:
            return "ok"
        if self.best is None or loss < self.best.loss:
            self.best, self.bad_in_a_row = now, 0
            return "best"
        if loss <= self.best.loss * (1 + self.tolerance):
            self.bad_in_a_row = 0
            return "ok"
        self.bad_in_a_row += 1
        if self.bad_in_a_row < self.patience:
            return "worse"
        log.warning("TRAINING DEGRADED at step %d: held-out loss %.4f is %.1f %% above its best %.4f (step %d) for "
                    "%d evaluations in a row; %s", step, loss, 100 * (loss / self.best.loss - 1), self.best.loss,
                    self.best.step, self.bad_in_a_row,
                    {"rollback": f"rolling back to step {self.best.step} with the learning rate x{self.lr_factor:g}",
                     "stop": f"stopping with the state of step {self.best.step}",
                     "warn": "going on (on_degrade=warn)"}[self.on_degrade])
        self.bad_in_a_row = 0
        if self.on_degrade == "rollback":
            self.lr_scale *= self.lr_factor
            self.rollbacks.append({"at_step": step, "to_step": self.best.step, "loss": loss,
                                   "best_loss": self.best.loss, "lr_scale": self.lr_scale})
        elif self.on_degrade == "stop":
            self.stopped_at = step
        else:
            self.rollbacks.append({"at_step": step, "to_step": None, "loss": loss, "best_loss": self.best.loss,
                                   "lr_scale": self.lr_scale})
        return "degraded"

    def final_is_degraded(self) -> bool:
        """Whether the last evaluation sits more than ``tolerance`` above the best (the checkpoint then keeps the
        best state instead of the last)."""
        if self.best is None or not self.evaluations:
            return False
        return self.evaluations[-1].loss > self.best.loss * (1 + self.tolerance)

    def record(self, kept: str) -> dict:
        """The health record saved in the checkpoint; ``kept`` is "final" or "best"."""
        last = self.evaluations[-1] if self.evaluations else None
        return {"held_out_loss": [[e.step, round(e.loss, 5), round(e.param_skip, 5)] for e in self.evaluations],
                "best_step": self.best.step if self.best else None,
                "best_loss": round(self.best.loss, 5) if self.best else None,
                "final_loss": round(last.loss, 5) if last else None,
                "final_step": last.step if last else None,
                "kept": kept, "rollbacks": self.rollbacks, "stopped_at": self.stopped_at,
                "degradations": len(self.rollbacks) + (self.stopped_at is not None),
                "rule": {"tolerance": self.tolerance, "patience": self.patience, "on_degrade": self.on_degrade,
                         "lr_factor": self.lr_factor, "watch_from": self.watch_from}}

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, saved: dict) -> HealthGuard:
        saved = dict(saved)
        saved["evaluations"] = [Evaluation(**e) for e in saved.get("evaluations", [])]
        saved["best"] = Evaluation(**saved["best"]) if saved.get("best") else None
        return cls(**saved)
