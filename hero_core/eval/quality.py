"""Output quality of a routed run against the dense model, per token (pure tensor functions)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def next_token_nll(logits: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
    """NLL of each next token: logits (T, V), token_ids (T,) -> (T-1,) in nats."""
    return F.cross_entropy(logits[:-1].float(), token_ids[1:], reduction="none")


def kl_from_dense(dense_logits: torch.Tensor, routed_logits: torch.Tensor) -> torch.Tensor:
    """KL(dense || routed) per position: (T, V) x2 -> (T,) in nats."""
    p_log = F.log_softmax(dense_logits.float(), -1)
    q_log = F.log_softmax(routed_logits.float(), -1)
    return (p_log.exp() * (p_log - q_log)).sum(-1)


def top1_agreement(dense_logits: torch.Tensor, routed_logits: torch.Tensor) -> torch.Tensor:
    """Whether the routed model's top-1 next token equals the dense one, per position: (T,) bool."""
    return dense_logits.argmax(-1) == routed_logits.argmax(-1)


def compare_to_dense(dense_logits: torch.Tensor, routed_logits: torch.Tensor, token_ids: torch.Tensor) -> dict:
    """Per-token and mean quality figures of a routed run against dense on the same tokens."""
    nll_routed = next_token_nll(routed_logits, token_ids)
    nll_dense = next_token_nll(dense_logits, token_ids)
    kl = kl_from_dense(dense_logits, routed_logits)
    agree = top1_agreement(dense_logits, routed_logits)
    return {
        "nll": nll_routed.tolist(), "nll_dense": nll_dense.tolist(), "kl": kl.tolist(), "top1_agree": agree.tolist(),
        "mean_nll": float(nll_routed.mean()) if len(nll_routed) else 0.0,
        "mean_nll_dense": float(nll_dense.mean()) if len(nll_dense) else 0.0,
        "mean_kl": float(kl.mean()), "top1_agreement": float(agree.float().mean()),
    }
