"""Tau calibration after training: move the threshold on g until a checkpoint's realised param skip meets a
budget on a few train-split blocks (scripts/calibrate_budgets.py). Training itself trains at tau (Eq. 9 of
docs/method.md); this is the one-number correction for a checkpoint trained elsewhere."""

from __future__ import annotations

import random

import torch

from ..core.model import HeroModel


def calibration_blocks(hero: HeroModel, n_blocks: int = 8, seq_len: int = 128, seed: int = 1) -> torch.Tensor:
    """A few train-split blocks from every domain (never evaluation data) for calibrating tau."""
    from ..core.blocks import token_blocks
    from ..core.data import chat_texts, code_texts
    from ..core.reasoning import reasoning_problems

    texts = [p.text for p in reasoning_problems(24, "train", seed=seed)]
    texts += code_texts("train", limit=8)
    texts += chat_texts(hero, "train", limit=8)
    blocks = token_blocks(texts, hero.tokenizer, seq_len)
    random.Random(seed).shuffle(blocks)
    return torch.tensor(blocks[:n_blocks], dtype=torch.long)


def realised_skip(hero: HeroModel, blocks: torch.Tensor, variant: str, tau: float, *, policy=None) -> float:
    """Param skip (paper definition) of ``variant`` at threshold ``tau`` on token blocks; ``policy`` (see
    :mod:`hero_core.eval.baselines`) replaces the router's decisions."""
    from ..core.accounting import token_compute

    call = hero.new_call(variant, tau, policy=policy)
    with torch.no_grad():
        hero.forward(blocks.to(hero.device), None, call, use_cache=False)
    executed = call.passes[-1].executed().cpu().numpy()
    return float(token_compute(executed, hero.profile)["param_skip"].mean())


def calibrate_tau(hero: HeroModel, blocks: torch.Tensor, target_skip: float, *, variant: str | None = None,
                  iters: int = 8) -> tuple[float, float]:
    """Bisection on tau so the realised param skip on ``blocks`` meets ``target_skip``.

    The budget controller steers skip during training, but it oscillates around its target; a trained
    router's final skip can sit several points off. Moving tau (the threshold on g) is the one-number
    correction: skip grows with tau. Returns (tau, realised skip at that tau)."""
    from ..core.accounting import bisect_increasing

    variant = variant or hero.config.variant
    return bisect_increasing(lambda tau: realised_skip(hero, blocks, variant, tau), target_skip, 0.02, 0.98, iters,
                             start=0.5)
