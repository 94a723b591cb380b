"""What a local model directory holds, read without loading it (hero_core.method.model_dirs): the same fingerprint the
loaded backbone has, so a mismatched checkpoint is refused before anything loads."""

from pathlib import Path

import pytest

from hero_core.backbones.loading import BackboneError, embedded_model_dir, load_backbone
from hero_core.method.checkpoint import CheckpointError, check_backbone, read_checkpoint
from hero_core.method.model_dirs import describe_model_dir
from hero_core.method.tiny import tiny_model_dir


@pytest.mark.parametrize(("model_type", "family", "chat"), [
    ("gemma2", "Gemma 2", True), ("gpt_neox", "GPT-NeoX", False), ("gpt2", "GPT-2", False), ("phi3", "Phi-3", True)])
def test_a_directory_is_described_with_the_fingerprint_its_loaded_backbone_has(tmp_path, model_type, family, chat):
    directory = tiny_model_dir(model_type, tmp_path / model_type, chat_template=chat)
    info = describe_model_dir(directory)
    assert info.family == family and info.chat_template is chat
    assert info.fingerprint == load_backbone(directory, device="cpu").fingerprint
    assert info.checkpoints == ()  # nothing bundled was trained for a random model
    words = info.describe()
    assert family in words and "3 layers" in words and ("yes" if chat else "base model") in words


def test_the_embedded_model_lists_the_bundled_checkpoints_and_a_mismatch_is_refused(tmp_path):
    info = describe_model_dir(embedded_model_dir())
    assert "hero-10" in info.checkpoints and info.family == "Llama" and info.chat_template
    other = describe_model_dir(tiny_model_dir("qwen2", tmp_path / "qwen2"))
    with pytest.raises(CheckpointError, match="was trained for SmolLM2-135M-Instruct"):
        check_backbone(read_checkpoint("hero-10"), other.fingerprint, "qwen2")


def test_what_is_not_a_model_directory_is_named(tmp_path):
    with pytest.raises(BackboneError, match="does not exist"):
        describe_model_dir(tmp_path / "missing")
    (tmp_path / "config.json").write_text('{"model_type": "bert", "hidden_size": 8}')
    (tmp_path / "model.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(BackboneError, match="not supported; HeRo Lens wraps"):
        describe_model_dir(tmp_path)


def test_the_app_picker_describes_the_directory_and_refuses_a_checkpoint_of_another_backbone(tmp_path, monkeypatch):
    import torch
    from streamlit.testing.v1 import AppTest

    directory = tiny_model_dir("gpt2", tmp_path / "gpt2", chat_template=False)
    monkeypatch.delenv("HERO_LENS_TINY", raising=False)
    monkeypatch.setenv("HERO_LENS_THREADS", str(torch.get_num_threads()))
    main = str(Path(__file__).resolve().parents[1] / "app" / "main.py")
    at = AppTest.from_file(main, default_timeout=180)
    at.session_state["sb_backbone_kind"] = "local directory"
    at.session_state["sb_backbone_path"] = str(directory)
    at.session_state["sb_checkpoint"] = "hero-10"
    at.run()
    assert not at.exception
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "GPT-2 (gpt2)" in captions and "chat template: no" in captions
    refusals = [e.value for e in at.sidebar.error]
    assert any("was trained for SmolLM2-135M-Instruct" in e and "gpt2" in e for e in refusals)
