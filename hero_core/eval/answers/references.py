"""Reference policies for the answers suite (not routers): what answers survive a skip chosen without a router.

Both run on a checkpoint's backbone and adapters and are matched to a param skip (the paper's definition) on
the calibration blocks, the skip the checkpoint's local twin is matched to:

* random skip (:func:`random_skip_at`): each (token, routed block) skips its FFN with one probability. The draws
  are seeded by the prompt's id, so an answer read back from a resume folder is the one a fresh run would write.
* the oracle (:func:`oracle_at`, not deployable): runs both branches at every block and skips where the adapter's
  relative error on the block output is below a threshold (:func:`hero_core.eval.baselines.oracle_skipping`),
  matched to a skip by :func:`hero_core.eval.baselines.oracle_threshold_for_skip`.
  It needs the FFN's output to decide whether to skip the FFN, so it saves nothing; it is a greedy,
  block-local reference, not an upper bound.

A reference's ``key`` (its rate or threshold) is part of the resume folder's file name: answers stored at
another rate are not read back.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hero_core.eval.baselines import (
    oracle_skipping,
    oracle_threshold_for_skip,
    random_skip_probability,
    random_skipping,
)


@dataclass(frozen=True)
class ReferencePolicy:
    """A reference policy on ``hero``'s backbone, run on the answers suite like a method named ``name``."""

    hero: Any
    name: str
    setting: float  # the skip probability (random) or the relative-error threshold (oracle)
    key: str  # what its answers depend on besides the backbone: part of its file name in a resume folder
    policy_for: Callable[[str], Callable]  # prompt id -> a routing policy (hero_core.eval.baselines)


def random_skip_at(hero, probability: float, name: str) -> ReferencePolicy:
    """Each (token, routed block) skips its FFN with ``probability`` and takes the adapter instead; the draws
    are seeded by the prompt id."""
    def seeded(prompt_id: str):
        return random_skipping(probability, seed=zlib.crc32(prompt_id.encode("utf-8")))
    return ReferencePolicy(hero, name, probability, f"p{probability:.6g}", seeded)


def oracle_at(hero, threshold: float, name: str) -> ReferencePolicy:
    """Skip where replacing the FFN by the adapter changes the block output by less than ``threshold`` (relative
    error). The oracle keeps no state between calls, unlike the random draws: one policy serves every prompt."""
    policy = oracle_skipping(hero, threshold)
    return ReferencePolicy(hero, name, threshold, f"e{threshold:.6g}", lambda prompt_id: policy)


def random_reference(hero, param_skip: float, name: str) -> ReferencePolicy:
    """Random skip at ``param_skip`` (the paper's definition: the share of the model's parameters not run)."""
    return random_skip_at(hero, random_skip_probability(hero, param_skip), name)


def oracle_reference(hero, param_skip: float, name: str, blocks) -> tuple[ReferencePolicy, float]:
    """The oracle at the threshold whose param skip on ``blocks`` (token ids, (B, T)) is nearest ``param_skip``;
    returns the reference and the skip it realises there."""
    threshold, skip = oracle_threshold_for_skip(hero, blocks, param_skip)
    return oracle_at(hero, threshold, name), skip
