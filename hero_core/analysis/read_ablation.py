"""Does the memory read matter? Route the same texts with the learned read and with the uniform one
(``memory_read="uniform"``: the same stored values, equal weights) and count the decisions that change.

A flipped decision also changes every later block's input, so the count is the read's whole effect on routing,
not one block's. The quality side of the same ablation is ``HeroMethod(memory_read="uniform")`` in
:func:`hero_core.eval.frontier.curves.evaluate_points`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from hero_core.analysis.memory_stats import memory_row_stats


def read_effect(hero, texts: Sequence[str], *, variant: str | None = None, tau: float | None = None,
                max_tokens: int = 256) -> dict[str, float]:
    """Over ``texts``: the share of (token, block) decisions that flip when the read is made uniform, the mean
    normalised read entropy of the learned read (1 = uniform; rows with >= 2 entries), and the tokens counted."""
    variant = variant or hero.config.variant
    flips = decisions = 0
    entropies: list[np.ndarray] = []
    with torch.no_grad():
        for text in texts:
            learned = hero.trace(text, variant, tau=tau, max_tokens=max_tokens)
            uniform = hero.trace(text, variant, tau=tau, max_tokens=max_tokens, memory_read="uniform")
            flips += int((learned.executed != uniform.executed).sum())
            decisions += learned.executed.size
            entropy = memory_row_stats(learned)["normalised_entropy"]
            entropies.append(entropy[~np.isnan(entropy)])
    pooled = np.concatenate(entropies) if entropies else np.array([])
    return {"flip_share": flips / decisions if decisions else float("nan"),
            "read_entropy": float(pooled.mean()) if pooled.size else float("nan"),
            "decisions": decisions}
