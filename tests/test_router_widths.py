"""The router's widths as configuration: sized to the backbone by default, recorded in the checkpoint, checked when a
run continues from another, and every bundled checkpoint still read at the widths it was trained with."""

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
