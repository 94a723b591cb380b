"""The frontier sweep, the oracle reference policy, and equal-compute runs (param_skip=…)."""

import numpy as np
import pytest
import torch

from hero_core.eval.baselines import oracle_skipping
from hero_core.eval.frontier.curves import at_skip, evaluate_points, ratio_interval
from hero_core.eval.methods import HeroMethod
from hero_core.method.model import PromptError
from hero_core.method.trace import RoutingTrace

PROMPT = "The quick brown fox jumps over the lazy dog because it wants to reach the river before dark."


def test_param_skip_picks_the_tau_that_meets_the_compute(tiny):
    for target in (0.0, 0.02, 0.05):
        trace = tiny.trace(PROMPT, param_skip=target)
        reachable = [tiny.trace(PROMPT, tau=t).param_skip for t in np.linspace(0.01, 0.99, 25)]
        best_grid = min(abs(s - target) for s in reachable)
        assert abs(trace.param_skip - target) <= best_grid + 1e-9  # at least as close as a fine grid of tau
        assert trace.tau_rule.startswith(f"param_skip={target:g}") and 0 < trace.tau < 1
    assert tiny.trace(PROMPT).tau_rule == "checkpoint" and tiny.trace(PROMPT, tau=0.4).tau_rule == "given"


def test_param_skip_applies_to_logits_and_generate_and_survives_save(tiny, tmp_path):
    trace = tiny.trace(PROMPT, param_skip=0.03)
    logits = tiny.logits(PROMPT, param_skip=0.03)
    assert torch.allclose(logits, tiny.logits(PROMPT, tau=trace.tau))
    _, generated = tiny.generate(PROMPT, max_new_tokens=3, param_skip=0.03)
    assert generated.tau == pytest.approx(trace.tau) and "on the prompt" in generated.tau_rule
    loaded = RoutingTrace.load(trace.save(tmp_path / "t.json"))
    assert loaded.tau_rule == trace.tau_rule


def test_param_skip_bad_input(tiny):
    with pytest.raises(PromptError, match="either tau or param_skip"):
        tiny.trace(PROMPT, tau=0.5, param_skip=0.1)
    with pytest.raises(PromptError, match="dense"):
        tiny.trace(PROMPT, variant="dense", param_skip=0.1)
    with pytest.raises(PromptError, match=r"\[0, 1\)"):
        tiny.trace(PROMPT, param_skip=1.5)


def test_oracle_skips_more_as_its_threshold_rises_and_never_looks_at_the_gate(tiny):
    ids = tiny.encode([PROMPT]).input_ids
    skips = []
    for threshold in (0.0, 0.3, 10.0):
        method = HeroMethod(tiny, "hero", name=f"oracle@{threshold}", policy=oracle_skipping(tiny, threshold))
        executed = method.forward(ids, torch.ones_like(ids)).executed
        skips.append(float((~executed).mean()))
    assert skips[0] == 0.0 and skips[2] == 1.0 and 0.0 <= skips[1] <= 1.0


def test_ratio_interval_brackets_the_pooled_ratio():
    rng = np.random.default_rng(0)
    n = np.full(40, 100)
    dense = rng.uniform(200, 300, 40)
    routed = dense + rng.normal(10, 5, 40)
    point, low, high = ratio_interval(routed, dense, n)
    assert point == pytest.approx(np.exp((routed - dense).sum() / n.sum()))
    assert low < point < high and low > 1.0


def test_evaluate_points_and_interpolation(tiny):
    texts = {"reasoning": [PROMPT, PROMPT[::-1], "Question: 2 + 2?\nAnswer: 4."]}
    methods = [HeroMethod(tiny, "hero", tau=t, name=f"t{t}") for t in (0.05, 0.95)]
    methods.append(HeroMethod(tiny, "dense", name="dense"))
    result = evaluate_points(tiny, methods, texts, max_tokens=64)
    dense = result["dense"]["reasoning"]
    assert dense["perplexity_ratio"] == pytest.approx(1.0) and dense["param_skip"] == 0.0
    assert dense["top1_agreement"] == pytest.approx(1.0) and dense["kl_from_dense"] == pytest.approx(0.0, abs=1e-6)
    low, high = result["t0.05"]["reasoning"], result["t0.95"]["reasoning"]
    assert high["param_skip"] > low["param_skip"] and high["texts"] == 3
    curve = {"points": [{"reasoning": low}, {"reasoning": high}]}
    mid = at_skip(curve, "reasoning", (low["param_skip"] + high["param_skip"]) / 2)
    lo_r, hi_r = sorted((low["perplexity_ratio"], high["perplexity_ratio"]))
    assert lo_r <= mid["perplexity_ratio"] <= hi_r
    assert at_skip(curve, "reasoning", 0.99) is None


def test_quality_trace_matches_the_dense_and_routed_logits_and_round_trips(tiny, tmp_path):
    from hero_core.measures.metrics import kl_divergence, log_probs, next_token_nll

    trace = tiny.trace(PROMPT, quality=True)
    ids = torch.tensor(trace.token_ids)
    routed, dense = tiny.logits(PROMPT), tiny.logits(PROMPT, variant="dense")
    np.testing.assert_allclose(trace.quality["nll"][:-1], next_token_nll(routed, ids).numpy(), rtol=1e-5)
    np.testing.assert_allclose(trace.quality["dense_nll"][:-1], next_token_nll(dense, ids).numpy(), rtol=1e-5)
    kl = kl_divergence(log_probs(dense), log_probs(routed))
    np.testing.assert_allclose(trace.quality["kl_to_dense"], kl.numpy(), atol=1e-6)
    assert np.isnan(trace.quality["nll"][-1])
    summary = trace.quality_summary()
    assert summary["perplexity_ratio"] == pytest.approx(
        float(np.exp(trace.quality["nll"][:-1].mean() - trace.quality["dense_nll"][:-1].mean())))
    loaded = RoutingTrace.load(trace.save(tmp_path / "q.json"))
    assert loaded.equals(trace) and np.isnan(loaded.quality["nll"][-1])
    assert tiny.trace(PROMPT).quality is None
    dense_trace = tiny.trace(PROMPT, variant="dense", quality=True)
    assert dense_trace.quality_summary()["perplexity_ratio"] == pytest.approx(1.0)


def test_the_frontier_carries_static_pruning_and_top_k_at_their_compute(tiny, monkeypatch):
    """Static pruning drops the same least influential FFNs for every token, its influence measured on train-split
    texts only; MoD top-k runs each block on a share of the sequence; both land on the frontier at their skip."""
    from hero_core.eval.frontier import curves as F

    seen_splits = []
    real_texts = F.__dict__.get("domain_texts")

    def texts(domain, split, n, hero=None, seed=0):
        seen_splits.append(split)
        return [PROMPT, PROMPT[::-1], "Question: 2 + 2?\nAnswer: 4."][:n]

    import hero_core.data.texts as data

    monkeypatch.setattr(data, "domain_texts", texts)
    assert real_texts is None  # frontier imports it at call time, from hero_core.data.texts
    per_ffn = tiny.profile.ffn_params / tiny.profile.total_params
    result = F.frontier({"tiny": tiny}, static=True, expert=True, taus={"tiny": ()}, static_drops=(1, 2),
                        random_skips=(per_ffn, 2 * per_ffn), limit=3, max_tokens=48, domains=("reasoning",))
    assert "tiny" not in result["curves"]  # an empty tau grid: baselines only
    static, expert = result["curves"]["static"], result["curves"]["expert_choice"]
    assert seen_splits.count("train") == 1 and len(static["influence"]) == tiny.config.n_routed
    one, two = (p["reasoning"]["param_skip"] for p in static["points"])
    assert one == pytest.approx(per_ffn, rel=1e-6) and two == pytest.approx(2 * per_ffn, rel=1e-6)
    assert expert["kind"] == "reference (not causal)"
    skips = [p["reasoning"]["param_skip"] for p in expert["points"]]
    assert skips[0] < skips[1]
