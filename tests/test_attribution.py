"""hero_core.analysis.attribution on the tiny model: the probe reproduces the trace, IG is complete, ablation is
exact."""

import copy

import numpy as np
import pytest
import torch

from hero_core.analysis.attribution import AttributionError, explain, gate_logit_function, gradients_available

PROMPT = "The cat sat on the mat because it was tired."
TOKEN = 8


@pytest.fixture(scope="module")
def trace(tiny):
    return tiny.trace(PROMPT)


def test_probe_reproduces_the_traced_gate_logit(tiny, trace):
    for block in range(trace.n_routed):
        a = explain(tiny, PROMPT, TOKEN, block, method="ablation")
        expected = trace.history_logit[block, TOKEN] + trace.local_logit[block, TOKEN]
        assert a.gate_logit == pytest.approx(expected, abs=1e-4)
        assert a.scores.shape == (TOKEN + 1,) and a.tokens == trace.tokens[: TOKEN + 1]
        assert a.executed == bool(trace.executed[block, TOKEN])


def test_integrated_gradients_complete_at_first_block(tiny):
    # No hard branch lies below the first routed block, so z is smooth along the path: completeness holds.
    a = explain(tiny, PROMPT, TOKEN, 0, method="integrated_gradients", n_steps=64)
    assert a.method == "integrated_gradients"
    change = a.gate_logit - a.baseline_logit
    assert float(a.scores.sum()) == pytest.approx(change, rel=1e-2, abs=1e-3)
    assert abs(a.delta) < 1e-2 * abs(change) + 1e-3


def test_integrated_gradients_complete_without_flips(tiny, trace):
    # With tau near 0 every gate executes all along the path (no jump), so completeness holds at depth too.
    last = trace.n_routed - 1
    a = explain(tiny, PROMPT, TOKEN, last, tau=1e-6, n_steps=64, baseline="pad")
    change = a.gate_logit - a.baseline_logit
    assert float(a.scores.sum()) == pytest.approx(change, rel=2e-2, abs=1e-3)
    assert np.any(np.abs(a.scores[:-1]) > 0)  # earlier tokens matter through attention


def test_ablation_is_the_drop_when_one_token_is_replaced(tiny):
    a = explain(tiny, PROMPT, TOKEN, 2, method="ablation", baseline="zeros")
    f = gate_logit_function(tiny, variant="hero", tau=0.5, block=2, token=TOKEN)
    ids = tiny.encode([PROMPT]).input_ids[:, : TOKEN + 1]
    embeds = tiny.model.get_input_embeddings()(ids).detach()
    for i in (0, TOKEN):
        ablated = embeds.clone()
        ablated[0, i] = 0.0
        with torch.no_grad():
            expected = float(f(embeds)[0] - f(ablated)[0])
        assert a.scores[i] == pytest.approx(expected, abs=1e-5)


def test_round_trip_dict(tiny):
    from hero_core.analysis.attribution import Attribution

    a = explain(tiny, PROMPT, 3, 1, n_steps=8)
    b = Attribution.from_dict(a.to_dict())
    assert b.method == a.method and np.array_equal(b.scores, a.scores) and b.delta == a.delta


@pytest.mark.parametrize("kwargs, match", [
    ({"variant": "dense"}, "dense"),
    ({"token": 999}, "token index"),
    ({"block": 99}, "block index"),
    ({"method": "shap"}, "unknown attribution method"),
    ({"baseline": "noise"}, "unknown baseline"),
    ({"n_steps": 1}, "n_steps"),
])
def test_bad_requests_are_user_errors(tiny, kwargs, match):
    args = {"token": 2, "block": 1} | kwargs
    token, block = args.pop("token"), args.pop("block")
    with pytest.raises(AttributionError, match=match):
        explain(tiny, PROMPT, token, block, **args)


def test_full_precision_has_gradients(tiny):
    assert gradients_available(tiny)


def test_nf4_falls_back_to_ablation_after_inference(tiny, tmp_path):
    pytest.importorskip("bitsandbytes")
    from hero_core.backbones.loading import load_backbone
    from hero_core.method.model import HeroModel
    from hero_core.method.tiny import tiny_backbone

    fresh = tiny_backbone()
    fresh.model.save_pretrained(tmp_path)
    fresh.tokenizer.save_pretrained(tmp_path)
    hero = HeroModel(load_backbone(tmp_path, quantization="nf4", device="cpu"), copy.deepcopy(tiny.router), "t")
    hero.trace(PROMPT)  # inference first: bitsandbytes may repack CPU weights and drop autograd
    auto = explain(hero, PROMPT, TOKEN, 2)
    assert auto.method == "ablation" and any("4-bit" in n for n in auto.notices)
    forced = explain(hero, PROMPT, TOKEN, 2, method="integrated_gradients")
    if not gradients_available(hero):
        assert forced.method == "ablation" and any("autograd" in n for n in forced.notices)
    else:  # a build whose 4-bit kernels keep autograd: IG must then be a real attribution
        assert forced.method == "integrated_gradients" and np.any(forced.scores[:-1] != 0)
    assert np.all(np.isfinite(auto.scores))


def test_integrated_gradients_check_their_own_completeness(tiny):
    from hero_core.analysis.attribution import completeness_passed

    # Block 2: 16 steps already pass, so one try is enough and the gap is under 5 % of the change.
    ok = explain(tiny, PROMPT, TOKEN, 2, method="integrated_gradients", n_steps=16)
    assert ok.passed and len(ok.tries) == 1 and abs(ok.delta) < 0.05 * abs(ok.change)
    # Block 1: a hard decision below flips on the path; doubling the steps barely moves the gap (so it stops
    # doubling and tries the other baseline), nothing closes it, and it says so.
    failed = explain(tiny, PROMPT, TOKEN, 1, method="integrated_gradients", n_steps=16, max_steps=64)
    assert not failed.passed
    assert [(t["baseline"], t["n_steps"]) for t in failed.tries] == [("pad", 16), ("pad", 32), ("zeros", 32)]
    assert not any(completeness_passed(t["delta"], t["change"]) for t in failed.tries)
    best = min(abs(t["delta"]) / abs(t["change"]) for t in failed.tries)
    assert abs(failed.delta) / abs(failed.change) == pytest.approx(best)  # the least bad try is returned
    assert any("failed on this decision" in n for n in failed.notices)
    single = explain(tiny, PROMPT, TOKEN, 1, method="integrated_gradients", n_steps=16, adaptive=False)
    assert len(single.tries) == 1 and not single.passed


def test_auto_keeps_gradients_only_when_they_pass(tiny):
    """"auto" gives an explanation that holds: integrated gradients where they pass their completeness check,
    token ablation (with one notice saying why) where they fail."""
    ok = explain(tiny, PROMPT, TOKEN, 2, n_steps=16)
    assert ok.method == "integrated_gradients" and ok.passed and not ok.notices
    fell_back = explain(tiny, PROMPT, TOKEN, 1, n_steps=16, max_steps=64)
    ablation = explain(tiny, PROMPT, TOKEN, 1, method="ablation")
    assert fell_back.method == "ablation" and fell_back.passed
    np.testing.assert_allclose(fell_back.scores, ablation.scores, rtol=1e-6, atol=1e-7)
    assert fell_back.baseline_logit == pytest.approx(ablation.baseline_logit)
    assert len(fell_back.notices) == 1 and "did not pass their completeness check" in fell_back.notices[0]
    assert len(fell_back.tries) == 3  # the failed tries stay on record


def test_token_ablation_reports_progress(tiny):
    seen = []
    a = explain(tiny, PROMPT, TOKEN, 2, method="ablation", internal_batch_size=4,
                progress=lambda done, total, what: seen.append((done, total)))
    assert seen == [(4, TOKEN + 1), (8, TOKEN + 1), (TOKEN + 1, TOKEN + 1)]
    assert a.scores.shape == (TOKEN + 1,)
