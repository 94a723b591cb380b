"""Output quality of a routed run against the dense model, per token (pure tensor functions)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def log_probs(logits: torch.Tensor) -> torch.Tensor:
    """Log-softmax over the vocabulary, in fp32 whatever the logits' precision."""
    return F.log_softmax(logits.float(), -1)


def _nll(log_p: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
    return -log_p[:-1].gather(1, token_ids[1:, None]).squeeze(1)


def _kl(dense_log: torch.Tensor, routed_log: torch.Tensor) -> torch.Tensor:
    return (dense_log.exp() * (dense_log - routed_log)).sum(-1)


def next_token_nll(logits: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
    """NLL of each next token: logits (T, V), token_ids (T,) -> (T-1,) in nats."""
    return _nll(log_probs(logits), token_ids)


def kl_from_dense(dense_logits: torch.Tensor, routed_logits: torch.Tensor) -> torch.Tensor:
    """KL(dense || routed) per position: (T, V) x2 -> (T,) in nats."""
    return _kl(log_probs(dense_logits), log_probs(routed_logits))


def top1_agreement(dense_logits: torch.Tensor, routed_logits: torch.Tensor) -> torch.Tensor:
    """Whether the routed model's top-1 next token equals the dense one, per position: (T,) bool."""
    return dense_logits.argmax(-1) == routed_logits.argmax(-1)


def quality_of_log_probs(dense_log: torch.Tensor, routed_log: torch.Tensor,
                         token_ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """The measures above from the two runs' :func:`log_probs` (T, V), each log-softmax taken once (over a 49k
    vocabulary it is most of the cost). Returns ``nll`` and ``dense_nll`` (T-1,), ``kl`` (T,) and
    ``top1_agree`` (T,) bool."""
    return {"nll": _nll(routed_log, token_ids), "dense_nll": _nll(dense_log, token_ids),
            "kl": _kl(dense_log, routed_log), "top1_agree": top1_agreement(dense_log, routed_log)}


def token_quality(dense_logits: torch.Tensor, routed_logits: torch.Tensor,
                  token_ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """:func:`quality_of_log_probs` of two runs' logits (T, V)."""
    return quality_of_log_probs(log_probs(dense_logits), log_probs(routed_logits), token_ids)


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
