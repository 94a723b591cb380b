"""Baselines at a matched param skip, as routing policies over a trained HeRo model.

A policy replaces the router's hard decision at every routed block: ``policy(block, gate, pass)``
returns ``(executed, gate)``, and the block computes ``g * FFN(u)`` for executed tokens and
``(1 - g) * Adapter(u)`` for the others, exactly as HeRo does.

* :func:`static_pruning` (ShortGPT-style): the same FFNs are dropped for every token, chosen by a
  calibration importance score, the FFN's *block influence* ``1 - cos(hbar, hbar + FFN(u))`` averaged over
  calibration tokens (ShortGPT's BI metric, applied to the FFN sub-layer). The policy returns g = 1 on every
  token; what stands in for a dropped FFN then follows the checkpoint's branch scaling: with the paper's
  (``g * FFN``, ``(1 - g) * Adapter``) the adapter term vanishes and the block adds nothing, with ``unscaled``
  branches, as every bundled checkpoint is trained, the trained adapter runs at full weight in its place. Kept
  FFNs run unscaled.
* :func:`random_skipping`: every (token, block) skips with the same probability, taking the trained
  adapter at full weight (g = 0) when it skips and the FFN unscaled (g = 1) when it runs;
  :func:`random_skip_probability` is the probability that meets a param skip.
* :func:`oracle_skipping` (not deployable): runs both branches and skips where the adapter's relative error on
  the block output is below a threshold (see :mod:`hero_core.eval.frontier.curves`);
  :func:`oracle_threshold_for_skip` is the threshold that meets a param skip.
* :func:`expert_choice` (MoD-style): at every block, the top ``capacity`` share of each sequence's tokens
  by router gate run the FFN (scaled by g), the rest take the adapter. Note it looks at the whole
  sequence, so it is not causal: a decode-time version would need MoD's auxiliary predictor.
* ``dense`` and the trained ``no_history`` checkpoints are the other baselines (variants/checkpoints).
"""

from __future__ import annotations

import math

import torch

from hero_core.measures.accounting import bisect_increasing, ffn_share_for_param_skip, ffns_for_param_skip
from hero_core.method.inject import ffn_modules
from hero_core.method.model import HeroModel

# The oracle's threshold on the relative error is searched in log space between these (1e-3 skips almost nothing, 4
# almost everything on the bundled backbone): the skip follows the threshold's order of magnitude, so equal steps in
# log space resolve a threshold near 0.1 as finely as one near 1.
ORACLE_THRESHOLD_RANGE = (1e-3, 4.0)
ORACLE_BISECTION_STEPS = 12


def static_pruning(dropped_blocks: set[int]):
    """Drop the FFNs of these routed blocks (1-based j) for every token."""
    def policy(block, gate, fwd):
        keep = block not in dropped_blocks
        return torch.full_like(gate, keep, dtype=torch.bool), torch.ones_like(gate)
    return policy


def block_influence(hero: HeroModel, texts: list[str]) -> list[float]:
    """ShortGPT's block influence of every routed FFN on calibration texts: 1 - cos(hbar, hbar + FFN(u))."""
    import torch.nn.functional as F

    from hero_core.method.inject import hbar_site, routed_unit

    scores = [0.0] * hero.config.n_routed
    counts = [0] * hero.config.n_routed
    handles = []
    for j, index in enumerate(hero.config.routed_layers):
        stash: dict = {}

        def grab_in(module, args, stash=stash):
            stash["hbar"] = args[0]

        def grab_out(module, args, output, j=j, stash=stash):
            hbar = stash.pop("hbar")
            cos = F.cosine_similarity(hbar.float(), (hbar + output).float(), dim=-1)
            scores[j] += float((1 - cos).sum())
            counts[j] += cos.numel()

        handles.append(hbar_site(hero.model, index).register_forward_pre_hook(grab_in))
        handles.append(routed_unit(hero.model, index).register_forward_hook(grab_out))
    try:
        for text in texts:
            hero.logits(text, variant="dense")
    finally:
        for h in handles:
            h.remove()
    return [s / max(1, c) for s, c in zip(scores, counts)]


def least_influential(influence: list[float], n_drop: int) -> set[int]:
    order = sorted(range(len(influence)), key=lambda j: influence[j])
    return {j + 1 for j in order[:n_drop]}


def random_skipping(skip_probability: float, seed: int = 0):
    """Each (token, block) skips with ``skip_probability``; seeded, so a run is reproducible."""
    if not 0.0 <= skip_probability <= 1.0:
        raise ValueError(f"skip_probability must be in [0, 1], got {skip_probability}")
    generator = torch.Generator().manual_seed(seed)

    def policy(block, gate, fwd):
        skip = torch.rand(gate.shape[0], generator=generator) < skip_probability
        executed = (~skip).to(gate.device)
        return executed, executed.to(gate.dtype)
    return policy


def random_skip_probability(hero, param_skip: float) -> float:
    """The probability with which random skipping skips each (token, routed block) FFN to meet ``param_skip`` (the
    paper's definition: the share of the model's parameters a token does not run)."""
    share = ffn_share_for_param_skip(param_skip, hero.profile, hero.config.n_routed)
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"param skip {param_skip:.3f} is out of reach on this backbone: it would skip "
                         f"{share:.0%} of the routed FFNs")
    return share


def oracle_skipping(hero, threshold: float):
    """Reference policy: skip where the adapter's relative error on this token's block output is below
    ``threshold``. Executed FFNs run unscaled (g = 1), skipped blocks take the adapter unscaled (g = 0)."""
    ffns = ffn_modules(hero.model)
    layers = hero.config.routed_layers

    def policy(block, gate, fwd):
        u, hbar = fwd.ffn_input, fwd.ffn_hbar
        adapter = hero.router.adapters[block - 1]
        ffn = ffns[layers[block - 1]](u).float()
        error = (ffn - adapter(u.to(adapter.w1.weight.dtype)).float()).norm(dim=-1)
        executed = error / (hbar.float() + ffn).norm(dim=-1).clamp_min(1e-6) >= threshold
        return executed, executed.to(gate.dtype)
    return policy


def oracle_threshold_for_skip(hero, blocks: torch.Tensor, param_skip: float) -> tuple[float, float]:
    """The oracle's threshold whose param skip on ``blocks`` (token ids, (B, T)) is nearest ``param_skip``, by
    bisection in log space: (threshold, the skip it realises there)."""
    from hero_core.method.tau_search import realised_skip

    if not 0.0 < param_skip < 1.0:
        raise ValueError(f"param skip must be in (0, 1), got {param_skip}")

    def skip_at(threshold: float) -> float:  # the policy decides every skip: the tau passed is never read
        return realised_skip(hero, blocks, "hero", hero.config.tau, policy=oracle_skipping(hero, threshold))

    # a higher threshold accepts a larger error, so it skips more
    log_low, log_high = (math.log(t) for t in ORACLE_THRESHOLD_RANGE)
    log_threshold, skip = bisect_increasing(lambda x: skip_at(math.exp(x)), param_skip, log_low, log_high,
                                            ORACLE_BISECTION_STEPS)
    return math.exp(log_threshold), skip


def expert_choice(capacity: float):
    """Top ``capacity`` share of each sequence's tokens (by router gate) execute each block's FFN."""
    if not 0.0 < capacity <= 1.0:
        raise ValueError(f"capacity must be in (0, 1], got {capacity}")

    def policy(block, gate, fwd):
        B, T = fwd.shape
        scores = gate.view(B, T)
        if fwd.active is not None:
            scores = scores.masked_fill(~fwd.active, -1.0)
            lengths = fwd.active.sum(1)
        else:
            lengths = torch.full((B,), T, device=gate.device)
        executed = torch.zeros(B, T, dtype=torch.bool, device=gate.device)
        for b in range(B):
            k = max(1, math.ceil(capacity * int(lengths[b])))
            executed[b, scores[b].topk(k).indices] = True
        return executed.view(-1), gate
    return policy


def matched_policies(hero: HeroModel, param_skip: float, calibration_texts: list[str], seed: int = 0) -> dict:
    """Every policy baseline at the given param skip (paper definition), keyed by its name on the frontier
    (hero_core.words.reference_labels)."""
    share = random_skip_probability(hero, param_skip)  # of each token's routed FFNs, skipped
    n_dropped = round(ffns_for_param_skip(param_skip, hero.profile))
    return {
        "static": static_pruning(least_influential(block_influence(hero, calibration_texts), n_dropped)),
        "random": random_skipping(share, seed=seed),
        "expert_choice": expert_choice(1.0 - share),  # runs as many FFNs as random skipping, chosen by gate
    }
