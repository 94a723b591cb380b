"""The blocks tau is calibrated on after training: a few train-split blocks of every domain. Training itself trains
at tau (Eq. 9 of docs/method.md); moving the threshold on g until a checkpoint's realised param skip meets a budget
on these blocks is the one-number correction for a checkpoint trained elsewhere. The search and the realised skip
themselves are core's (hero_core.method.tau_search: ``matched_tau`` through ``HeroModel.tau_for_param_skip``, and
``realised_skip``)."""

from __future__ import annotations

import random

import torch

from hero_core.method.model import HeroModel


def calibration_blocks(hero: HeroModel, n_blocks: int = 8, seq_len: int = 128, seed: int = 1) -> torch.Tensor:
    """A few train-split blocks from every domain (never evaluation data) for calibrating tau."""
    from hero_core.data.blocks import token_blocks
    from hero_core.data.reasoning import reasoning_problems
    from hero_core.data.texts import chat_texts, code_texts

    texts = [p.text for p in reasoning_problems(24, "train", seed=seed)]
    texts += code_texts("train", limit=8)
    texts += chat_texts(hero, "train", limit=8)
    blocks = token_blocks(texts, hero.tokenizer, seq_len)
    random.Random(seed).shuffle(blocks)
    return torch.tensor(blocks[:n_blocks], dtype=torch.long)
