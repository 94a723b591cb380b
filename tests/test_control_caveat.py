"""The caveat beside an unsteady trained control (hero_core.eval.twins.control_caveat): every figure is read from
the control's training record and the across-seed summary, so a changed record changes the sentence."""

import json
from pathlib import Path

from hero_core.eval.twins import UNSTEADY_CONTROLS, bundled_control_caveat, control_caveat

CHECKPOINTS = Path(__file__).resolve().parents[1] / "hero_core" / "checkpoints"


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def test_the_bundled_caveat_quotes_the_stored_training_record():
    for name in UNSTEADY_CONTROLS:
        health = json.loads((CHECKPOINTS / name / "hero_config.json").read_text())["training"]["health"]
        seeds = json.loads((CHECKPOINTS / "seeds.json").read_text())
        caveat = bundled_control_caveat(name)
        for r in health["rollbacks"]:
            rise = _pct(r["loss"] / r["best_loss"] - 1)
            assert f"held-out loss {rise} above its best at step {r['at_step']}" in caveat
            assert f"rolled back to step {r['to_step']}" in caveat
        assert f"ended {_pct(health['final_loss'] / health['best_loss'] - 1)} above its best" in caveat
        assert f"the guard's {_pct(health['rule']['tolerance'])} tolerance" in caveat
        kind = name.split("-")[0]
        n = min(len(seeds["arms"]["hero"]["runs"]), len(seeds["arms"][kind]["runs"]))
        assert f"over {n} training seeds" in caveat


def _health(**kw):
    health = {"best_loss": 2.0, "best_step": 33, "final_loss": 2.1, "kept": "final",
              "rollbacks": [{"at_step": 77, "to_step": 33, "loss": 3.0, "best_loss": 2.0, "lr_scale": 0.25}],
              "rule": {"tolerance": 0.1}}
    health.update(kw)
    return {"health": health}


def test_a_synthetic_record_changes_every_figure():
    name = next(iter(UNSTEADY_CONTROLS))
    kind = name.split("-")[0]
    seeds = {"arms": {"hero": {"runs": list("abcde")}, kind: {"runs": list("vwxyz")}},
             "differences": {f"hero - {kind}": {"ppl:chat": {"verdict": "not separable"},
                                                 "ppl:code": {"verdict": "lower"}}}}
    caveat = control_caveat(name, _health(), seeds)
    assert "held-out loss 50 % above its best at step 77" in caveat  # 3.0 / 2.0
    assert "rolled back to step 33 with a quarter of the learning rate" in caveat
    assert "ended 5 % above its best, inside the guard's 10 % tolerance" in caveat  # 2.1 / 2.0 against 1.1
    assert "over 5 training seeds of the first stage they separate on code" in caveat
    assert "keeps the state" not in caveat
    ended_worse = control_caveat(name, _health(final_loss=2.4, kept="best"), None)
    assert "ended 20 % above its best, beyond the guard's 10 % tolerance" in ended_worse
    assert "the checkpoint keeps the state of step 33" in ended_worse and "training seeds" not in ended_worse
    two = _health(rollbacks=[_health()["health"]["rollbacks"][0],
                             {"at_step": 90, "to_step": 33, "loss": 2.5, "best_loss": 2.0, "lr_scale": 0.125}])
    assert "then it degraded (held-out loss 25 % above its best at step 90)" in control_caveat(name, two)
    assert "0.125 times the learning rate" in control_caveat(name, two)


def test_only_a_named_control_gets_a_caveat_and_a_missing_record_drops_the_figures():
    assert control_caveat("hero-10-r4", _health()) is None
    assert bundled_control_caveat("hero-10-r4") is None
    name = next(iter(UNSTEADY_CONTROLS))
    bare = control_caveat(name, None)
    assert bare.startswith(f"{name} is an unsteady control") and "%" not in bare and "step" not in bare
