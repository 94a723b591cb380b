"""The measures of a routed run against a reference, one name per quantity: per-token NLL, KL(dense || routed) and
top-1 agreement (tensor functions), the perplexity ratio of one text and pooled over texts, Retain on resampled
examples, and the item bootstrap behind every interval.

It imports neither torch nor a model (the tensor functions use the tensors' own methods), so a trace loaded without
a model (:mod:`hero_core.method.trace`) computes its ratio here too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

BOOTSTRAP_SAMPLES = 1000  # resamples of the pooled perplexity ratio's interval (ratio_interval)


# -- per token --------------------------------------------------------------------------------------------------
def log_probs(logits: torch.Tensor) -> torch.Tensor:
    """Log-softmax over the vocabulary, in fp32 whatever the logits' precision."""
    return logits.float().log_softmax(-1)


def kept_rows(rows: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """``rows[keep]`` without copying an unpadded row (T, V) of a 49k vocabulary."""
    return rows if bool(keep.all()) else rows[keep]


def _nll(log_p: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
    return -log_p[:-1].gather(1, token_ids[1:, None]).squeeze(1)


def kl_divergence(dense_log: torch.Tensor, routed_log: torch.Tensor,
                  dense_p: torch.Tensor | None = None) -> torch.Tensor:
    """KL(dense || routed) of the next-token distributions, in nats: sum over v of p_dense(v) * (log p_dense(v) -
    log p_routed(v)), the routed run's divergence from the dense one it stands in for.

    Shapes: ``dense_log`` and ``routed_log`` are log-probabilities (:func:`log_probs`), (..., V) with the vocabulary
    last and any leading dimensions (T positions, or a batch of them); the result drops the last one, (..., V) ->
    (...), one KL per position. ``dense_p`` is ``dense_log.exp()`` when the caller already has it. Differentiable:
    training's diagnosis takes gradients through it."""
    p = dense_log.exp() if dense_p is None else dense_p
    # One dot product per position (a batched matmul) instead of a product and a sum over (T, V): over a 49k
    # vocabulary it is about four times faster, with the same result.
    return (p.unsqueeze(-2) @ (dense_log - routed_log).unsqueeze(-1)).squeeze(-1).squeeze(-1)


def next_token_nll(logits: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
    """NLL of each next token: logits (T, V), token_ids (T,) -> (T-1,) in nats."""
    return _nll(log_probs(logits), token_ids)


def top1_agreement(dense_logits: torch.Tensor, routed_logits: torch.Tensor) -> torch.Tensor:
    """Whether the routed model's top-1 next token equals the dense one, per position: (T,) bool."""
    return dense_logits.argmax(-1) == routed_logits.argmax(-1)


def quality_of_log_probs(dense_log: torch.Tensor, routed_log: torch.Tensor, token_ids: torch.Tensor,
                         dense_p: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """The measures above from the two runs' :func:`log_probs` (T, V), each log-softmax taken once (over a 49k
    vocabulary it is most of the cost); ``dense_p`` is ``dense_log.exp()`` when the caller already has it.
    Returns ``nll`` and ``dense_nll`` (T-1,), ``kl`` (T,) and ``top1_agree`` (T,) bool."""
    return {"nll": _nll(routed_log, token_ids), "dense_nll": _nll(dense_log, token_ids),
            "kl": kl_divergence(dense_log, routed_log, dense_p), "top1_agree": top1_agreement(dense_log, routed_log)}


def token_quality(dense_logits: torch.Tensor, routed_logits: torch.Tensor,
                  token_ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """:func:`quality_of_log_probs` of two runs' logits (T, V)."""
    return quality_of_log_probs(log_probs(dense_logits), log_probs(routed_logits), token_ids)


def compare_to_dense(dense_logits: torch.Tensor, routed_logits: torch.Tensor, token_ids: torch.Tensor) -> dict:
    """Per-token and mean quality figures of a routed run against dense on the same tokens."""
    q = {k: v.detach().cpu().numpy() for k, v in token_quality(dense_logits, routed_logits, token_ids).items()}
    return quality_dict(q["nll"], q["dense_nll"], q["kl"], q["top1_agree"])


def quality_dict(nll: np.ndarray, nll_dense: np.ndarray, kl: np.ndarray, top1_agree: np.ndarray) -> dict:
    """Per-token lists and their means, the shape :func:`compare_to_dense` gives and a trace's quality is read as."""
    agree = top1_agree.astype(bool)
    return {"nll": nll.tolist(), "nll_dense": nll_dense.tolist(), "kl": kl.tolist(), "top1_agree": agree.tolist(),
            "mean_nll": float(nll.mean()) if len(nll) else 0.0,
            "mean_nll_dense": float(nll_dense.mean()) if len(nll_dense) else 0.0,
            "mean_kl": float(kl.mean()), "top1_agreement": float(agree.mean())}


# -- the perplexity ratio ---------------------------------------------------------------------------------------
def perplexity_ratio(nll: np.ndarray, nll_dense: np.ndarray) -> float:
    """Routed / dense perplexity of one text: exp(mean NLL - mean dense NLL) over its predictions."""
    return float(np.exp(np.mean(nll) - np.mean(nll_dense)))


def pooled_perplexity_ratio(nll, nll_dense, n_pred) -> float:
    """Routed / dense perplexity pooled over texts, exp(sum(nll - nll_dense) / sum(n)), from per-text NLL sums
    and prediction counts (arrays, or scalars already summed over the texts)."""
    diff = np.asarray(nll, dtype=float) - np.asarray(nll_dense, dtype=float)
    return math.exp(diff.sum() / max(np.asarray(n_pred).sum(), 1))


def ratio_interval(nll: np.ndarray, nll_dense: np.ndarray, n_pred: np.ndarray, *, samples: int = BOOTSTRAP_SAMPLES,
                   seed: int = 0) -> tuple[float, float, float]:
    """:func:`pooled_perplexity_ratio` over texts (per-text NLL sums and prediction counts) and its 95 %
    bootstrap interval over texts."""
    point = pooled_perplexity_ratio(nll, nll_dense, n_pred)
    picks = bootstrap_picks(len(nll), n_boot=samples, rng=np.random.default_rng(seed))
    boot = pooled_ratio_replicates(nll, nll_dense, n_pred, picks)
    # np.percentile at 2.5 / 97.5, not percentile_interval: quantiles at (1 - level) / 2 differ in the last bit,
    # and the frontier's recorded intervals were taken this way
    low, high = np.percentile(boot, [2.5, 97.5])
    return point, float(low), float(high)


def pooled_ratio_replicates(nll, nll_dense, n_pred, picks: np.ndarray) -> np.ndarray:
    """:func:`pooled_perplexity_ratio` on each row of ``picks`` ((n_boot, n) text indices): the one resampled
    pooled ratio of the project, behind :func:`ratio_interval` and the study's paired bootstrap
    (:mod:`hero_core.eval.study.stats`), so the two cannot drift apart."""
    diff = np.asarray(nll, dtype=float) - np.asarray(nll_dense, dtype=float)
    counts = np.asarray(n_pred, dtype=float)
    return np.exp(diff[picks].sum(-1) / np.maximum(counts[picks].sum(-1), 1))


def retain_replicates(routed: Sequence, dense: Sequence, picks: Sequence[np.ndarray]) -> np.ndarray:
    """Retain (%) on each resample: per task the routed and the dense mean over the same resampled examples
    (``picks[i]``: (n_boot, n_i) indices into task i's per-example scores ``routed[i]`` and ``dense[i]``), their ratio
    averaged over the tasks whose resampled dense mean is above 0 (Retain leaves the others out, as
    :func:`hero_core.eval.scoring.retain` does); NaN where every task dropped out. One task alone is the share of
    dense's score a run keeps on the same items. The one resampled Retain of the project: the suites' intervals
    (:mod:`hero_core.eval.suites.retain`) and the study's paired bootstrap (:mod:`hero_core.eval.study.stats`)."""
    ratios, defined = [], []
    for task_routed, task_dense, idx in zip(routed, dense, picks, strict=True):
        num = np.asarray(task_routed, dtype=np.float64)[idx].mean(axis=-1)
        den = np.asarray(task_dense, dtype=np.float64)[idx].mean(axis=-1)
        ok = den > 0
        ratios.append(np.where(ok, num / np.where(ok, den, 1.0), 0.0))
        defined.append(ok)
    if not ratios:
        return np.full(1, np.nan)
    total, count = np.sum(ratios, axis=0), np.sum(defined, axis=0)
    return np.where(count > 0, 100.0 * total / np.maximum(count, 1), np.nan)


# -- the item bootstrap -----------------------------------------------------------------------------------------
def bootstrap_picks(n: int, *, n_boot: int = 2000, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n) item indices drawn with replacement: the resamples behind every bootstrap here. Statistics
    that are not a plain mean (e.g. Retain, a mean of per-task ratios, :mod:`hero_core.eval.suites.retain`) draw
    their resamples here too, one call per stratum from one generator."""
    return rng.integers(0, n, size=(n_boot, n))


def percentile_interval(replicates: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The central ``level`` percentile interval of bootstrap replicates."""
    lo, hi = np.quantile(np.asarray(replicates, dtype=np.float64), [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def bootstrap_ci(values: Sequence[float], weights: Sequence[float] | None = None, *, n_boot: int = 2000,
                 level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of a (weighted) mean, resampling items with replacement."""
    v = np.asarray(values, dtype=np.float64)
    w = np.ones_like(v) if weights is None else np.asarray(weights, dtype=np.float64)
    if v.ndim != 1 or v.shape != w.shape:
        raise ValueError("values and weights must be 1-d arrays of one length")
    if len(v) == 0:
        return float("nan"), float("nan")
    picks = bootstrap_picks(len(v), n_boot=n_boot, rng=np.random.default_rng(seed))
    means = (v[picks] * w[picks]).sum(axis=1) / np.maximum(w[picks].sum(axis=1), 1e-12)
    return percentile_interval(means, level)
