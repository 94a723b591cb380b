"""The matched-compute tau search: thresholds side by side in one batch, and interpolation on long inputs."""

import numpy as np
import pytest
import torch

from hero_core.measures.accounting import search_increasing, token_compute
from hero_core.method.tau_search import TAU_RANGE, tau_from_gates


def staircase(levels: int = 400):
    """A skip share against tau like a router's: a CDF of gates, stepped by whole decisions."""
    gates = np.sort(np.random.default_rng(0).beta(5, 5, levels))
    return lambda tau: float(np.searchsorted(gates, tau) / levels)


@pytest.mark.parametrize("target", [0.0, 0.05, 0.1, 0.37, 0.9])
def test_both_searches_land_within_half_a_level_of_a_reachable_target(target):
    f = staircase()
    calls = []

    def counted(tau):
        calls.append(tau)
        return f(tau)

    tau, got = search_increasing(counted, target, 1e-3, 1 - 1e-3, 30, f_lo=0.0, f_hi=1.0, tol=0.5 / 400)
    assert abs(got - target) <= 0.5 / 400 and got == f(tau)
    assert len(calls) <= 16  # bisection to the same level takes up to 30



def test_the_first_guess_skips_exactly_the_wanted_share_of_the_gates_it_read():
    gates = np.random.default_rng(1).uniform(0.05, 0.95, size=(6, 50))  # (blocks, tokens): 300 decisions
    level = 0.01 / 3  # param skip per skipped decision
    for wanted in (1, 37, 150, 299):
        tau = tau_from_gates(gates, wanted * level, level)
        assert int((gates < tau).sum()) == wanted  # the FFN is skipped where gate < tau
    assert tau_from_gates(gates, 0.0, level) == TAU_RANGE[0]
    assert tau_from_gates(gates, 400 * level, level) == TAU_RANGE[1]


def test_thresholds_side_by_side_decide_as_one_run_each(tiny):
    """A tau per row of a batch gives each row exactly the decisions a run at that tau alone gives."""
    enc = tiny.encode(["The cat sat on the mat and looked at the bird."])
    taus = [0.3, 0.5, 0.7]
    call = tiny.new_call("hero", taus[0])
    width = enc.input_ids.shape[1]
    call.tau = torch.tensor(taus).repeat_interleave(width)
    with torch.no_grad():
        tiny.forward(enc.input_ids.repeat(3, 1), enc.attention_mask.repeat(3, 1), call, use_cache=False)
    together = call.passes[-1].executed().cpu().numpy().reshape(-1, 3, width)
    for i, tau in enumerate(taus):
        alone = tiny.trace("The cat sat on the mat and looked at the bird.", tau=tau)
        np.testing.assert_array_equal(together[:, i], alone.executed)


@pytest.mark.parametrize("words", [6, 200])  # side by side (short) and one at a time (long)
def test_the_matched_tau_realises_what_the_search_reports(tiny, words):
    prompt = " ".join(["route"] * words)
    enc = tiny.encode([prompt])
    target = tiny.trace(prompt, variant="hero").param_skip
    tau, realised = tiny.tau_for_param_skip(enc.input_ids, enc.attention_mask, "no_history", target)
    again = tiny.trace(prompt, variant="no_history", tau=tau)
    assert again.param_skip == pytest.approx(realised, abs=1e-12)
    exact = token_compute(again.executed, tiny.profile)["param_skip"].mean()
    assert exact == pytest.approx(realised, abs=1e-12)


@pytest.mark.parametrize("words", [6, 200])  # several thresholds a pass (short), one a pass (long)
def test_a_tau_sweep_gives_the_traces_one_call_per_tau_gives(tiny, words):
    prompt = " ".join(["sweep"] * words)
    taus = (0.2, 0.45, 0.5, 0.8)
    swept = tiny.traces_at_taus(prompt, taus, "hero", quality=True)
    for tau, trace in zip(taus, swept, strict=True):
        alone = tiny.trace(prompt, tau=tau, quality=True)
        assert trace.tau == tau and trace.tau_rule == alone.tau_rule
        np.testing.assert_array_equal(trace.executed, alone.executed)
        np.testing.assert_allclose(trace.gate, alone.gate, rtol=1e-5, atol=1e-6)  # batched sums, another order
        for field in ("nll", "dense_nll", "kl_to_dense"):
            np.testing.assert_allclose(trace.quality[field], alone.quality[field], rtol=1e-4, atol=1e-5)
