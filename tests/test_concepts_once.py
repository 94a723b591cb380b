"""The shared functions behind four concepts that each exist once: a finished checkpoint put onto a backbone
(hero_core.method.model.load_checkpoint), a run's realised param skip (hero_core.measures.accounting.mean_param_skip and
hero_core.method.tau_search.realised_skip), the tau search that meets a skip target (matched_tau) and "this run is
already trained" (hero_core.method.trained_settings, behind a recipe's stages and a study's runs)."""

import dataclasses
import json
import logging
from pathlib import Path

import pytest
import torch

from hero_core.measures.accounting import mean_param_skip
from hero_core.method import checkpoint as ckpt
from hero_core.method.model import UNTRAINED, fresh_router, hero_on_backbone, load_checkpoint
from hero_core.method.tau_search import TAU_RANGE, realised_skip
from hero_core.method.tiny import tiny_backbone


def _blocks(tiny, n_blocks: int = 2, seq_len: int = 24) -> torch.Tensor:
    generator = torch.Generator().manual_seed(3)
    return torch.randint(5, len(tiny.tokenizer), (n_blocks, seq_len), generator=generator)


# -- a checkpoint onto a backbone --------------------------------------------------------------------------
def test_a_checkpoint_for_another_backbone_is_refused_by_the_one_loader_and_by_a_training_start(tiny, tmp_path):
    from hero_core.train.train_config import TrainConfig
    from hero_core.train.train_steps import _start_from_checkpoint

    own = tiny.backbone.fingerprint
    other = dataclasses.replace(own, n_layers=own.n_layers + 1)
    ckpt.save_checkpoint(tmp_path / "elsewhere", tiny.router, other, "another-model")
    with pytest.raises(ckpt.BackboneMismatchError, match="trained for another-model .* loaded backbone is"):
        load_checkpoint(tmp_path / "elsewhere", tiny.backbone)
    # a training run that starts from it goes through the same check
    cfg = TrainConfig(out=str(tmp_path / "run"), init_from=str(tmp_path / "elsewhere"), branch_scaling="paper")
    with pytest.raises(ckpt.BackboneMismatchError):
        _start_from_checkpoint(cfg, tiny, fresh_router(tiny.backbone, branch_scaling="paper"))


def test_the_one_loader_logs_the_training_health_and_the_default_falls_back_only_on_another_backbone(tiny, tmp_path,
                                                                                                  caplog):
    ckpt.save_checkpoint(tmp_path / "here", tiny.router, tiny.backbone.fingerprint, tiny.backbone.name)
    with caplog.at_level(logging.INFO, logger="hero_core.method.model"):
        loaded = load_checkpoint(tmp_path / "here", tiny.backbone)
    assert "checkpoint here: no health record" in caplog.text
    assert torch.equal(loaded.router.adapters[0].w2.weight, tiny.router.adapters[0].w2.weight)
    # The bundled default was trained for the embedded model: on the tiny backbone it is refused by the same check,
    # and only that refusal gives fresh routers.
    if ckpt.bundled_names():
        assert hero_on_backbone(None, tiny.backbone).checkpoint_name == UNTRAINED


# -- the realised param skip -------------------------------------------------------------------------------
def test_the_realised_skip_is_the_skipped_ffn_parameters_counted_by_hand(tiny):
    blocks, tau = _blocks(tiny), 0.5
    call = tiny.new_call("hero", tau)
    with torch.no_grad():
        tiny.forward(blocks, None, call, use_cache=False)
    # Counted without the library's accounting: gates below tau skip their FFN, whose parameters and the model's
    # are read off a fresh, never-wrapped copy of the same backbone.
    skipped = sum(int((record.fields["gate"] < tau).sum()) for record in call.passes[-1].records)
    fresh = tiny_backbone().model
    ffn = sum(p.numel() for p in fresh.model.layers[0].mlp.parameters())
    total = sum(p.numel() for p in fresh.parameters())
    by_hand = skipped / blocks.numel() * ffn / total
    assert skipped > 0  # the tiny router's gates sit around 0.5: some FFNs are skipped, else nothing is checked
    # the same decisions; only the order of float sums differs
    assert realised_skip(tiny, blocks, "hero", tau) == pytest.approx(by_hand, rel=1e-9)
    executed = call.passes[-1].executed()
    assert mean_param_skip(executed, tiny.profile) == pytest.approx(by_hand, rel=1e-9)  # a training step's tensor
    assert mean_param_skip(executed.numpy(), tiny.profile) == pytest.approx(by_hand, rel=1e-9)


# -- the tau search ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("target_tau", [0.3, 0.6])
def test_the_tau_search_lands_on_a_reachable_skip_and_reports_what_it_realises(tiny, target_tau):
    blocks = _blocks(tiny, n_blocks=4, seq_len=48)  # 192 tokens: one threshold a pass, the long-input search
    target = realised_skip(tiny, blocks, "hero", target_tau)  # reachable by construction
    tau, realised = tiny.tau_for_param_skip(blocks, None, "hero", target)
    assert TAU_RANGE[0] <= tau <= TAU_RANGE[1]
    assert realised == pytest.approx(realised_skip(tiny, blocks, "hero", tau), rel=1e-12)
    # Skip is not exactly monotone in tau (later gates read what earlier decisions changed): within 2 % of the
    # skip's range over the taus, as the twins' match is held.
    span = realised_skip(tiny, blocks, "hero", TAU_RANGE[1]) - realised_skip(tiny, blocks, "hero", TAU_RANGE[0])
    assert abs(realised - target) <= 0.02 * span


# -- a run already trained ---------------------------------------------------------------------------------
def _trained(folder, train_config: dict, router: dict | None = None):
    """A finished run's config as training writes it last (only what the settings are read from)."""
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"router": router or {}, "training": {"train_config": train_config}}
    (folder / ckpt.CONFIG_FILE).write_text(json.dumps(meta))
    return folder


def test_a_recipe_stage_and_a_study_run_are_found_trained_by_the_same_settings(tmp_path):
    from hero_core.eval.study.lanes import finished, run_settings
    from hero_core.eval.study.spec import StudyError, StudySpec, plan_runs
    from hero_core.method.config import router_widths
    from hero_core.method.trained_settings import trained_settings
    from hero_core.train.recipes import RUNS, already_trained, stage_settings

    assert trained_settings(tmp_path / "nothing") is None
    assert not already_trained(tmp_path / "nothing", RUNS["hero-10"], 1220)
    # a stage: every setting of its recipe, its router's widths and branch scaling read off the checkpoint
    run, d_model = RUNS["hero-10-r7"], 576  # widths sized to the backbone (0 in the recipe)
    asked = stage_settings(run, run.steps, None, d_model)
    head_hidden, d_encoder = router_widths(d_model)
    router = {"d_model": d_model, "head_hidden": head_hidden, "d_encoder": d_encoder, "branch_scaling": "unscaled"}
    recorded = {k: v for k, v in asked.items() if k not in ("router_widths", "branch_scaling", "init_from")}
    stage = _trained(tmp_path / "stage", recorded | {"init_from": f"/elsewhere/{run.start}"}, router)
    assert already_trained(stage, run, run.steps)
    assert not already_trained(stage, run, run.steps + 1)
    assert not already_trained(stage, dataclasses.replace(run, variant="no_history"), run.steps)  # another arm's
    assert not already_trained(_trained(tmp_path / "paper", recorded | {"init_from": run.start},
                                        router | {"branch_scaling": "paper"}), run, run.steps)
    # a study's run: checked against the settings it trains with; a config recorded before seeds were kept was
    # trained at seed 0
    spec = StudySpec(out=str(tmp_path / "study"), arms=("hero", "no_history"), seeds=1, batch_size=2,
                     train_overrides={"eval_every": 2})
    job = plan_runs(spec)[0]
    as_asked = {k: v for k, v in run_settings(job, spec).items() if k != "seed"}
    _trained(Path(job.folder), as_asked)
    assert finished(job, spec)
    _trained(Path(job.folder), as_asked | {"batch_size": 4})  # another study's run in the same folder
    with pytest.raises(StudyError, match="batch_size"):
        finished(job, spec)
