"""The training losses: self-distillation against the dense model, the usage penalty and the budget hinge on
executed FFNs, gate separation. Pure functions of tensors, so each can be tested alone."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def distill_loss(logits: torch.Tensor, indices: torch.Tensor, logprobs: torch.Tensor, *,
                 tail: bool = False, weights: torch.Tensor | None = None) -> torch.Tensor:
    """Cross-entropy of the routed model against the dense model's top-k next-token distribution.

    ``tail=False``: the top-k probabilities renormalised to sum to 1 (a sharper target than the teacher).
    ``tail=True``: the top-k probabilities as they are, plus one bucket with the teacher's remaining mass
    1 - sum_k p, matched by the student's mass outside those k tokens: a (k+1)-way distribution whose optimum is
    the teacher's own. Either equals KL(target || routed) up to the target's (constant) entropy.

    ``weights`` (same shape as the token positions): a weighted mean over positions instead of the plain mean."""
    logq = F.log_softmax(logits.float(), -1).gather(-1, indices.long())
    if not tail:
        p = torch.softmax(logprobs.float(), -1)  # renormalise the top-k mass
        return weighted_mean(-(p * logq).sum(-1), weights)
    p = logprobs.float().exp()
    p_tail = (1.0 - p.sum(-1)).clamp_min(0.0)  # the stored log-probs are fp16: the sum may round past 1
    q_topk = torch.logsumexp(logq, -1).clamp_max(-1e-6)  # log of the student's top-k mass, kept below 0
    logq_tail = torch.log(-torch.expm1(q_topk))  # log(1 - mass)
    return weighted_mean(-((p * logq).sum(-1) + p_tail * logq_tail), weights)


def weighted_mean(per_token: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """Mean of a per-position loss, weighted when ``weights`` is given (sum(w * x) / sum(w))."""
    if weights is None:
        return per_token.mean()
    weights = weights.to(per_token.dtype)
    return (per_token * weights).sum() / weights.sum()


def usage_penalty(gates: list[torch.Tensor]) -> torch.Tensor:
    """L_skip = mean over tokens of (sum_j g_j)^2."""
    return torch.stack(gates, 0).sum(0).pow(2).mean()


def hard_executed(gates: list[torch.Tensor], tau: float) -> list[torch.Tensor]:
    """1[g >= tau] in the forward pass, d/dg = 1 in the backward (straight-through): the executed FFNs."""
    return [(g >= tau).to(g.dtype) + g - g.detach() for g in gates]


def separation_penalty(gates: list[torch.Tensor], tau: float, margin: float = 0.1) -> torch.Tensor:
    """mean(relu(margin - |g - tau|)) / margin: 1 for gates sitting on tau, 0 outside the band."""
    g = torch.cat([x.reshape(-1) for x in gates])
    return torch.relu(margin - (g - tau).abs()).mean() / margin


def near_tau_share(gates: list[torch.Tensor], tau: float, margin: float = 0.1) -> float:
    """Share of gates within ``margin`` of tau: decisions a small numeric change can flip."""
    g = torch.cat([x.detach().reshape(-1) for x in gates])
    return float(((g - tau).abs() < margin).float().mean())


def budget_hinge(gates: list[torch.Tensor], executed_budget: float, sequences: int = 1) -> torch.Tensor:
    """relu(mean over tokens of sum_j g_j - E*)^2: zero once the soft FFN use meets the budget E*.

    With ``sequences`` > 1 the tokens (batch-major) are split into that many sequences and each sequence pays
    its own hinge (mean over sequences), so no text can stay dense while another skips for it."""
    per_token = torch.stack(gates, 0).sum(0)
    per_sequence = per_token.reshape(sequences, -1).mean(1)
    return torch.relu(per_sequence - executed_budget).pow(2).mean()
