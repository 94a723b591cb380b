"""The frontier against FLOPs saved net: a point's param skip becomes what its run saves with its router charged."""

from dataclasses import replace

import numpy as np
import pytest

from hero_core.eval.frontier.net_axis import net_curves
from hero_core.measures.accounting import (
    ComputeProfile,
    ffns_for_net_saving,
    ffns_for_param_skip,
    net_saving_for_param_skip,
    token_compute,
    without_router,
)

PROFILE = ComputeProfile(total_params=10_000, ffn_params=300, adapter_params=20, router_params=15,
                         linear_params=9_000, n_layers=6, attention_width=8, d_memory=4)
POSITIONS = np.arange(64)


@pytest.mark.parametrize("routed", [True, False])
def test_the_net_saving_of_a_param_skip_inverts_the_ffns_for_a_net_saving(routed):
    for skip in (0.0, 0.03, 0.12, 0.3):
        net = net_saving_for_param_skip(skip, PROFILE, 6, POSITIONS, routed=routed)
        back = ffns_for_net_saving(net, PROFILE, 6, POSITIONS, routed=routed)
        assert back == pytest.approx(ffns_for_param_skip(skip, PROFILE))


def test_it_agrees_with_the_token_by_token_accounting_when_every_token_skips_alike():
    executed = np.ones((6, len(POSITIONS)), dtype=bool)
    executed[:2] = False  # two FFNs skipped by every token
    per_token = token_compute(executed, PROFILE, POSITIONS)
    skip = float(per_token["param_skip"].mean())
    assert net_saving_for_param_skip(skip, PROFILE, 6, POSITIONS) == pytest.approx(
        float(per_token["flop_share_saved"].mean()))


def test_a_router_that_skips_nothing_costs_and_a_fixed_policy_does_not():
    assert net_saving_for_param_skip(0.0, PROFILE, 6, POSITIONS) < 0
    assert net_saving_for_param_skip(0.0, without_router(PROFILE), 6, POSITIONS, routed=False) == 0.0


def test_net_curves_move_each_router_and_reference_by_what_it_is_charged():
    curves = {"hero": {"kind": "checkpoint", "chat": [[0.06, 1.1, 1.0, 1.2]]},
              "static": {"kind": "reference", "adapters_of": "hero", "chat": [[0.06, 1.3, 1.2, 1.4]]},
              "other": {"kind": "checkpoint", "chat": [[0.06, 1.0, 0.9, 1.1]]}}
    profiles = {"hero": (PROFILE, 6), "static": (without_router(PROFILE), 6)}
    net = net_curves(curves, ["chat"], 64, profiles)
    assert set(net) == {"hero", "static"}  # a run without a profile is left out, not drawn at its param skip
    hero_x, static_x = net["hero"]["chat"][0][0], net["static"]["chat"][0][0]
    assert static_x > hero_x  # the same skip saves more without a router to pay
    assert net["hero"]["chat"][0][1:] == [1.1, 1.0, 1.2] and net["static"]["adapters_of"] == "hero"


def test_the_bundled_runs_are_charged_what_their_loaded_models_are():
    from hero_core.eval.frontier import measured
    from hero_core.eval.frontier.net_axis import run_profiles
    from hero_core.method.model import load_hero

    shipped = measured.load()
    router = shipped["baselines"][0]["router"]  # the router the shipped frontier is drawn for (the default)
    hero = load_hero(router, shared=True)
    curves = shipped["frontier"]
    profiles = run_profiles(curves, base=hero.profile)
    assert profiles[router] == (hero.profile, hero.config.n_routed)
    static, _ = profiles["static"]  # a fixed policy: the adapters it borrowed, no router, no memory reads
    assert static.router_params == 0 and static.d_memory == 0 and static.adapter_params == hero.profile.adapter_params
    other_backbone = replace(hero.profile, total_params=hero.profile.total_params + 1)
    assert run_profiles(curves, base=other_backbone) == {}  # never charged a backbone it was not measured on
