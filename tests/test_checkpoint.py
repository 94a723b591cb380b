"""Checkpoints: round trip, wrong backbone, corrupt files, malformed configs; backbone loading errors."""

import json
import shutil

import pytest
import torch

from hero_core.backbones.loading import BackboneError, Fingerprint, load_backbone, resolve_device
from hero_core.method import checkpoint as ckpt
from hero_core.method.model import HeroModel


@pytest.fixture()
def saved(tiny, tmp_path):
    return ckpt.save_checkpoint(tmp_path / "run", tiny.router, tiny.backbone.fingerprint, tiny.backbone.name)


def test_round_trip_restores_identical_routing(tiny, saved):
    found = ckpt.read_checkpoint(saved)
    ckpt.check_backbone(found, tiny.backbone.fingerprint, tiny.backbone.name)
    router = ckpt.build_router(found)
    for key, value in tiny.router.state_dict().items():
        assert torch.equal(router.state_dict()[key], value.cpu()), key
    meta_text = (saved / ckpt.CONFIG_FILE).read_text()
    meta = json.loads(meta_text)
    assert meta_text == json.dumps(meta, sort_keys=True, indent=2)  # sorted keys
    assert meta["router"]["variant"] == "hero" and meta["backbone"]["n_layers"] == 4
    assert not list(saved.glob("*.tmp"))  # atomic writes leave no temp files behind


def test_other_backbone_is_refused_naming_both(saved, tiny):
    found = ckpt.read_checkpoint(saved)
    other = Fingerprint("llama", 30, 576, 1536, 49152, 134515008)
    with pytest.raises(ckpt.CheckpointError, match="tiny-random-llama.*SmolLM2"):
        ckpt.check_backbone(found, other, "SmolLM2-135M-Instruct")


def test_truncated_safetensors_gives_clear_error(saved):
    weights = saved / ckpt.WEIGHTS_FILE
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(ckpt.CheckpointError, match="corrupt or truncated"):
        ckpt.read_checkpoint(saved)


def test_garbage_weights_file(saved):
    (saved / ckpt.WEIGHTS_FILE).write_bytes(b"\x80\x04not a safetensors file")
    with pytest.raises(ckpt.CheckpointError):
        ckpt.read_checkpoint(saved)


@pytest.mark.parametrize("mutate, message", [
    (lambda m: m["router"].update(variant="telepathy"), "unknown variant"),
    (lambda m: m["router"].update(tau="high"), "tau"),
    (lambda m: m["router"].update(d_model=-3), "d_model"),
    (lambda m: m["router"].update(colour="red"), "unknown fields"),
    (lambda m: m.update(format_version=99), "format_version"),
    (lambda m: m.pop("backbone"), "fingerprint"),
])
def test_malformed_config_is_refused(saved, mutate, message):
    path = saved / ckpt.CONFIG_FILE
    meta = json.loads(path.read_text())
    mutate(meta)
    path.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=message):
        ckpt.read_checkpoint(saved)


def test_config_that_is_not_json(saved):
    (saved / ckpt.CONFIG_FILE).write_text("{not json")
    with pytest.raises(ckpt.CheckpointError, match="not valid JSON"):
        ckpt.read_checkpoint(saved)


def test_missing_checkpoint_names_bundled_ones(tmp_path):
    with pytest.raises(ckpt.CheckpointError, match="no checkpoint"):
        ckpt.read_checkpoint(tmp_path / "nowhere")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ckpt.CheckpointError, match="not a HeRo checkpoint"):
        ckpt.read_checkpoint(empty)


def test_nan_weights_are_refused(saved, tiny):
    found = ckpt.read_checkpoint(saved)
    found.state_dict["eta"] = torch.full_like(found.state_dict["eta"], float("nan"))
    with pytest.raises(ckpt.CheckpointError, match="NaN"):
        ckpt.build_router(found)


def test_backbone_path_errors(tmp_path):
    with pytest.raises(BackboneError, match="does not exist"):
        load_backbone(tmp_path / "missing")
    with pytest.raises(BackboneError, match="no config.json"):
        load_backbone(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"pickle")
    with pytest.raises(BackboneError, match="safetensors only"):
        load_backbone(tmp_path)


def test_bad_device_and_quantization_requests(monkeypatch):
    with pytest.raises(BackboneError, match="unknown device"):
        resolve_device("tpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(BackboneError, match="no CUDA GPU"):
        resolve_device("cuda")
    assert resolve_device("auto").type == "cpu"
    with pytest.raises(BackboneError, match="unknown quantization"):
        load_backbone(None, quantization="int3")


def test_nf4_without_bitsandbytes_is_explained(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "bitsandbytes" else real(name, *a))
    with pytest.raises(BackboneError, match="bitsandbytes"):
        load_backbone(None, quantization="nf4", device="cpu")


def test_local_checkpoint_loads_through_model(tiny, saved, tmp_path):
    from hero_core.method.tiny import tiny_backbone

    found = ckpt.read_checkpoint(saved)
    hero = HeroModel(tiny_backbone(seed=0), ckpt.build_router(found), found.name)
    a, b = hero.trace("hello world"), tiny.trace("hello world")
    assert a.to_dict()["gate"] == b.to_dict()["gate"]  # same weights, same decisions
    copy = tmp_path / "copy"
    shutil.copytree(saved, copy)
    assert ckpt.resolve(copy / ckpt.CONFIG_FILE) == copy


def test_with_router_shares_the_backbone_and_switches_decisions(tiny):
    from hero_core.method.model import fresh_router

    other = tiny.with_router(fresh_router(tiny.backbone), "fresh")
    assert other.model is tiny.model and other.checkpoint_name == "fresh"
    fresh, original = other.trace("a b c d"), tiny.trace("a b c d")
    assert fresh.executed.all() and not original.executed.all()  # fresh gates start near 1
    with pytest.raises(ValueError, match="routes layers"):
        tiny.with_router(fresh_router(tiny.backbone, routed_layers=[0, 1]), "partial")


def test_load_checkpoints_puts_each_on_the_one_backbone_and_checks_it(tiny, saved, tmp_path):
    from hero_core.method.model import fresh_router, load_checkpoints

    other = ckpt.save_checkpoint(tmp_path / "other", fresh_router(tiny.backbone), tiny.backbone.fingerprint,
                                 tiny.backbone.name)
    models = load_checkpoints([saved, other], tiny.backbone)
    assert list(models) == [str(saved), str(other)]  # keyed by the names as given
    a, b = models[str(saved)], models[str(other)]
    assert a.model is b.model is tiny.model and (a.checkpoint_name, b.checkpoint_name) == ("run", "other")
    assert a.trace("hello world").to_dict()["gate"] == tiny.trace("hello world").to_dict()["gate"]
    assert b.trace("a b c d").executed.all()  # fresh gates start near 1
    alien = ckpt.save_checkpoint(tmp_path / "alien", tiny.router, Fingerprint("llama", 30, 576, 1536, 49152, 134515008),
                                 "SmolLM2-135M-Instruct")
    with pytest.raises(ckpt.CheckpointError, match="was trained for SmolLM2"):
        load_checkpoints([saved, alien], tiny.backbone)
