"""Compute accounting: parameter skip (the paper's metric), its net form and the FLOP share saved.

* **param skip** (paper): per token, the parameters of the FFNs it skipped divided by the model's total
  parameter count; averaged over tokens.
* **net param skip**: the same, minus what the token used instead: the adapters of the skipped blocks
  and the router at every routed block (state encoder, path encoder, memory projections, both heads).
* **FLOP share saved**: FLOPs a token did not spend, over the dense model's FLOPs for that token
  (2 per weight of every matrix multiply, including the LM head, plus causal attention's
  4 * n_heads * head_dim * context per layer), net of adapter, router and memory-read FLOPs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class ComputeProfile:
    total_params: int  # every parameter of the backbone, tied embeddings counted once
    ffn_params: int  # one block's FFN (gate, up, down)
    adapter_params: int  # one block's adapter
    router_params: int  # router parameters used once per routed block
    linear_params: int  # weights of every matmul in a dense token's forward (blocks + LM head)
    n_layers: int
    attention_width: int  # n_heads * head_dim
    d_memory: int

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def token_compute(executed: np.ndarray, profile: ComputeProfile, positions: np.ndarray | None = None,
                  routed: bool = True) -> dict[str, np.ndarray]:
    """Per-token compute figures from the executed matrix (R, T) of booleans.

    ``positions`` are the tokens' context lengths minus one (defaults to 0..T-1); ``routed`` is False for
    the dense variant, where no router or adapter runs.
    """
    R, T = executed.shape
    skipped = (~executed.astype(bool)).sum(axis=0).astype(np.float64)  # (T,)
    if positions is None:
        positions = np.arange(T)
    p = profile
    param_skip = skipped * p.ffn_params / p.total_params
    router_uses = R if routed else 0
    net = (skipped * (p.ffn_params - p.adapter_params) - router_uses * p.router_params) / p.total_params
    dense_flops = 2.0 * p.linear_params + 4.0 * p.attention_width * (positions + 1) * p.n_layers
    memory_read_flops = 4.0 * p.d_memory * np.arange(R).sum() if routed else 0.0
    saved = (2.0 * skipped * (p.ffn_params - p.adapter_params) - 2.0 * router_uses * p.router_params
             - memory_read_flops)
    return {"param_skip": param_skip, "net_param_skip": net, "flop_share_saved": saved / dense_flops}
