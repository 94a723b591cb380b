"""The dense pass of trace(quality=True) beside the routed one: same results either way, errors surface."""

import threading

import numpy as np
import pytest
import torch

import hero_core.method.model as model_module
from hero_core.backbones import threads as thread_policy
from hero_core.method.side_by_side import each_side_by_side, passes_at_once, side_by_side, spare_core

PROMPT = "Two passes over the same tokens: one routed, one dense."


@pytest.mark.parametrize("together", [True, False])
def test_quality_is_the_same_with_the_passes_together_or_in_turn(tiny, monkeypatch, together):
    monkeypatch.setattr(model_module, "spare_core", lambda device: False)
    reference = tiny.trace(PROMPT, quality=True)
    monkeypatch.setattr(model_module, "spare_core", lambda device: together)
    monkeypatch.setattr(thread_policy, "usable_cores", lambda: 2 * torch.get_num_threads())  # a core for the second
    trace, dense_threads = traced_afresh(tiny, together, monkeypatch)
    assert tiny.backbone.dense_reference.computed == 1  # the dense pass ran, not read from the reference's cache
    assert (dense_threads[0] is not threading.current_thread()) == together, dense_threads  # on a thread of its own
    np.testing.assert_array_equal(trace.gate, reference.gate)
    for name, values in reference.quality.items():
        np.testing.assert_array_equal(trace.quality[name], values, err_msg=name)


def traced_afresh(hero, together: bool, monkeypatch):
    """``hero.trace(PROMPT, quality=True)`` with its dense pass computed again (an earlier trace of the prompt left it
    in the backbone's cache) and the threads that pass ran on. ``together``: the routed pass waits until the dense
    pass has begun, so only passes that really run at once get through (a deadline, not a sleep, ends the wait)."""
    from hero_core.measures.dense_reference import DenseReference
    from hero_core.method.model import HeroModel

    monkeypatch.setattr(hero.backbone, "dense_reference", DenseReference())
    dense_began, dense_threads, real = threading.Event(), [], HeroModel.forward

    def forward(self, input_ids, attention_mask, call, **kwargs):
        if call.variant == "dense":
            dense_threads.append(threading.current_thread())
            dense_began.set()
        elif together:
            assert dense_began.wait(timeout=60), "the dense pass did not begin while the routed pass ran"
        return real(self, input_ids, attention_mask, call, **kwargs)

    monkeypatch.setattr(HeroModel, "forward", forward)
    return hero.trace(PROMPT, quality=True), dense_threads


def test_a_padded_batch_has_the_quality_of_each_prompt_alone(tiny):
    """Quality is taken on each row's own tokens: padding (a shorter prompt in a batch) changes nothing."""
    prompts = [PROMPT, "A shorter one."]
    batched = tiny.trace(prompts, quality=True)
    for prompt, trace in zip(prompts, batched, strict=True):
        alone = tiny.trace(prompt, quality=True)
        assert trace.n_tokens == alone.n_tokens
        for name, values in alone.quality.items():
            np.testing.assert_allclose(trace.quality[name], values, rtol=1e-4, atol=1e-5, err_msg=name)


def test_both_passes_run_without_grad_and_an_error_in_the_second_is_raised():
    seen = []

    def grad_mode():
        seen.append(torch.is_grad_enabled())
        return len(seen)

    assert side_by_side(grad_mode, grad_mode, together=True)[0] in (1, 2)
    assert seen == [False, False]

    def fails():
        raise ValueError("second pass failed")

    with pytest.raises(ValueError, match="second pass failed"):
        side_by_side(lambda: 1, fails, together=True)


def test_a_spare_core_needs_a_cpu_half_free_and_no_autocast(monkeypatch):
    cpu = torch.device("cpu")
    monkeypatch.setattr(thread_policy, "usable_cores", lambda: 2 * torch.get_num_threads())
    assert spare_core(cpu)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not spare_core(cpu)
    assert not spare_core(torch.device("meta"))
    monkeypatch.setattr(thread_policy, "usable_cores", lambda: 2 * torch.get_num_threads() - 1)
    assert not spare_core(cpu)


def test_token_quality_equals_the_separate_measures():
    """The one-log-softmax form gives what the separate measures give, checked against torch's own losses."""
    import torch.nn.functional as F

    from hero_core.measures.metrics import kl_divergence, log_probs, next_token_nll, token_quality, top1_agreement

    generator = torch.Generator().manual_seed(0)
    dense, routed = torch.randn(2, 9, 50, generator=generator).unbind(0)
    routed = routed.to(torch.bfloat16)  # runs may differ in precision
    ids = torch.randint(0, 50, (9,), generator=generator)
    q = token_quality(dense, routed, ids)
    torch.testing.assert_close(q["nll"], F.cross_entropy(routed[:-1].float(), ids[1:], reduction="none"))
    torch.testing.assert_close(q["dense_nll"], F.cross_entropy(dense[:-1], ids[1:], reduction="none"))
    kl = F.kl_div(F.log_softmax(routed.float(), -1), F.log_softmax(dense, -1), reduction="none",
                  log_target=True).sum(-1)
    torch.testing.assert_close(q["kl"], kl)
    assert torch.equal(q["top1_agree"], top1_agreement(dense.float(), routed.float()))
    torch.testing.assert_close(next_token_nll(routed, ids), q["nll"])
    torch.testing.assert_close(kl_divergence(log_probs(dense), log_probs(routed)), q["kl"])


def test_passes_at_once_are_the_cores_over_the_threads(monkeypatch):
    cpu = torch.device("cpu")
    monkeypatch.setattr(thread_policy, "usable_cores", lambda: 3 * torch.get_num_threads())
    assert passes_at_once(cpu) == 3
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert passes_at_once(cpu) == 1
    monkeypatch.setattr(thread_policy, "usable_cores", lambda: 1)
    assert passes_at_once(cpu) == 1


@pytest.mark.parametrize("at_once", [1, 2, 3])
def test_each_side_by_side_keeps_the_order_runs_on_threads_without_grad_and_raises(monkeypatch, at_once):
    import threading

    monkeypatch.setattr(thread_policy, "usable_cores", lambda: 4 * torch.get_num_threads())  # the budget allows at_once

    threads, grads = set(), []

    def square(x: int) -> int:
        threads.add(threading.get_ident())
        grads.append(torch.is_grad_enabled())
        return x * x

    assert each_side_by_side(square, list(range(7)), at_once=at_once) == [x * x for x in range(7)]
    assert grads == [False] * 7
    assert len(threads) <= at_once  # this thread and at most at_once - 1 others (tests/test_threads.py: overlap)

    def fails(x: int) -> int:
        if x == 2:
            raise ValueError("run 2 failed")
        return x

    with pytest.raises(ValueError, match="run 2 failed"):
        each_side_by_side(fails, [0, 1, 2, 3], at_once=at_once)


def test_traces_side_by_side_are_the_traces_one_after_another(tiny):
    """Two routers' passes at once on one backbone (Compare's runs): each trace is what it is alone."""
    taus = [0.3, 0.5, 0.7]
    alone = [tiny.trace(PROMPT, tau=tau, quality=True) for tau in taus]
    together = each_side_by_side(lambda tau: tiny.trace(PROMPT, tau=tau, quality=True), taus, at_once=2)
    for a, b in zip(alone, together, strict=True):
        np.testing.assert_array_equal(a.gate, b.gate)
        np.testing.assert_array_equal(a.executed, b.executed)
        np.testing.assert_array_equal(a.quality["kl_to_dense"], b.quality["kl_to_dense"])
