"""Every supported model family, as a tiny random model saved as a local HF directory: the dense variant is the
plain model, routing skips FFNs and generates, two training steps run from your own text, and NF4 loads."""

import importlib.util
import json
import random

import pytest
import torch

from hero_core.backbones.families import (
    FAMILIES,
    SUPPORTED_MODEL_TYPES,
    UnsupportedFamily,
    family_of,
    is_parallel_residual,
)
from hero_core.backbones.loading import load_backbone
from hero_core.method.model import HeroModel, fresh_router, load_hero, spread_gates
from hero_core.method.tiny import tiny_model_dir

# Base-model families get a tokenizer without a chat template, as their real checkpoints ship.
BASE_MODELS = {"gpt2", "gpt_neox", "olmo"}
PROMPT = "The river runs past the old mill, and the children count the boats."


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    return {t: tiny_model_dir(t, root / t, chat_template=t not in BASE_MODELS) for t in SUPPORTED_MODEL_TYPES}


@pytest.fixture(scope="module")
def my_text(tmp_path_factory):
    words = "the river runs past the old mill and children count boats drifting toward a grey sea".split()
    rng = random.Random(0)
    path = tmp_path_factory.mktemp("text") / "my.txt"
    path.write_text("\n\n".join(" ".join(rng.choice(words) for _ in range(80)) for _ in range(12)))
    return path


def _routed(model_dir) -> HeroModel:
    backbone = load_backbone(model_dir, device="cpu")
    torch.manual_seed(0)
    return HeroModel(backbone, spread_gates(fresh_router(backbone, gate_bias_init=0.0), std=1.0), "test-random")


def test_the_table_covers_the_families_the_issue_names():
    names = {f.name for f in FAMILIES}
    assert {"Llama", "Mistral", "Qwen2", "Qwen3", "Gemma 2", "Gemma 3", "Phi-3", "OLMo", "OLMo 2", "GPT-NeoX",
            "GPT-2"} <= names
    with pytest.raises(UnsupportedFamily, match="GPT-NeoX"):
        family_of(type("Config", (), {"model_type": "bert"})())


@pytest.mark.parametrize("model_type", SUPPORTED_MODEL_TYPES)
def test_dense_equals_the_plain_model_and_routing_skips(model_type, model_dirs):
    plain = load_backbone(model_dirs[model_type], device="cpu").model
    hero = _routed(model_dirs[model_type])
    enc = hero.encode([PROMPT, "A shorter one."])  # two rows: padding and the mask are exercised too
    with torch.no_grad():
        expected = plain(input_ids=enc.input_ids, attention_mask=enc.attention_mask).logits
        dense = hero.forward(enc.input_ids, enc.attention_mask, hero.new_call("dense", record=False))
        routed = hero.forward(enc.input_ids, enc.attention_mask, hero.new_call("hero"))
    keep = enc.attention_mask.bool()
    assert (dense - expected)[keep].abs().max().item() <= 1e-4
    assert (routed - expected)[keep].abs().max().item() > 1e-3  # skipped FFNs change the output
    trace = hero.trace(PROMPT)
    executed = trace.executed_per_token()
    assert 0 < executed.sum() < trace.n_tokens * trace.n_routed  # some FFNs run, some are skipped
    assert 0 < trace.summary()["param_skip"] < 1


@pytest.mark.parametrize(("model_type", "reads_block_input"), [("gpt_neox", True), ("llama", False)])
def test_a_parallel_residual_block_routes_on_the_block_input(model_type, reads_block_input, model_dirs):
    from hero_core.method.inject import decoder_layers, hbar_site

    hero = _routed(model_dirs[model_type])
    assert is_parallel_residual(hero.model.config) == reads_block_input
    grabbed = {}

    def first_input(name):
        def hook(module, args, kwargs):
            grabbed[name] = args[0] if args else kwargs["hidden_states"]
        return hook
    handles = [decoder_layers(hero.model)[1].register_forward_pre_hook(first_input("x"), with_kwargs=True),
               hbar_site(hero.model, 1).register_forward_pre_hook(first_input("hbar"), with_kwargs=True)]
    try:
        hero.trace(PROMPT)
    finally:
        for handle in handles:
            handle.remove()
    # GPT-NeoX's FFN reads LN2(x) of the block input x, so hbar is x; in a sequential block it is x + Attn(...).
    assert torch.equal(grabbed["x"], grabbed["hbar"]) == reads_block_input


@pytest.mark.parametrize("model_type", SUPPORTED_MODEL_TYPES)
def test_generate(model_type, model_dirs):
    hero = _routed(model_dirs[model_type])
    n_prompt = len(hero.encode(["Once upon a time"]).input_ids[0])
    text, trace = hero.generate("Once upon a time", max_new_tokens=4)
    assert isinstance(text, str) and trace.n_tokens > n_prompt


@pytest.mark.parametrize("model_type", SUPPORTED_MODEL_TYPES)
def test_two_training_steps_from_your_own_text(model_type, model_dirs, my_text, tmp_path, monkeypatch):
    from hero_core.cli.main import main

    monkeypatch.setenv("HERO_LENS_CACHE", str(tmp_path / "cache"))  # teacher and adapter caches of this test only
    out = tmp_path / "run"
    rc = main(["train", "--backbone", str(model_dirs[model_type]), "--data", str(my_text), "--out", str(out),
               "--steps", "2", "--batch-size", "2", "--seq-len", "32", "--data-blocks", "4", "--dtype", "fp32",
               "--target-skip", "0.05"])
    assert rc == 0
    meta = json.loads((out / "hero_config.json").read_text())
    card = meta["training"]["data_card"]
    assert card["sources"][0]["path"] == str(my_text) and card["sources"][0]["train_tokens"] > 0
    source = card["sources"][0]
    assert card["blocks_used"] == 4 and card["held_out"]["items"] + source["train_items"] == source["items"] >= 2
    assert meta["backbone"]["model_type"] == model_type
    hero = load_hero(out, backbone=model_dirs[model_type], device="cpu")
    trace = hero.trace(PROMPT)
    assert trace.checkpoint == "run" and trace.n_routed == 3


@pytest.mark.parametrize("model_type", SUPPORTED_MODEL_TYPES)
def test_nf4_load(model_type, model_dirs):
    if importlib.util.find_spec("bitsandbytes") is None:
        pytest.skip("bitsandbytes is not installed: NF4 needs it (pip install bitsandbytes)")
    full = _routed(model_dirs[model_type])
    try:
        backbone = load_backbone(model_dirs[model_type], quantization="nf4", device="cpu")
    except (RuntimeError, ImportError) as err:  # a bitsandbytes build without CPU kernels
        pytest.skip(f"this bitsandbytes build cannot load 4-bit weights on this machine: {err}")
    hero = HeroModel(backbone, full.router, "test-random")
    trace = hero.trace(PROMPT)
    assert trace.backbone.endswith("(nf4)") and trace.n_tokens > 0
    assert hero.profile.ffn_params == full.profile.ffn_params  # packed 4-bit weights counted at their real shape


@pytest.mark.parametrize("model_type", ["gemma2", "olmo2", "gpt2"])
def test_unwrapped_restores_the_bare_blocks_and_rewraps(model_type, model_dirs):
    from hero_core.method.inject import FFNWithOutputNorm, HiddenStateTap, RoutedFFN, unwrapped

    hero = _routed(model_dirs[model_type])
    before = hero.trace(PROMPT).executed_per_token()
    ours = (RoutedFFN, HiddenStateTap, FFNWithOutputNorm, torch.nn.Identity)
    with unwrapped(hero.model) as bare:
        assert not any(isinstance(m, ours) for m in bare.modules())
    assert sum(isinstance(m, RoutedFFN) for m in hero.model.modules()) == 3
    assert (hero.trace(PROMPT).executed_per_token() == before).all()


def test_a_base_model_refuses_chat_formatting_in_words_for_both_the_command_line_and_the_app(model_dirs):
    from hero_core.method.model import PromptError

    hero = _routed(model_dirs["gpt2"])
    with pytest.raises(PromptError, match="no chat template .* without --chat on the command line"):
        hero.trace(PROMPT, chat_template=True)
    assert hero.trace(PROMPT).n_tokens > 0


def test_a_base_model_trains_on_the_plain_built_in_domains_without_data(model_dirs, tmp_path, monkeypatch):
    from hero_core.cli.main import main

    monkeypatch.setenv("HERO_LENS_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    assert main(["train", "--backbone", str(model_dirs["gpt_neox"]), "--out", str(out), "--steps", "2",
                 "--batch-size", "2", "--seq-len", "32", "--data-blocks", "4", "--dtype", "fp32"]) == 0
    card = json.loads((out / "hero_config.json").read_text())["training"]["data_card"]
    assert card["mix"] == {"code": 1.5, "reasoning": 1.0} and "no chat template" in card["note"]
    assert not (tmp_path / "cache" / "data").exists()  # no chat text was self-distilled


def test_transformers_block_names_live_in_the_family_table_only():
    from pathlib import Path

    core = Path(__file__).resolve().parents[1] / "hero_core"
    names = ("post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm", "ln_2",
             "model.model.", ".gpt_neox", "transformer.h", "embed_tokens")
    offenders = {str(path.relative_to(core)): [n for n in names if n in path.read_text()]
                 for path in core.rglob("*.py") if path.name not in ("families.py", "inject.py")}
    assert not {path: found for path, found in offenders.items() if found}
