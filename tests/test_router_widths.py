"""The router's widths as configuration: sized to the backbone by default, recorded in the checkpoint, checked when a
run continues from another, and every bundled checkpoint still read at the widths it was trained with."""

import numpy as np
import pytest

from hero_core.method import checkpoint as ckpt
from hero_core.method.config import PAPER_ENCODER, PAPER_HEAD_HIDDEN, HeroConfig, router_widths
from hero_core.train.recipes import RUNS, already_trained, stage_config
from hero_core.train.train import train
from hero_core.train.train_config import TrainConfig


def test_widths_scale_with_the_backbone_and_keep_the_papers_at_8b():
    assert router_widths(4096) == (PAPER_HEAD_HIDDEN, PAPER_ENCODER)
    assert router_widths(576) == (32, 32)  # SmolLM2-135M
    assert router_widths(64) == (16, 16)  # never below 16
    assert router_widths(16384) == (PAPER_HEAD_HIDDEN, PAPER_ENCODER)  # never above the paper's
    assert router_widths(2048) == (128, 128)


def test_config_zero_means_sized_and_explicit_widths_are_kept():
    sized = HeroConfig(routed_layers=[0, 1], d_model=576, d_ffn=1536)
    assert (sized.head_hidden, sized.d_encoder) == (32, 32)
    wide = HeroConfig(routed_layers=[0, 1], d_model=576, d_ffn=1536, head_hidden=256, d_encoder=128)
    assert HeroConfig.from_dict(wide.to_dict()).head_hidden == 256
    with pytest.raises(ValueError, match="head_hidden"):
        TrainConfig(out="x", head_hidden=-1)


def test_every_bundled_checkpoint_keeps_the_widths_it_was_trained_with():
    for name in ("hero-10-r4", "local-10", "hero-25"):
        found = ckpt.read_checkpoint(name)
        assert (found.config.head_hidden, found.config.d_encoder) == (PAPER_HEAD_HIDDEN, PAPER_ENCODER), name
        run = RUNS[name]
        assert already_trained(ckpt.BUNDLED_DIR / name, run, run.steps), f"{name} would be trained again"


def test_a_sized_recipe_is_not_taken_for_its_wide_twin():
    wide, sized = RUNS["hero-10-r2-s1"], RUNS["hero-10-r7-s1"]
    assert already_trained(ckpt.BUNDLED_DIR / "hero-10-r2-s1", wide, wide.steps)
    assert not already_trained(ckpt.BUNDLED_DIR / "hero-10-r2-s1", sized, sized.steps)
    assert stage_config(sized, "out", steps=1, start_dir=None).head_hidden == 0


def _tiny_hero():
    from hero_core.method.model import HeroModel, fresh_router
    from hero_core.method.tiny import tiny_backbone

    backbone = tiny_backbone(hidden=128)
    return HeroModel(backbone, fresh_router(backbone, gate_bias_init=4.0, branch_scaling="unscaled"), "tiny")


def _cfg(out, **widths):
    return TrainConfig(out=str(out), steps=2, batch_size=2, seq_len=32, data_blocks=4, data_mix={"code": 1.0},
                       warm_start_tokens=128, dtype="fp32", target_skip=0.2, **widths)


def test_a_run_trains_at_its_widths_records_them_and_refuses_a_start_of_other_widths(tmp_path):
    sized = ckpt.read_checkpoint(train(_cfg(tmp_path / "sized"), _tiny_hero(), progress=False))
    assert (sized.config.head_hidden, sized.config.d_encoder) == router_widths(128) == (16, 16)
    narrow = ckpt.read_checkpoint(train(_cfg(tmp_path / "wide", head_hidden=48, d_encoder=24), _tiny_hero(),
                                        progress=False))
    assert (narrow.config.head_hidden, narrow.config.d_encoder) == (48, 24)
    assert narrow.state_dict["local_head.mlp.0.weight"].shape == (48, 128)
    with pytest.raises(ValueError, match="router widths"):
        train(_cfg(tmp_path / "next", init_from=str(tmp_path / "wide")), _tiny_hero(), progress=False)


def test_each_variant_is_charged_what_it_computes():
    from hero_core.method.tiny import tiny_hero

    hero = tiny_hero(variant="hero")
    router = hero.router
    local = router.parameter_counts("no_history")["router_per_block"]
    assert local == sum(p.numel() for p in router.local_head.parameters())
    full = router.parameter_counts("hero")["router_per_block"]
    no_read = router.parameter_counts("no_memread")["router_per_block"]
    memory = sum(p.numel() for m in (router.to_q, router.to_k, router.to_v, router.novelty_state,
                                     router.novelty_context) for p in m.parameters())
    assert full - no_read == memory
    assert full - router.parameter_counts("no_aux")["router_per_block"] == sum(
        p.numel() for p in router.path_encoder.parameters())
    # a trace of the local variant is charged the local head alone, and no memory read
    assert hero.profile_for("no_history").router_params == local
    assert hero.profile_for("no_history").d_memory == 0
    trace = hero.trace("a short prompt to route", variant="no_history")
    assert trace.profile.router_params == local


def test_the_local_router_computes_its_head_alone_and_gives_the_same_gates():
    from hero_core.method.tiny import tiny_hero

    hero = tiny_hero(variant="hero")
    router = hero.router
    calls = []
    handle = router.state_encoder.register_forward_hook(lambda *a: calls.append(1))
    try:
        local = hero.trace("the local router reads hbar alone", variant="no_history")
    finally:
        handle.remove()
    assert calls == []  # no state s_j computed
    full = hero.trace("the local router reads hbar alone", variant="hero")
    # the same head on the same hbar: the first routed block (later blocks read streams the decisions changed)
    assert np.allclose(local.local_logit[0], full.local_logit[0], atol=1e-6)
    assert np.all(local.history_logit == 0) and np.all(local.memory_attention == 0)
    assert np.allclose(1 / (1 + np.exp(-local.local_logit)), local.gate, atol=1e-6)  # g = sigmoid(b)


def test_a_fixed_policy_is_charged_no_router():
    from hero_core.eval.baselines import static_pruning
    from hero_core.eval.methods import HeroMethod
    from hero_core.method.tiny import tiny_hero

    hero = tiny_hero()
    static = HeroMethod(hero, "hero", policy=static_pruning({1}))
    assert static.profile.router_params == 0 and static.profile.d_memory == 0
    assert HeroMethod(hero, "hero").profile.router_params > 0
