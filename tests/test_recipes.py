"""The bundled recipes as a table (hero_core.train.recipes): stage chains, the stage settings make_checkpoints trains
with, and ``python -m hero_core train --recipe`` on a tiny model."""

import json

import pytest

from hero_core.train.recipes import DATA_BLOCKS, RECIPE_FIELDS, RUNS, stage_config, stages
from hero_core.train.train_config import TrainConfig


def test_a_recipe_brings_the_stages_it_continues_from():
    assert stages("hero-10-s1") == ["hero-10-s1"]
    assert stages("hero-10") == ["hero-10-s1", "hero-10"]
    assert stages("hero-40") == ["hero-10-s1", "hero-10-seq", "hero-25", "hero-40"]
    assert stages("local-25") == ["local-10-s1", "local-10-seq", "local-25"]
    with pytest.raises(ValueError, match="unknown recipe 'hero-99'"):
        stages("hero-99")


def test_make_checkpoints_trains_from_the_same_table(tmp_path):
    from hero_core.train import bundled_runs

    assert bundled_runs.RUNS is RUNS and bundled_runs.DATA_BLOCKS == DATA_BLOCKS == 3000
    assert bundled_runs.location("hero-10", tmp_path) == tmp_path / "hero-10"  # bundled: into the package
    assert bundled_runs.location("hero-10-seq", tmp_path) == bundled_runs.STAGE_DIR / "hero-10-seq"  # a stage
    with pytest.raises(ValueError, match="unknown runs \\['hero-99'\\]"):
        bundled_runs.train_runs(None, ["hero-10", "hero-99"], tmp_path)


def test_a_stage_config_is_the_one_make_checkpoints_built_by_hand(tmp_path):
    run = RUNS["hero-10-r2"]
    cfg = stage_config(run, tmp_path / "w", steps=900, start_dir=tmp_path / "hero-10-r2-s1", threads=1)
    by_hand = TrainConfig(out=str(tmp_path / "w"), variant=run.variant, target_skip=run.target_skip, steps=900,
                          threads=1, budget_scope=run.budget_scope, data_blocks=DATA_BLOCKS, lr=run.lr,
                          order_seed=run.order_seed, **dict(run.levers), init_from=str(tmp_path / "hero-10-r2-s1"),
                          head_hidden=run.head_hidden, d_encoder=run.d_encoder)
    assert cfg == by_hand and cfg.memory_kernel == "softmax" and cfg.lr == 5e-5
    assert (cfg.head_hidden, cfg.d_encoder) == (256, 128)  # recipe 2 trained at the paper's widths
    assert stage_config(RUNS["hero-10-s1"], "o", steps=1, start_dir=None).init_from is None
    with pytest.raises(ValueError, match="a recipe sets lr"):
        stage_config(run, "o", steps=1, start_dir=None, lr=1.0)
    assert {"variant", "target_skip", "steps", "lr", "init_from"} <= set(RECIPE_FIELDS)


def test_a_base_model_without_chat_template_trains_on_the_plain_built_in_domains():
    from hero_core.train.train_data import builtin_mix

    cfg = TrainConfig(out="o")
    chat = type("Hero", (), {"tokenizer": type("T", (), {"chat_template": "{{ messages }}"})()})()
    base = type("Hero", (), {"tokenizer": type("T", (), {"chat_template": None})()})()
    assert builtin_mix(chat, cfg) == cfg.data_mix
    assert builtin_mix(base, cfg) == {"code": 1.5, "reasoning": 1.0}


def test_recipe_hero_10_runs_both_stages_on_a_tiny_model(tmp_path, monkeypatch, capsys):
    from hero_core.cli.main import main
    from hero_core.method.tiny import tiny_model_dir

    model = tiny_model_dir("llama", tmp_path / "model")
    text = tmp_path / "my.txt"
    text.write_text("\n\n".join(" ".join(f"w{i}{j}" for j in range(150)) for i in range(8)))
    monkeypatch.setenv("HERO_LENS_CACHE", str(tmp_path / "cache"))
    args = ["train", "--recipe", "hero-10", "--steps-scale", "0.002", "--backbone", str(model), "--data", str(text),
            "--out", str(tmp_path / "run"), "--batch-size", "2", "--seq-len", "32", "--dtype", "fp32", "--threads", "1"]
    assert main(args) == 0
    first = json.loads((tmp_path / "run" / "stages" / "hero-10-s1" / "hero_config.json").read_text())["training"]
    final = json.loads((tmp_path / "run" / "hero_config.json").read_text())["training"]
    assert first["train_config"]["steps"] == 2 and first["train_config"]["budget_scope"] == "batch"
    assert final["train_config"]["lr"] == 5e-5 and final["init_from"] == "hero-10-s1"
    assert [s["checkpoint"] for s in final["earlier_stages"]] == ["hero-10-s1"]
    assert final["data_card"]["source"] == "your text (--data)"
    capsys.readouterr()
    assert main(args) == 0  # a rerun finds both stages trained
    assert capsys.readouterr().out.count("already trained") == 2
    with pytest.raises(SystemExit):
        main(["train", "--recipe"])
    assert main(args[:1] + ["--steps", "7"] + args[1:]) == 2  # --steps is the recipe's to set
    assert "sets --steps itself" in capsys.readouterr().err
