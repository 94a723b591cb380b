"""The evaluation engine (hero_core.eval.engine.run_texts) against direct runs of the tiny model."""

import numpy as np
import pytest
import torch

from hero_core.eval.engine import run_texts
from hero_core.eval.methods import HeroMethod
from hero_core.measures.metrics import kl_divergence, log_probs, next_token_nll, top1_agreement
from hero_core.method.trace import quality_fields

TEXTS = ["Compute 3 + 4 * 2. The answer is 11.", "def f(x):\n    return x * 2\n", "Ana has 5 apples."]


class CountingMethod(HeroMethod):
    """A HeroMethod that counts its forwards."""

    calls = 0

    def forward(self, input_ids, attention_mask):
        self.calls += 1
        return super().forward(input_ids, attention_mask)


def test_sums_match_a_direct_run_and_the_reference_runs_once_per_batch(tiny):
    reference = CountingMethod(tiny, "dense")
    routed = HeroMethod(tiny, "hero", tau=0.5, name="routed")
    texts = list(run_texts(tiny, [reference, routed], TEXTS, reference, max_tokens=32, batch_size=2,
                           keep={"logits"}))
    assert reference.calls == 2  # two batches, and the reference in the method list reuses its run
    assert [t.index for t in texts] == [0, 1, 2]
    for text, prompt in zip(texts, TEXTS):
        ids = torch.tensor(text.token_ids)
        direct_routed = tiny.logits(prompt, tau=0.5, max_tokens=32)
        direct_dense = tiny.logits(prompt, variant="dense", max_tokens=32)
        run = text.runs["routed"]
        assert run.n_tokens == len(ids) and run.n_pred == len(ids) - 1
        assert run.executed.shape == (tiny.config.n_routed, len(ids))
        assert run.nll_sum == pytest.approx(float(next_token_nll(direct_routed, ids).sum()), rel=1e-5)
        assert run.dense_nll_sum == pytest.approx(float(next_token_nll(direct_dense, ids).sum()), rel=1e-5)
        kl = kl_divergence(log_probs(direct_dense), log_probs(direct_routed))
        assert run.kl_sum == pytest.approx(float(kl.sum()), abs=1e-4)
        assert run.agree_sum == float(top1_agreement(direct_dense, direct_routed).sum())
        assert run.logits.shape == direct_routed.shape
        own = text.runs["dense"]
        assert own.kl_sum == 0 and own.agree_sum == own.n_tokens and own.executed is None
        assert own.nll_sum == own.dense_nll_sum


def test_traced_runs_carry_the_models_trace_and_quality_and_match_compute(tiny):
    hero = HeroMethod(tiny, "hero", name="hero")
    matched = HeroMethod(tiny, "no_history", name="matched")
    [text] = run_texts(tiny, [hero, matched], TEXTS[:1], HeroMethod(tiny, "dense"), max_tokens=32,
                       keep={"tokens"}, traced=["hero", "matched"], match_compute={"matched": "hero"})
    direct = tiny.trace(TEXTS[0], max_tokens=32, quality=True)
    run = text.runs["hero"]
    assert run.trace.token_ids == direct.token_ids == text.token_ids
    np.testing.assert_array_equal(run.trace.executed, direct.executed)
    for name, values in quality_fields(run.token_quality).items():
        np.testing.assert_array_equal(values, direct.quality[name])
    assert run.nll_sum == pytest.approx(np.nansum(direct.quality["nll"]), rel=1e-6)
    trace = text.runs["matched"].trace
    assert trace.tau_rule.startswith(f"param_skip={run.trace.param_skip:.4g}")
    np.testing.assert_array_equal(trace.executed,
                                  tiny.trace(TEXTS[0], variant="no_history", tau=trace.tau, max_tokens=32).executed)


def test_without_a_reference_there_are_no_sums(tiny):
    [text] = run_texts(tiny, [HeroMethod(tiny, "hero", name="hero")], TEXTS[:1], max_tokens=16)
    assert np.isnan(text.runs["hero"].nll_sum) and text.runs["hero"].token_quality is None


def test_bad_requests_say_what_is_wrong(tiny):
    a, b = HeroMethod(tiny, "hero", name="a"), HeroMethod(tiny, "no_history", name="b")
    with pytest.raises(ValueError, match="method names must be distinct"):
        list(run_texts(tiny, [a, HeroMethod(tiny, "dense", name="a")], TEXTS))
    with pytest.raises(ValueError, match="batch_size=1"):
        list(run_texts(tiny, [a], TEXTS, traced=["a"], batch_size=2))
    with pytest.raises(ValueError, match="must run before"):
        list(run_texts(tiny, [a, b], TEXTS, traced=["a", "b"], match_compute={"a": "b"}))
    with pytest.raises(ValueError, match="keep takes"):
        list(run_texts(tiny, [a], TEXTS, keep={"traces"}))
