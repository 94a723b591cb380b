"""A tiny random Llama with the embedded tokenizer, for fast tests and the app's test mode.

Set ``HERO_LENS_TINY=1`` to make :func:`hero_core.load_hero` callers in the app use it. Weights are
random (seeded), so its text is gibberish; its routing machinery is exactly the real one.
"""

from __future__ import annotations

import torch

from hero_core.backbones.loading import Backbone, embedded_model_dir, freeze_for_inference, resolve_device
from hero_core.method.model import HeroModel, fresh_router

TINY_NAME = "tiny-random-llama"


def tiny_backbone(*, seed: int = 0, n_layers: int = 4, hidden: int = 64, intermediate: int = 128,
                  device: str = "cpu") -> Backbone:
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir())
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=intermediate,
                         num_hidden_layers=n_layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=2048, tie_word_embeddings=True,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    freeze_for_inference(model, tokenizer)
    dev = resolve_device(device)
    return Backbone(model=model.to(dev), tokenizer=tokenizer, name=TINY_NAME, quantization=None, device=dev)


def tiny_hero(*, seed: int = 0, variant: str = "hero", gate_bias_init: float = 0.0, memory_kernel: str = "elu1",
              memory_scale_init: float = 1.0, **kwargs) -> HeroModel:
    """Tiny backbone with random routers. ``gate_bias_init=0`` puts gates around 0.5, so both branches
    are exercised (a trained-looking mix of executed and skipped FFNs)."""
    backbone = tiny_backbone(seed=seed, **kwargs)
    torch.manual_seed(seed + 1)
    # The paper's branch scaling, so a test's gate multiplies both branches and every path of the maths runs.
    router = fresh_router(backbone, variant=variant, gate_bias_init=gate_bias_init, memory_kernel=memory_kernel,
                          memory_scale_init=memory_scale_init, branch_scaling="paper")
    # Randomise the zero-initialised parts so history, memory and adapters all matter in tests.
    with torch.no_grad():
        for module in (router.history_head[2], router.local_head.mlp[2]):
            torch.nn.init.normal_(module.weight, std=0.5)
        for adapter in router.adapters:
            torch.nn.init.normal_(adapter.w2.weight, std=0.05)
    return HeroModel(backbone, router, "tiny-random")


# Config keywords a tiny model of each family needs beyond the shared ones (GPT-2 names its widths its own way).
_TINY_FAMILY_KWARGS = {
    "qwen3": {"head_dim": 16},
    "gemma2": {"head_dim": 16, "query_pre_attn_scalar": 16},
    "gemma3_text": {"head_dim": 16, "query_pre_attn_scalar": 16},
    "gpt2": {"n_inner": 128, "n_positions": 2048},
    "gpt_neox": {"use_parallel_residual": True, "intermediate_size": 128, "max_position_embeddings": 2048},
}
_SHARED_KWARGS = {"intermediate_size": 128, "num_key_value_heads": 2, "max_position_embeddings": 2048}


def tiny_model_dir(model_type: str, path, *, seed: int = 0, n_layers: int = 3, chat_template: bool = True):
    """Save a tiny random model of any supported family, with the embedded tokenizer, as a local HF directory
    (safetensors): a stand-in for "your own model" in tests. ``chat_template=False`` gives a base-model tokenizer."""
    from pathlib import Path

    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir())
    if not chat_template:
        tokenizer.chat_template = None
    own = _TINY_FAMILY_KWARGS.get(model_type, {})
    shared = {} if model_type in ("gpt2", "gpt_neox") else _SHARED_KWARGS
    config = CONFIG_MAPPING[model_type](
        vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=n_layers, num_attention_heads=4,
        tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.eos_token_id, **shared, **own)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config).eval()
    path = Path(path)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path
