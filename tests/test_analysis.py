"""hero_core.analysis.analysis: every aggregate checked against a hand computation on synthetic traces, and the
whole pipeline on the tiny random model."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from hero_core.analysis import analysis as A
from hero_core.analysis import memory_stats as MS
from hero_core.analysis import token_categories as TC
from hero_core.eval.sweep.item_runs import run_items
from hero_core.measures.accounting import ComputeProfile
from hero_core.measures.metrics import bootstrap_ci
from hero_core.method.trace import RoutingTrace

PROFILE = ComputeProfile(total_params=1000, ffn_params=100, adapter_params=10, router_params=5, linear_params=800,
                         n_layers=4, attention_width=8, d_memory=4)


def make_trace(tokens, executed, *, attention=None, gate=None, token_ids=None, variant="hero") -> RoutingTrace:
    executed = np.asarray(executed, dtype=bool)
    R, T = executed.shape
    assert len(tokens) == T
    gate = np.where(executed, 0.8, 0.2) if gate is None else np.asarray(gate, dtype=float)
    zeros = np.zeros((R, T))
    return RoutingTrace(
        backbone="synthetic", checkpoint="none", variant=variant, tau=0.5, tokens=list(tokens),
        token_ids=list(token_ids if token_ids is not None else range(T)), routed_layers=list(range(R)),
        gate=gate, executed=executed, history_logit=zeros, local_logit=zeros, p_hist=zeros + 1, m_hist=zeros + 1,
        nu=zeros, memory_attention=np.zeros((T, R, R)) if attention is None else attention,
        forgetting=np.full(R, 0.98), profile=PROFILE)


# -- token categories ------------------------------------------------------------------------------
@pytest.mark.parametrize("token, domain, expected", [
    ("7", "reasoning", "digits_operators"), (" 12", None, "digits_operators"), (" *", "reasoning", "digits_operators"),
    ("==", "code", "digits_operators"), (" !=", "code", "digits_operators"), (" -", "chat", "digits_operators"),
    (" def", "code", "identifiers_keywords"), ("_private", "code", "identifiers_keywords"),
    (".append", "code", "identifiers_keywords"), (" def", "chat", "words"), (" Compute", "reasoning", "words"),
    ("café", "code", "identifiers_keywords"), ("é", "code", "words"), ("naïve", "chat", "words"),
    ("\n", "code", "whitespace"), ("\n    ", "code", "whitespace"), (" ", "reasoning", "whitespace"),
    ("\t\t", None, "whitespace"), ("(", "code", "punctuation"), ("):", "code", "punctuation"),
    (" .", "chat", "punctuation"), ("!", "chat", "punctuation"), ('"""', "code", "punctuation"),
    ("<|im_start|>", "chat", "special"), ("<|endoftext|>", None, "special"),
])
def test_token_category(token, domain, expected):
    assert TC.token_category(token, domain) == expected
    assert expected in TC.CATEGORIES and expected in TC.CATEGORY_LABELS


def test_token_category_rejects_non_strings():
    with pytest.raises(ValueError, match="string"):
        TC.token_category(3)


# -- skip by category and by layer -------------------------------------------------------------------
def test_skip_by_category_matches_a_hand_count():
    tokens = ["Question", " 4", " +", " ", "5", "."]
    executed = np.array([[1, 0, 0, 1, 0, 1],
                         [1, 1, 0, 0, 0, 1]])  # (R=2, T=6)
    table = A.skip_by_category({"reasoning": [make_trace(tokens, executed)]})
    by = table.set_index("category")
    # digits & operators: " 4", " +", "5" -> skipped 1 + 2 + 2 of 6 decisions
    assert by.loc["digits_operators", "n_tokens"] == 3
    assert by.loc["digits_operators", "skip_rate"] == pytest.approx(5 / 6)
    assert by.loc["words", "skip_rate"] == 0.0
    assert by.loc["whitespace", "skip_rate"] == pytest.approx(0.5)
    assert by.loc["punctuation", "ffn_executed_per_token"] == 2
    overall = 1 - executed.mean()
    assert by.loc["digits_operators", "skip_rate_vs_domain"] == pytest.approx(5 / 6 - overall)
    assert by["share_of_tokens"].sum() == pytest.approx(1.0)
    assert list(table["category"]) == [c for c in TC.CATEGORIES if c in set(table["category"])]


def test_layer_profiles_pool_tokens_across_items():
    t1 = make_trace(["a", "b"], [[1, 0], [1, 1], [0, 0]])
    t2 = make_trace(["c", "d", "e"], [[0, 0, 0], [1, 1, 0], [1, 1, 1]])
    prof = A.layer_skip_profiles({"chat": [t1, t2], "code": [t2]})
    chat = prof[prof.domain == "chat"]
    np.testing.assert_allclose(chat["skip_rate"], [4 / 5, 1 / 5, 2 / 5])
    assert list(chat["block"]) == [1, 2, 3] and set(chat["n_tokens"]) == {5}
    np.testing.assert_allclose(prof[prof.domain == "code"]["skip_rate"], 1 - t2.executed.mean(axis=1))


def test_bad_inputs_raise_value_errors():
    t = make_trace(["a"], [[1]])
    with pytest.raises(ValueError, match="mapping"):
        A.skip_by_category([t])
    with pytest.raises(ValueError, match="list of RoutingTrace"):
        A.layer_skip_profiles({"chat": t})


# -- flips -------------------------------------------------------------------------------------------------
def test_decision_flips_counts_each_direction():
    a = make_trace(["x", "y", "z"], [[1, 1, 0], [0, 1, 1]])
    b = make_trace(["x", "y", "z"], [[1, 0, 0], [1, 1, 0]])
    flips = A.decision_flips(a, b)
    assert flips["n_flips"] == 3 and flips["n_decisions"] == 6
    assert flips["only_a_executed"] == 2 and flips["only_b_executed"] == 1
    assert flips["tokens_with_flip"] == pytest.approx(1.0)
    np.testing.assert_array_equal(flips["per_token"], [1, 1, 1])
    np.testing.assert_allclose(flips["per_layer"], [1 / 3, 2 / 3])
    assert flips["mean_abs_gate_change"] == pytest.approx(0.6 * 3 / 6)
    with pytest.raises(ValueError, match="different tokens"):
        A.decision_flips(a, make_trace(["x", "y"], [[1, 1], [1, 1]]))


def test_flip_cost_splits_positions_by_where_decisions_changed():
    tokens, ids = ["p", "q", "r", "s"], [0, 1, 2, 3]
    a = make_trace(tokens, [[1, 1, 1, 1]], token_ids=ids)
    b = make_trace(tokens, [[1, 0, 1, 0]], token_ids=ids)  # tokens 1 and 3 flipped
    V = 4
    logits_a = torch.zeros(4, V)  # uniform: NLL = log 4 everywhere
    logits_b = torch.zeros(4, V)
    logits_b[1, 2] = 2.0  # position 1 predicts token 2 better under B
    logits_b[0, 0] = 3.0  # position 0 predicts token 1 worse under B
    cost = A.flip_cost(a, b, logits_a, logits_b)
    np.testing.assert_array_equal(cost["flipped"], [False, True, False])  # positions 0..T-2
    nll_b1 = -math.log(math.exp(2) / (math.exp(2) + 3))
    nll_b0 = -math.log(1 / (math.exp(3) + 3))
    np.testing.assert_allclose(cost["delta_nll"], [nll_b0 - math.log(4), nll_b1 - math.log(4), 0.0], atol=1e-6)
    assert cost["mean_delta_nll_flipped"] == pytest.approx(nll_b1 - math.log(4), abs=1e-6)
    assert cost["mean_delta_nll_unflipped"] == pytest.approx((nll_b0 - math.log(4)) / 2, abs=1e-6)
    with pytest.raises(ValueError, match="logits"):
        A.flip_cost(a, b, logits_a[:2], logits_b)


# -- memory attention ----------------------------------------------------------------------------------------------
def test_memory_row_stats_on_known_rows():
    R = 4
    att = np.zeros((2, R, R))
    for j in range(1, R):  # token 0 reads only the previous block; token 1 reads uniformly
        att[0, j, j - 1] = 1.0
        att[1, j, :j] = 1.0 / j
    att[1] *= 1 - 1e-6  # the read's eps: rows sum to slightly under 1 and are renormalised
    stats = MS.memory_row_stats(make_trace(["a", "b"], np.ones((R, 2)), attention=att))
    assert np.isnan(stats["lookback"][:, 0]).all()  # block 1 has no history
    np.testing.assert_allclose(stats["lookback"][0, 1:], 1.0)
    np.testing.assert_allclose(stats["previous_share"][0, 1:], 1.0)
    np.testing.assert_allclose(stats["entropy"][0, 1:], 0.0, atol=1e-12)
    np.testing.assert_allclose(stats["lookback"][1, 1:], [1.0, 1.5, 2.0])
    np.testing.assert_allclose(stats["previous_share"][1, 1:], [1.0, 1 / 2, 1 / 3])
    np.testing.assert_allclose(stats["entropy"][1, 1:], [0.0, math.log(2), math.log(3)], atol=1e-9)
    assert np.isnan(stats["normalised_entropy"][:, 1]).all()  # one earlier block: entropy is trivially 0
    np.testing.assert_allclose(stats["normalised_entropy"][1, 2:], 1.0)
    np.testing.assert_allclose(stats["uniform_lookback"][1, 1:], stats["lookback"][1, 1:])
    tokens = MS.memory_token_stats(make_trace(["a", "b"], np.ones((R, 2)), attention=att), "chat")
    assert tokens.loc[0, "lookback"] == pytest.approx(1.0) and tokens.loc[1, "lookback"] == pytest.approx(1.5)
    assert tokens.loc[1, "normalised_entropy"] == pytest.approx(1.0)


def test_memory_stats_skip_tokens_without_a_memory_read():
    R = 3
    att = np.zeros((2, R, R))
    att[0, 1, 0] = att[0, 2, 1] = 1.0  # token 1 never reads (all-zero rows, as under no_history)
    trace = make_trace(["a", "b"], np.ones((R, 2)), attention=att)
    stats = MS.memory_stats({"chat": [trace], "none": [make_trace(["c"], np.ones((R, 1)))]})
    chat = stats.set_index("domain").loc["chat"]
    assert chat["n_tokens"] == 1 and chat["lookback"] == 1.0 and chat["previous_share"] == 1.0
    none = stats.set_index("domain").loc["none"]
    assert none["n_tokens"] == 0 and math.isnan(none["lookback"])
    depth = MS.memory_depth_profile({"chat": [trace]})
    assert math.isnan(depth.loc[0, "lookback"]) and depth.loc[2, "lookback"] == 1.0


def test_memory_stats_of_a_real_trace_are_in_range(tiny):
    trace = tiny.trace("def add(a, b):\n    return a + b  # 42", variant="hero")
    rows = MS.memory_row_stats(trace)
    R = trace.n_routed
    j = np.arange(R)[None, :].repeat(trace.n_tokens, 0)
    ok = ~np.isnan(rows["lookback"])
    assert ok[:, 1:].all()  # every token reads its memory from block 2 on
    assert (rows["lookback"][ok] >= 1 - 1e-9).all() and (rows["lookback"][ok] <= j[ok] + 1e-9).all()
    assert ((rows["previous_share"][ok] >= 0) & (rows["previous_share"][ok] <= 1 + 1e-9)).all()
    ne = rows["normalised_entropy"][~np.isnan(rows["normalised_entropy"])]
    assert ((ne >= -1e-9) & (ne <= 1 + 1e-9)).all()
    local = tiny.trace("def add(a, b):\n    return a + b  # 42", variant="no_history")
    assert MS.memory_stats({"code": [local]}).loc[0, "n_tokens"] == 0


# -- item runs, flips and quality on the tiny model ---------------------------------------------------------
TEXTS = {"reasoning": ["Compute 3 + 4 * 2. The answer is 11.", "Ana has 5 apples and eats 2."],
         "code": ["def f(x):\n    return x * 2\n", "for i in range(3):\n    print(i)"]}


@pytest.fixture(scope="module")
def runs(tiny):
    return run_items({"hero": (tiny, "hero"), "no_history": (tiny, "no_history"), "dense": (tiny, "dense")},
                       TEXTS)


def test_run_items_matches_compute_to_a_reference(runs, tiny):
    """match_compute runs a label at the tau that realises its reference's param skip on each text: never further
    from the reference than the same run at its own tau, recorded in the trace, with logits at that tau."""
    matched = run_items({"hero": (tiny, "hero"), "no_history": (tiny, "no_history")}, TEXTS,
                          match_compute={"no_history": "hero"})
    for plain, run in zip(runs, matched):
        reference = run.traces["hero"].param_skip
        trace = run.traces["no_history"]
        assert trace.tau_rule.startswith("param_skip=")
        assert abs(trace.param_skip - reference) <= abs(plain.traces["no_history"].param_skip - reference) + 1e-9
        torch.testing.assert_close(run.logits["no_history"], tiny.logits(run.text, "no_history", tau=trace.tau))
    with pytest.raises(ValueError, match="listed first"):
        run_items({"hero": (tiny, "hero"), "no_history": (tiny, "no_history")}, TEXTS,
                    match_compute={"hero": "no_history"})
    with pytest.raises(ValueError, match="not in configs"):
        run_items({"hero": (tiny, "hero")}, TEXTS, match_compute={"local": "hero"})


def test_run_items_records_aligned_traces_and_logits(runs, tiny):
    assert [r.domain for r in runs] == ["reasoning", "reasoning", "code", "code"]
    for run in runs:
        assert set(run.traces) == {"hero", "no_history"} and set(run.logits) == {"hero", "no_history", "dense"}
        assert run.traces["hero"].token_ids == run.token_ids
        torch.testing.assert_close(run.logits["hero"], tiny.logits(run.text, "hero"))
    with pytest.raises(ValueError, match="other tokens"):
        A.ItemRun("x", "t", {"a": runs[0].traces["hero"], "b": runs[1].traces["hero"]})
    with pytest.raises(ValueError, match="no 'local' trace"):
        A.traces_by_domain(runs, "local")


def test_flip_summary_pools_decisions_and_positions(runs):
    table = A.flip_summary(runs, "hero", "no_history").set_index("domain")
    for domain in ("reasoning", "code"):
        items = [r for r in runs if r.domain == domain]
        a = np.concatenate([r.traces["hero"].executed.ravel() for r in items])
        b = np.concatenate([r.traces["no_history"].executed.ravel() for r in items])
        assert table.loc[domain, "flip_rate"] == pytest.approx((a != b).mean())
        assert table.loc[domain, "skip_b"] == pytest.approx(1 - b.mean())
        deltas = np.concatenate([A.flip_cost(r.traces["hero"], r.traces["no_history"], r.logits["hero"],
                                             r.logits["no_history"])["delta_nll"] for r in items])
        assert table.loc[domain, "delta_nll"] == pytest.approx(deltas.mean())
        assert table.loc[domain, "delta_nll_lo"] <= table.loc[domain, "delta_nll_hi"]
    with pytest.raises(ValueError, match="no traces for"):
        A.flip_summary(runs, "hero", "local")
    with pytest.raises(ValueError, match="no logits for"):
        A.quality_gap(runs, hero="hero", local="local")
    same = A.flip_summary(runs, "hero", "hero")
    assert (same["flip_rate"] == 0).all() and (same["delta_nll"] == 0).all()
    profile = A.flip_layer_profile(runs)
    assert len(profile) == 2 * runs[0].traces["hero"].n_routed


def test_quality_table_and_gap_against_dense(runs):
    table = A.quality_table(runs, ["dense", "hero", "no_history"])
    dense = table[table.label == "dense"]
    np.testing.assert_allclose(dense["delta_nll"], 0.0, atol=1e-7)
    np.testing.assert_allclose(dense["kl"], 0.0, atol=1e-6)
    assert (dense["top1_agreement"] == 1.0).all() and dense["param_skip"].isna().all()
    gap = A.quality_gap(runs, hero="hero", local="no_history").set_index("domain")
    for domain in ("reasoning", "code"):
        items = [r for r in runs if r.domain == domain]
        nll = {label: torch.cat([torch.nn.functional.cross_entropy(r.logits[label][:-1], r.ids[1:], reduction="none")
                                 for r in items]) for label in ("hero", "no_history")}
        assert gap.loc[domain, "gap_delta_nll"] == pytest.approx(float((nll["no_history"] - nll["hero"]).mean()),
                                                                 abs=1e-5)
        row = table[(table.domain == domain)].set_index("label")
        assert gap.loc[domain, "gap_kl"] == pytest.approx(row.loc["no_history", "kl"] - row.loc["hero", "kl"])
        assert gap.loc[domain, "hero_param_skip"] == pytest.approx(
            sum(r.traces["hero"].param_skip * r.traces["hero"].n_tokens for r in items)
            / sum(r.traces["hero"].n_tokens for r in items))
        assert gap.loc[domain, "gap_delta_nll_lo"] <= gap.loc[domain, "gap_delta_nll_hi"]


def test_skip_tables_on_the_tiny_model(runs):
    traces = A.traces_by_domain(runs, "hero")
    tokens = A.token_table(traces)
    assert len(tokens) == sum(t.n_tokens for ts in traces.values() for t in ts)
    assert set(tokens["category"]) <= set(TC.CATEGORIES)
    by_cat = A.skip_by_category(traces)
    for domain, group in by_cat.groupby("domain"):
        pooled = 1 - np.concatenate([t.executed.ravel() for t in traces[domain]]).mean()
        assert (group["skip_rate"] * group["n_tokens"]).sum() / group["n_tokens"].sum() == pytest.approx(pooled)
    assert isinstance(MS.memory_stats(traces), pd.DataFrame)


def test_bootstrap_ci():
    assert bootstrap_ci([2.0, 2.0, 2.0]) == (2.0, 2.0)
    lo, hi = bootstrap_ci([0.0, 1.0, 2.0, 3.0], [1, 1, 1, 1], seed=1)
    assert 0.0 <= lo <= 1.5 <= hi <= 3.0
    assert all(math.isnan(x) for x in bootstrap_ci([]))
    with pytest.raises(ValueError):
        bootstrap_ci([1.0, 2.0], [1.0])
