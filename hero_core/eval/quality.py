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


def token_quality(dense_logits: torch.Tensor, routed_logits: torch.Tensor,
                  token_ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """:func:`next_token_nll` of both runs, :func:`kl_from_dense` and :func:`top1_agreement` at once, from one
    log-softmax per run (each of those alone takes its own; over a 49k vocabulary that is most of the cost).
    Returns ``nll`` and ``dense_nll`` (T-1,), ``kl`` (T,) and ``top1_agree`` (T,) bool."""
    p_log = F.log_softmax(dense_logits.float(), -1)
    q_log = F.log_softmax(routed_logits.float(), -1)
    targets = token_ids[1:, None]
    return {"nll": -q_log[:-1].gather(1, targets).squeeze(1), "dense_nll": -p_log[:-1].gather(1, targets).squeeze(1),
            "kl": (p_log.exp() * (p_log - q_log)).sum(-1), "top1_agree": p_log.argmax(-1) == q_log.argmax(-1)}


def compare_to_dense(dense_logits: torch.Tensor, routed_logits: torch.Tensor, token_ids: torch.Tensor) -> dict:
    """Per-token and mean quality figures of a routed run against dense on the same tokens."""
    q = token_quality(dense_logits, routed_logits, token_ids)
    nll_routed, nll_dense, kl, agree = q["nll"], q["dense_nll"], q["kl"], q["top1_agree"]
    return {
        "nll": nll_routed.tolist(), "nll_dense": nll_dense.tolist(), "kl": kl.tolist(), "top1_agree": agree.tolist(),
        "mean_nll": float(nll_routed.mean()) if len(nll_routed) else 0.0,
        "mean_nll_dense": float(nll_dense.mean()) if len(nll_dense) else 0.0,
        "mean_kl": float(kl.mean()), "top1_agreement": float(agree.float().mean()),
    }
