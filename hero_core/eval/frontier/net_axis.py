"""The frontier read against FLOPs saved net: each run's param-skip points moved to what they save once the router
and the adapters are charged.

The frontier is measured at param skip (the paper's metric). A point's net saving follows from its param skip and
what its run computes besides the FFNs it keeps: a router charges its state encoder, heads and memory reads at every
routed block; a fixed policy (static pruning, random skipping, the oracle, MoD top-k) only the adapters of the FFNs
it skips (:func:`hero_core.measures.accounting.without_router`). The conversion
(:func:`hero_core.measures.accounting.net_saving_for_param_skip`) treats every token of a run as skipping its
run's mean number of FFNs, over the positions of a text as long as the frontier's; the net table
(:mod:`hero_core.eval.frontier.net_table`) measures the same saving token by token, and the two agree to a few
hundredths of a point.
"""

from __future__ import annotations

import numpy as np

from hero_core.measures.accounting import ComputeProfile, net_saving_for_param_skip, without_router
from hero_core.words.reference_labels import REFERENCE_LABELS


def run_profiles(curves: dict[str, dict], base: ComputeProfile | None = None) -> dict[str, tuple[ComputeProfile, int]]:
    """Per run of ``curves`` (:func:`hero_core.eval.frontier.measured.frontier_curves`' form), the profile it is
    charged and its routed block count: a router its own, built from its checkpoint's config (weights unchecked), a
    reference none, with the adapters of the checkpoint it borrowed them from. ``base`` is any run's profile on the
    backbone the frontier was measured on (what a backbone costs is the same for every run on it; the app passes its
    loaded model's); without it the embedded backbone is loaded. Runs whose checkpoint is not bundled, or was trained
    for a backbone of another size, are left out."""
    from hero_core.method import checkpoint as ckpt
    from hero_core.method.model import with_router_costs
    from hero_core.method.router import HeroRouter

    if base is None:
        base = _embedded_profile()
    bundled = set(ckpt.bundled_names())
    wanted = {curves[name].get("adapters_of") if name in REFERENCE_LABELS else name for name in curves}
    own = {}
    for name in sorted(n for n in wanted if n in bundled):
        checkpoint = ckpt.read_checkpoint(name)
        if checkpoint.fingerprint.n_params == base.total_params:
            own[name] = (with_router_costs(base, HeroRouter(checkpoint.config)), len(checkpoint.config.routed_layers))
    profiles = {}
    for name, curve in curves.items():
        if name in REFERENCE_LABELS and curve.get("adapters_of") in own:
            profile, n_routed = own[curve["adapters_of"]]
            profiles[name] = (without_router(profile), n_routed)
        elif name in own:
            profiles[name] = own[name]
    return profiles


def _embedded_profile() -> ComputeProfile:
    from hero_core.backbones.loading import load_backbone
    from hero_core.method.checkpoint import build_router, read_checkpoint
    from hero_core.method.model import DEFAULT_CHECKPOINT, compute_profile

    return compute_profile(load_backbone(device="cpu").model, build_router(read_checkpoint(DEFAULT_CHECKPOINT)))


def net_curves(curves: dict[str, dict], domains: list[str], max_tokens: int,
               profiles: dict[str, tuple[ComputeProfile, int]]) -> dict[str, dict]:
    """``curves`` with each point's param skip replaced by its FLOPs saved net over texts of ``max_tokens`` (same
    point layout: ``[x, ratio, low, high]``); runs without a profile are left out."""
    positions = np.arange(max_tokens)
    out: dict[str, dict] = {}
    for name, curve in curves.items():
        if name not in profiles:
            continue
        profile, n_routed = profiles[name]
        routed = name not in REFERENCE_LABELS
        out[name] = {**curve} | {
            domain: [[net_saving_for_param_skip(point[0], profile, n_routed, positions, routed=routed), *point[1:]]
                     for point in curve[domain]] for domain in domains if domain in curve}
    return out
