"""The training recipe's levers: unscaled branches, adapter warm start, budget curriculum, gate separation,
precision choice, and the broader chat data."""

import json

import numpy as np
import pytest
import torch

from hero_core.backbones.precision import resolve_dtype
from hero_core.data.splits import split_of
from hero_core.data.texts import chat_prompts
from hero_core.method import checkpoint as ckpt
from hero_core.method.config import HeroConfig
from hero_core.train.losses import near_tau_share, separation_penalty
from hero_core.train.train import train
from hero_core.train.train_config import TrainConfig, target_skip_at
from hero_core.train.warmstart import collect_ffn_pairs, fit_adapter


def _tiny(branch_scaling="paper", gate_bias_init=0.0, seed=0, spread=True):
    from hero_core.method.model import HeroModel, fresh_router
    from hero_core.method.tiny import tiny_backbone

    backbone = tiny_backbone(seed=seed)
    torch.manual_seed(seed + 1)
    router = fresh_router(backbone, gate_bias_init=gate_bias_init, branch_scaling=branch_scaling)
    with torch.no_grad():
        torch.nn.init.normal_(router.local_head.mlp[2].weight, std=0.5 if spread else 0.0)
        for adapter in router.adapters:
            torch.nn.init.normal_(adapter.w2.weight, std=0.05)
    return HeroModel(backbone, router, "tiny-recipe")


def test_branch_scaling_is_validated_and_recorded():
    with pytest.raises(ValueError, match="branch_scaling"):
        HeroConfig(routed_layers=[0], d_model=8, d_ffn=16, branch_scaling="half")
    assert HeroConfig(routed_layers=[0], d_model=8, d_ffn=16).branch_scaling == "unscaled"  # what bundled ones use
    old_file = HeroConfig(routed_layers=[0], d_model=8, d_ffn=16).to_dict()
    del old_file["branch_scaling"]
    assert HeroConfig.from_dict(old_file).branch_scaling == "paper"  # checkpoints saved before the field


def test_unscaled_branch_with_every_ffn_executed_is_the_dense_model():
    ids = torch.randint(0, 1000, (2, 12))
    for scaling, expect_dense in (("unscaled", True), ("paper", False)):
        hero = _tiny(scaling, gate_bias_init=3.0, spread=False)  # every gate ~0.95 >= tau: every FFN runs
        dense = hero.forward(ids, None, hero.new_call("dense", record=False))
        with torch.no_grad():
            routed = hero.forward(ids, None, hero.new_call("hero", 0.5, record=True))
        assert torch.allclose(routed, dense, atol=1e-5) is expect_dense, scaling


def test_unscaled_straight_through_matches_inference_and_gives_the_mixture_gradient():
    hero = _tiny("unscaled")
    ids = torch.randint(0, 1000, (2, 10))
    with torch.no_grad():
        inference = hero.forward(ids, None, hero.new_call("hero", 0.5))
    call = hero.new_call("hero", 0.5, keep_gates=True, straight_through=True)
    training = hero.forward(ids, None, call)
    assert torch.allclose(training, inference, atol=1e-4)
    executed = torch.stack([r.executed for r in call.passes[-1].records])
    assert executed.any() and (~executed).any()  # both branches exercised
    training.sum().backward()
    head = hero.router.local_head.mlp[2].weight
    assert head.grad is not None and head.grad.abs().sum() > 0  # the gate learns though the forward is unscaled


def test_adapter_warm_start_fits_the_ffn_better_than_cold():
    hero = _tiny("unscaled")
    blocks = torch.randint(0, 1000, (8, 32))
    pairs = collect_ffn_pairs(hero.model, blocks, hero.config.routed_layers, max_tokens=256)
    u, y = pairs[hero.config.routed_layers[1]]
    assert u.shape == y.shape == (256, hero.model.config.hidden_size)
    adapter = hero.router.adapters[1]
    torch.nn.init.zeros_(adapter.w2.weight)  # cold: a plain skip, R^2 <= 0
    with torch.no_grad():
        cold = 1 - float((adapter(u) - y).pow(2).sum() / (y - y.mean(0)).pow(2).sum())
    warm = fit_adapter(adapter, u, y, steps=200, batch=128)
    # a rank-8 adapter captures little of a random FFN; on SmolLM2 the median R^2 is ~0.5
    assert cold <= 1e-6 and warm > cold + 0.05


def test_budget_curriculum_ramps_from_start_to_target():
    cfg = TrainConfig(out="x", steps=100, target_skip=0.25, budget_ramp=0.4)
    values = [target_skip_at(s, cfg, 0.10) for s in range(100)]
    assert values[0] == pytest.approx(0.10 + 0.15 / 40)
    assert all(b >= a for a, b in zip(values, values[1:]))
    assert values[39] == pytest.approx(0.25) and values[-1] == pytest.approx(0.25)
    assert target_skip_at(0, TrainConfig(out="x", budget_ramp=0.0), 0.0) == pytest.approx(0.25)


def test_separation_penalty_and_near_tau_share():
    on_tau = [torch.full((4,), 0.5)]
    far = [torch.tensor([0.05, 0.95, 0.2, 0.8])]
    assert separation_penalty(on_tau, 0.5).item() == pytest.approx(1.0)
    assert separation_penalty(far, 0.5).item() == 0.0
    assert near_tau_share([torch.tensor([0.45, 0.55, 0.9, 0.1])], 0.5) == pytest.approx(0.5)


def test_recipe_run_records_its_choices_and_resumes_without_refitting(tmp_path):
    hero = _tiny("unscaled", gate_bias_init=4.0)
    cfg = TrainConfig(out=str(tmp_path / "run"), steps=4, batch_size=2, seq_len=32, data_blocks=8,
                      data_mix={"code": 1.0, "reasoning": 1.0}, target_skip=0.3, save_every=2, warm_start_tokens=128,
                      separation=0.01, dtype="fp32")
    train(cfg, hero, progress=False, stop_after=2)
    saved = json.loads((tmp_path / "run" / "_state" / "warm_start.json").read_text())
    warm, gate = saved["warm_start"], saved["gate_warm_start"]
    assert len(warm["r2_by_block"]) == hero.config.n_routed
    assert 0.0 <= gate["predicted_skip_share"] <= 1.0 and gate["decision_agreement_with_oracle"] > 0.5
    out = train(cfg, _tiny("unscaled", gate_bias_init=4.0), progress=False)
    found = ckpt.read_checkpoint(out)
    assert found.config.branch_scaling == "unscaled"
    assert found.training["warm_start"] == warm and found.training["gate_warm_start"] == gate
    assert found.training["tokens_seen"] == 4 * 2 * 32
    assert found.training["compute_dtype"] == "float32"
    rows = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert all(r["target_skip"] == pytest.approx(0.3) for r in rows)  # fitted gates start at the budget
    assert all(0.0 <= r["near_tau"] <= 1.0 for r in rows)
    # a run that continues from this checkpoint must keep its branch scaling
    with pytest.raises(ValueError, match="branch_scaling"):
        train(TrainConfig(out=str(tmp_path / "next"), init_from=str(out), branch_scaling="paper", steps=1,
                          batch_size=2, seq_len=32, data_blocks=4, data_mix={"code": 1.0}), _tiny(), progress=False)


def test_precision_choice():
    assert resolve_dtype("fp32", "cpu") == torch.float32
    assert resolve_dtype("bf16", "cpu") == torch.bfloat16
    assert resolve_dtype("auto", "cpu") in (torch.float32, torch.bfloat16)
    with pytest.raises(ValueError, match="dtype"):
        resolve_dtype("fp8", "cpu")


def test_chat_prompts_are_many_varied_and_split_by_hash():
    train_prompts, eval_prompts = chat_prompts("train"), chat_prompts("eval")
    assert len(train_prompts) + len(eval_prompts) >= 1500 and len(train_prompts) >= 1000
    assert not set(train_prompts) & set(eval_prompts)
    assert all(split_of(p) == "eval" for p in eval_prompts)
    assert any("Python" in p for p in train_prompts)  # the reference-manual questions are in


def test_warm_start_is_cached_per_data_and_shape(tmp_path):
    from hero_core.train.warmstart import cached_warm_start

    blocks = torch.randint(0, 1000, (4, 32))
    first = _tiny("unscaled")
    report = cached_warm_start(first.model, first.router, blocks, tmp_path / "fit", max_tokens=64, progress=False)
    assert "cached" not in report and len(report["r2_by_block"]) == first.config.n_routed
    second = _tiny("unscaled", seed=0)
    again = cached_warm_start(second.model, second.router, blocks, tmp_path / "fit", max_tokens=64, progress=False)
    assert again["cached"] and again["r2_by_block"] == report["r2_by_block"]
    for a, b in zip(first.router.adapters.state_dict().values(), second.router.adapters.state_dict().values()):
        assert torch.equal(a, b)


def test_gate_warm_start_puts_the_skips_where_the_adapter_is_worst():
    from hero_core.train.warmstart import fit_gate_to_adapter_error

    hero = _tiny("unscaled", gate_bias_init=4.0, spread=False)
    blocks = torch.randint(0, 1000, (8, 32))
    report = fit_gate_to_adapter_error(hero.model, hero.router, blocks, 0.3, max_tokens=256, steps=300,
                                       progress=False)
    assert report["decision_agreement_with_oracle"] > 0.75
    assert abs(report["predicted_skip_share"] - 0.3) < 0.15
    call = hero.new_call("hero", 0.5)
    with torch.no_grad():
        hero.forward(blocks, None, call, use_cache=False)
    skip = 1 - torch.stack([r.executed for r in call.passes[-1].records]).float().mean()
    assert 0.1 < skip < 0.5  # gates no longer all sit at sigmoid(4) = 0.98: about the asked 30 % skip


def test_bf16_backbone_routes_and_records_like_fp32(tmp_path):
    """A bf16 backbone (load_hero(dtype="bf16")) runs the fp32 router; decisions match fp32 up to gates near tau."""
    from hero_core.method.tiny import tiny_backbone

    fp32 = _tiny("unscaled")
    backbone = tiny_backbone(seed=0)
    backbone.model.to(torch.bfloat16)
    from hero_core.method.model import HeroModel

    bf16 = HeroModel(backbone, fp32.router, "tiny-bf16")
    prompt = "The quick brown fox jumps over the lazy dog."
    a, b = fp32.trace(prompt), bf16.trace(prompt)
    assert b.gate.shape == a.gate.shape and np.isfinite(b.gate).all()
    clear = np.abs(a.gate - a.tau) > 0.05  # away from tau, bf16 rounding must not flip a decision
    assert (a.executed[clear] == b.executed[clear]).mean() > 0.95
    with pytest.raises(ValueError, match="dtype"):
        from hero_core import load_hero

        load_hero(dtype="fp16")
