"""The degradation guard: a tiny run made to degrade on purpose is noticed, rolled back or stopped, and the
checkpoint it writes holds the best state; a healthy run keeps its last state and says so."""

import json

import pytest
import torch
from safetensors.torch import load_file

from hero_core.core import checkpoint as ckpt
from hero_core.core.checkpoint import health_line
from hero_core.train import train as train_module
from hero_core.train.health import HealthGuard
from hero_core.train.train import TrainConfig, train


def _cfg(out, **kw):
    base = dict(out=str(out), steps=12, batch_size=2, seq_len=32, data_mix={"code": 1.0, "reasoning": 1.0},
                save_every=2, target_skip=0.2, data_blocks=12, eval_every=2, eval_blocks=4,
                degrade_tolerance=0.02, degrade_patience=2, warm_start=False, gate_warm_start=False)
    base.update(kw)
    return TrainConfig(**base)


def _fresh_tiny():
    from hero_core.core.model import HeroModel, fresh_router
    from hero_core.core.tiny import tiny_backbone

    backbone = tiny_backbone(seed=0)
    return HeroModel(backbone, fresh_router(backbone), "training")


@pytest.fixture
def sabotaged(monkeypatch):
    """From the 5th optimiser step on, every step also adds noise to the router, more at each step: the run
    degrades, and keeps degrading after a rollback (so it ends worse than its best)."""
    real = train_module._apply_gradients
    calls = {"n": 0}

    def apply_then_break(run, loss):
        norm = real(run, loss)
        calls["n"] += 1
        if calls["n"] > 4:
            with torch.no_grad():
                for p in run.hero.router.parameters():
                    p.add_(torch.randn_like(p) * 0.5 * (calls["n"] - 4))
        return norm

    monkeypatch.setattr(train_module, "_apply_gradients", apply_then_break)


def _rows(out):
    return [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]


def _assert_checkpoint_holds_best_state(out, health):
    best = load_file(out / "_state" / "best" / "state.safetensors")
    saved = ckpt.read_checkpoint(out).state_dict
    assert saved, "no weights in the checkpoint"
    for key, value in saved.items():  # stored in fp16: equal to the best state up to that rounding
        assert torch.allclose(value.float(), best[f"router.{key}"].float().half().float(), atol=1e-3), key
    best_meta = json.loads((out / "_state" / "best" / "state.json").read_text())
    assert best_meta["step"] == health["best_step"]


def test_a_degrading_run_is_rolled_back_and_keeps_its_best_state(tmp_path, sabotaged, caplog):
    out = train(_cfg(tmp_path / "run"), _fresh_tiny(), progress=False)
    health = ckpt.read_checkpoint(out).training["health"]
    assert health["rollbacks"], "the guard did not fire on a run made to degrade"
    first = health["rollbacks"][0]
    assert first["to_step"] == health["best_step"] < first["at_step"] and first["loss"] > first["best_loss"]
    assert first["lr_scale"] == 0.5  # the learning rate was lowered at the rollback
    # The tiny random model's loss sits near log(vocabulary) and cannot rise far, so whether the last evaluation is
    # still more than the tolerance above the best depends on the noise: the rule decides, and is checked both ways.
    ended_degraded = health["final_loss"] > health["best_loss"] * 1.02
    assert health["kept"] == ("best" if ended_degraded else "final")
    if ended_degraded:
        _assert_checkpoint_holds_best_state(out, health)
    assert "TRAINING DEGRADED" in caplog.text
    rows = _rows(out)
    assert [r["step"] for r in rows if "held_out_loss" in r] == list(range(2, 13, 2))  # logged beside the loss
    after = [r["lr"] for r in rows if r["step"] > first["at_step"]]
    unguarded = [train_module.lr_at(r["step"] - 1, _cfg(tmp_path)) for r in rows if r["step"] > first["at_step"]]
    assert all(a == pytest.approx(0.5 * u) or a < 0.5 * u for a, u in zip(after, unguarded))
    assert "rolled back" in health_line(health)


def test_the_guard_can_stop_the_run_at_its_best_state(tmp_path, sabotaged):
    out = train(_cfg(tmp_path / "run", on_degrade="stop"), _fresh_tiny(), progress=False)
    health = ckpt.read_checkpoint(out).training["health"]
    assert health["stopped_at"] is not None and health["stopped_at"] < 12 and health["kept"] == "best"
    assert max(r["step"] for r in _rows(out)) == health["stopped_at"]  # no step after the stop
    _assert_checkpoint_holds_best_state(out, health)


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


def test_loading_a_checkpoint_the_guard_acted_on_says_so(tmp_path, sabotaged, caplog):
    import logging

    from hero_core.core.model import load_checkpoint

    out = train(_cfg(tmp_path / "run"), _fresh_tiny(), progress=False)
    with caplog.at_level(logging.WARNING, logger="hero_core.core.model"):
        load_checkpoint(out, _fresh_tiny().backbone)
    assert any("rolled back" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
