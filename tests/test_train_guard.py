"""The degradation guard: a tiny run whose held-out loss is scripted (so every branch runs on every test run) is
noticed, rolled back with its weights and alpha or stopped, and the checkpoint it writes holds the state the rule
chose; a healthy run keeps its last state and says so."""

import json
import math

import pytest
import torch

from hero_core.method import checkpoint as ckpt
from hero_core.method.checkpoint import health_line
from hero_core.train import train as train_module
from hero_core.train import train_guard
from hero_core.train.health import HealthGuard
from hero_core.train.train import train
from hero_core.train.train_config import TrainConfig, lr_at

EVALUATED = list(range(2, 13, 2))  # eval_every=2 over 12 steps


def _cfg(out, **kw):
    # The controller budget steers alpha at every step, so a rollback that forgot alpha would go on from a wrong one.
    base = dict(out=str(out), steps=12, batch_size=2, seq_len=32, data_mix={"code": 1.0, "reasoning": 1.0},
                save_every=2, target_skip=0.2, data_blocks=12, eval_every=2, eval_blocks=4,
                degrade_tolerance=0.02, degrade_patience=2, warm_start=False, gate_warm_start=False,
                budget="controller")
    base.update(kw)
    return TrainConfig(**base)


def _fresh_tiny():
    from hero_core.method.model import HeroModel, fresh_router
    from hero_core.method.tiny import tiny_backbone

    backbone = tiny_backbone(seed=0)
    return HeroModel(backbone, fresh_router(backbone), "training")


def _router_state(run) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in run.hero.router.state_dict().items()}


class Scripted:
    """The held-out loss of each evaluation, in order, in place of the measured one; and, seen from the training
    loop, the router's weights and alpha at every evaluation (what a rollback must bring back)."""

    def __init__(self, monkeypatch, losses):
        self.losses = list(losses)
        self.at = {}  # step -> (verdict, weights right after the guard acted, alpha the next step starts from)
        self.before = {}  # step -> alpha the guard was handed (the step's own)
        real = train_guard.check_health_if_due

        def fake_loss(run):
            return self.losses.pop(0), 0.2

        def watched(run, done, row, alpha):
            verdict, next_alpha = real(run, done, row, alpha)
            if "health" in row:
                self.before[done] = alpha
                self.at[done] = (verdict, _router_state(run), next_alpha)
            return verdict, next_alpha

        monkeypatch.setattr(train_guard, "held_out_loss", fake_loss)
        monkeypatch.setattr(train_module, "check_health_if_due", watched)

    def best_before(self, step):
        """The weights and alpha of the last "best" evaluation before ``step``."""
        best = max(s for s, (v, _, _) in self.at.items() if v == "best" and s < step)
        return best, self.at[best][1], self.before[best]


# best at 4; 6 and 8 are more than 2 % above it (patience 2): rollback at 8; then within the tolerance to the end
ROLLBACK_THEN_FINAL = [1.0, 0.9, 1.5, 1.5, 0.91, 0.91]
# the same rollback; then the last evaluation ends more than the tolerance above the best: the best state is kept
ROLLBACK_THEN_BEST = [1.0, 0.9, 1.5, 1.5, 0.91, 1.5]


def _assert_checkpoint_holds(out, weights):
    """The checkpoint's weights are ``weights`` stored in fp16 (the checkpoint's storage dtype): exactly equal."""
    saved = ckpt.read_checkpoint(out).state_dict
    assert saved and set(saved) == set(weights)
    for key, value in saved.items():
        assert torch.equal(value, weights[key].to(value.dtype)), key


def _rows(out):
    return [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]


def test_a_degrading_run_is_rolled_back_with_its_weights_and_alpha(tmp_path, monkeypatch, caplog):
    script = Scripted(monkeypatch, ROLLBACK_THEN_FINAL)
    out = train(_cfg(tmp_path / "run"), _fresh_tiny(), progress=False)
    assert not script.losses and sorted(script.at) == EVALUATED  # every scripted evaluation ran
    health = ckpt.read_checkpoint(out).training["health"]
    assert [r["at_step"] for r in health["rollbacks"]] == [8] and health["best_step"] == 4
    first = health["rollbacks"][0]
    assert first["to_step"] == 4 and first["loss"] == 1.5 and first["best_loss"] == 0.9
    assert first["lr_scale"] == 0.5  # the learning rate was lowered at the rollback
    verdict, after_rollback, alpha_after = script.at[8]
    assert verdict == "degraded"
    best_step, best_weights, best_alpha = script.best_before(8)
    assert best_step == 4
    # training moved the weights and alpha between the best and the rollback, so equality below is the load's doing
    assert any(not torch.equal(script.at[6][1][k], best_weights[k]) for k in best_weights)
    assert script.before[8] != best_alpha
    for key, value in best_weights.items():
        assert torch.equal(after_rollback[key], value), key
    assert alpha_after == best_alpha and first["alpha"] == best_alpha
    rows = _rows(out)
    cfg = _cfg(tmp_path)  # step 9 was steered from the restored alpha (the controller's rule, written out)
    steered = best_alpha * math.exp(cfg.controller_gain * (cfg.target_skip - rows[8]["param_skip"]))
    assert rows[8]["step"] == 9 and rows[8]["alpha"] == pytest.approx(min(cfg.alpha_max, max(1e-6, steered)))
    # the run ended within the tolerance: the checkpoint keeps the final state, exactly
    assert health["kept"] == "final" and health["final_loss"] == 0.91
    _assert_checkpoint_holds(out, script.at[12][1])
    assert "TRAINING DEGRADED" in caplog.text
    assert [r["step"] for r in rows if "held_out_loss" in r] == EVALUATED  # logged beside the loss
    after = [r["lr"] for r in rows if r["step"] > first["at_step"]]
    unguarded = [lr_at(r["step"] - 1, _cfg(tmp_path)) for r in rows if r["step"] > first["at_step"]]
    assert all(a == pytest.approx(0.5 * u) for a, u in zip(after, unguarded, strict=True))
    assert "rolled back" in health_line(health)


def test_a_run_that_ends_degraded_keeps_its_best_state(tmp_path, monkeypatch):
    script = Scripted(monkeypatch, ROLLBACK_THEN_BEST)
    out = train(_cfg(tmp_path / "run"), _fresh_tiny(), progress=False)
    health = ckpt.read_checkpoint(out).training["health"]
    assert health["kept"] == "best" and health["final_loss"] == 1.5 and health["best_step"] == 4
    _, best_weights, _ = script.best_before(12)
    assert any(not torch.equal(script.at[12][1][k], best_weights[k]) for k in best_weights)  # the last state differs
    _assert_checkpoint_holds(out, best_weights)


def test_the_guard_can_stop_the_run_at_its_best_state(tmp_path, monkeypatch):
    script = Scripted(monkeypatch, ROLLBACK_THEN_FINAL[:4])  # degraded at step 8: the run stops there
    out = train(_cfg(tmp_path / "run", on_degrade="stop"), _fresh_tiny(), progress=False)
    health = ckpt.read_checkpoint(out).training["health"]
    assert health["stopped_at"] == 8 and health["kept"] == "best" and not script.losses
    assert max(r["step"] for r in _rows(out)) == health["stopped_at"]  # no step after the stop
    _assert_checkpoint_holds(out, script.best_before(8)[1])


def test_a_healthy_run_keeps_its_final_state_and_records_its_health(tmp_path):
    out = train(_cfg(tmp_path / "run", degrade_tolerance=10.0), _fresh_tiny(), progress=False)
    found = ckpt.read_checkpoint(out)
    health = found.training["health"]
    assert health["kept"] == "final" and health["degradations"] == 0 and not health["rollbacks"]
    assert [e[0] for e in health["held_out_loss"]] == list(range(2, 13, 2))
    assert health["final_step"] == 12 and health["best_loss"] <= health["final_loss"]
    assert "kept the final state" in health_line(health)


def test_the_guard_watches_only_once_the_budget_reaches_its_target():
    guard = HealthGuard(tolerance=0.05, patience=1, on_degrade="rollback", lr_factor=0.5, watch_from=10)
    assert guard.observe(5, 1.0, 0.0) == "ok" and guard.best is None  # the budget is still tightening
    assert guard.observe(10, 2.0, 0.1) == "best"
    assert guard.observe(15, 2.05, 0.1) == "ok"  # within the tolerance
    assert guard.observe(20, 2.5, 0.1) == "degraded" and guard.lr_scale == 0.5
    restored = HealthGuard.from_json(json.loads(json.dumps(guard.to_json())))
    assert restored == guard  # what a resumed run reads back


def test_bad_guard_settings_are_refused():
    with pytest.raises(ValueError, match="on_degrade"):
        TrainConfig(out="x", on_degrade="explode")
    with pytest.raises(ValueError, match="eval_every"):
        TrainConfig(out="x", eval_every=-1)
    with pytest.raises(ValueError, match="rollback_lr_factor"):
        TrainConfig(out="x", rollback_lr_factor=2.0)


def test_loading_a_checkpoint_the_guard_acted_on_says_so(tmp_path, monkeypatch, caplog):
    import logging

    from hero_core.method.model import load_checkpoint

    Scripted(monkeypatch, ROLLBACK_THEN_FINAL)
    out = train(_cfg(tmp_path / "run"), _fresh_tiny(), progress=False)
    with caplog.at_level(logging.WARNING, logger="hero_core.method.model"):
        load_checkpoint(out, _fresh_tiny().backbone)
    assert any("rolled back" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
