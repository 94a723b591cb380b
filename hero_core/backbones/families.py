"""The model families HeRo Lens wraps, each described once: where transformers keeps a family's decoder
blocks, which module of a block is the FFN, which norm feeds it, and where the residual point hbar is.

Only :mod:`hero_core.method.inject` reads this table (and hands out what other modules need through its own
functions), so transformers' module names live here and nowhere else. Names checked against
transformers 5.x's ``modeling_*.py`` of each family.

A block, in the terms of docs/method.md (Eq. 9): the router reads hbar, the residual stream the FFN's
branch starts from; the FFN's input is u = LN_ffn(hbar); what the block adds to the residual is the FFN's
output, after the family's post-FFN norm where it has one. Skipping replaces exactly that addend by
Adapter(u). Three shapes occur:

* **pre-norm** (Llama, Mistral, Qwen2/3, Phi-3, OLMo, GPT-2): ``h = hbar + FFN(LN(hbar))`` with hbar the
  residual after attention. hbar is the input of the FFN's norm.
* **sandwich norms** (Gemma 2/3: ``pre_feedforward_layernorm`` / ``post_feedforward_layernorm``; OLMo 2/3:
  no norm before the FFN, ``post_feedforward_layernorm`` after it): ``h = hbar + LN_post(FFN(u))``. The FFN
  unit that runs or is skipped is LN_post ∘ FFN, so the adapter stands in for the normed addend; skipping the
  FFN alone would leave LN_post to rescale the adapter's small output to unit RMS.
* **parallel residual** (GPT-NeoX / Pythia with ``use_parallel_residual``): ``h = x + Attn(LN1(x)) +
  FFN(LN2(x))``: the FFN reads the block's *input* x, not the post-attention state, so hbar = x there.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    """Where one family keeps its parts, as attribute names on transformers' modules."""

    name: str  # as people call it
    model_types: tuple[str, ...]  # config.model_type values it covers
    stack: str = "model"  # attribute of the *ForCausalLM holding the decoder stack
    layers: str = "layers"  # attribute of the stack: the ModuleList of blocks
    final_norm: str = "norm"  # attribute of the stack
    embeddings: str = "embed_tokens"  # attribute of the stack
    lm_head: str = "lm_head"  # attribute of the *ForCausalLM
    ffn: str = "mlp"  # attribute of a block
    # The norm whose input is hbar and whose output is u; None: the FFN reads hbar itself (u = hbar).
    ffn_input_norm: str | None = "post_attention_layernorm"
    # A norm applied to the FFN's output before the residual add; routed together with the FFN.
    ffn_output_norm: str | None = None
    # config attribute that switches on the parallel residual (hbar = the block's input); None: never parallel.
    parallel_flag: str | None = None


FAMILIES = (
    Family("Llama", ("llama",)),
    Family("Mistral", ("mistral",)),
    Family("Qwen2", ("qwen2",)),
    Family("Qwen3", ("qwen3",)),
    Family("Phi-3", ("phi3",)),
    Family("OLMo", ("olmo",)),  # parameter-free LayerNorm before the FFN
    # OLMo 3's block is OLMo 2's (norms after attention and after the FFN, none before it).
    Family("OLMo 2", ("olmo2", "olmo3"), ffn_input_norm=None, ffn_output_norm="post_feedforward_layernorm"),
    Family("Gemma 2", ("gemma2",), ffn_input_norm="pre_feedforward_layernorm",
           ffn_output_norm="post_feedforward_layernorm"),
    # Gemma 3's text model; the multimodal "gemma3" checkpoints nest it under a vision tower and are not wrapped.
    Family("Gemma 3", ("gemma3_text",), ffn_input_norm="pre_feedforward_layernorm",
           ffn_output_norm="post_feedforward_layernorm"),
    Family("GPT-2", ("gpt2",), stack="transformer", layers="h", final_norm="ln_f", embeddings="wte",
           ffn_input_norm="ln_2"),
    Family("GPT-NeoX", ("gpt_neox",), stack="gpt_neox", final_norm="final_layer_norm", embeddings="embed_in",
           parallel_flag="use_parallel_residual"),
)
SUPPORTED_MODEL_TYPES = tuple(t for family in FAMILIES for t in family.model_types)


class UnsupportedFamily(ValueError):
    """A backbone whose blocks HeRo Lens does not know how to wrap."""


def family_of(config) -> Family:
    """The family of a transformers config (or of anything with a ``model_type``)."""
    model_type = getattr(config, "model_type", None)
    for family in FAMILIES:
        if model_type in family.model_types:
            return family
    names = ", ".join(f"{f.name} ({'/'.join(f.model_types)})" for f in FAMILIES)
    raise UnsupportedFamily(f"model type {model_type!r} is not supported; HeRo Lens wraps {names}")


def is_parallel_residual(config) -> bool:
    family = family_of(config)
    return family.parallel_flag is not None and bool(getattr(config, family.parallel_flag, False))


def ffn_width(config) -> int:
    """The FFN's inner width (GPT-2 calls it n_inner, None meaning 4 x hidden)."""
    width = getattr(config, "intermediate_size", None) or getattr(config, "n_inner", None)
    return int(width or 4 * config.hidden_size)
