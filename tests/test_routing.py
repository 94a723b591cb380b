"""Routing on the tiny random Llama: branches, exactness, variants, batching, generation, recording."""

import threading

import numpy as np
import pytest
import torch

from hero_core.method.inject import RoutedFFN
from hero_core.method.model import PromptError

PROMPTS = ["The quick brown fox jumps over the lazy dog.", "def f(x):\n    return x * 2", "12 + 7 = 19. 19 - 5 = 14."]


def _reference_branch(self, u, gate, executed, active, adapter):
    """Both branches for every token, then select: the slow definition the gathered path must equal."""
    ffn = gate[:, None] * self.base_layer(u)
    skip = (1 - gate[:, None]) * adapter(u)
    out = torch.where(executed[:, None], ffn, skip)
    if active is not None:
        out = out * active[:, None]
    return out


def test_gathered_branches_equal_compute_everything_reference(tiny, monkeypatch):
    trace = tiny.trace(PROMPTS[0])
    assert 0 < trace.executed.mean() < 1, "the test needs a mix of executed and skipped FFNs"
    fast = tiny.logits(PROMPTS[0], variant="hero")
    monkeypatch.setattr(RoutedFFN, "_branch", _reference_branch)
    slow = tiny.logits(PROMPTS[0], variant="hero")
    assert (fast - slow).abs().max() <= 1e-5


def test_dense_variant_equals_unwrapped_backbone(tiny):
    from hero_core.method.tiny import tiny_backbone

    bare = tiny_backbone(seed=0).model
    enc = tiny.encode([PROMPTS[1]])
    with torch.no_grad():
        expected = bare(input_ids=enc.input_ids).logits[0]
    got = tiny.logits(PROMPTS[1], variant="dense")
    assert (got - expected).abs().max() <= 1e-5
    routed = tiny.logits(PROMPTS[1], variant="hero")
    assert (routed - expected).abs().max() > 1e-3  # routing really changes the computation


def test_every_variant_runs_and_respects_its_ablation(tiny):
    variants = ("hero", "no_history", "no_memread", "no_aux", "no_pos", "dense")
    traces = {v: tiny.trace(PROMPTS[2], variant=v) for v in variants}
    assert np.all(traces["no_history"].history_logit == 0)
    assert np.all(traces["no_memread"].memory_attention == 0) and np.all(traces["no_memread"].nu == 0)
    assert np.any(traces["hero"].memory_attention != 0) and np.any(traces["hero"].nu != 0)
    assert traces["dense"].executed.all() and traces["dense"].param_skip == 0
    for name in ("no_history", "no_memread", "no_aux", "no_pos"):
        assert not np.allclose(traces[name].gate, traces["hero"].gate), name
    with pytest.raises(ValueError, match="unknown variant"):
        tiny.trace(PROMPTS[0], variant="nope")


def test_trace_fields_and_memory_rows(tiny):
    trace = tiny.trace(PROMPTS[0])
    R, T = trace.n_routed, trace.n_tokens
    assert trace.gate.shape == (R, T) and trace.memory_attention.shape == (T, R, R)
    assert np.all(trace.memory_attention[:, 0, :] == 0)  # first routed block has no history
    assert np.all(np.triu(trace.memory_attention[0]) == 0)  # strictly lower-triangular
    assert np.allclose(trace.executed, trace.gate >= trace.tau)
    np.testing.assert_allclose(trace.gate, 1 / (1 + np.exp(-(trace.history_logit + trace.local_logit))), atol=1e-6)
    np.testing.assert_allclose(trace.p_hist, 1 / (1 + np.exp(-trace.history_logit / 0.9)), atol=1e-6)
    np.testing.assert_allclose(trace.m_hist, np.cumprod(trace.p_hist, axis=0), rtol=1e-5)
    assert np.all(trace.nu[0] == 0)
    frame = trace.to_frame()
    assert len(frame) == R * T and set(frame["block"]) == set(range(1, R + 1))


def test_memory_attention_rebuilds_the_read_context(tiny):
    trace = tiny.trace(PROMPTS[2], record_states=True)
    states = torch.tensor(trace.states["router_state"], dtype=torch.float32)  # (R, T, d_s)
    contexts = trace.states["memory_context"]
    with torch.no_grad():
        values = tiny.router.to_v(states).double().numpy()  # v_i = W_v s_i
    for j in range(1, trace.n_routed):
        rebuilt = np.einsum("ti,itd->td", trace.memory_attention[:, j, :j], values[:j])
        np.testing.assert_allclose(rebuilt, contexts[j], atol=1e-5)
    assert trace.states["memory_state_norm"].shape == (trace.n_routed, trace.n_tokens)


def test_batched_padded_prompts_match_single_prompt_traces(tiny):
    batched = tiny.trace(PROMPTS)
    for prompt, bt in zip(PROMPTS, batched):
        single = tiny.trace(prompt)
        assert bt.token_ids == single.token_ids
        np.testing.assert_allclose(bt.gate, single.gate, atol=1e-5)
        confident = np.abs(single.gate - single.tau) > 1e-4
        assert np.array_equal(bt.executed[confident], single.executed[confident])


def test_generation_routes_every_new_token(tiny):
    text, trace = tiny.generate(PROMPTS[0], max_new_tokens=6)
    n_prompt = trace.n_prompt_tokens
    assert trace.n_tokens > n_prompt  # decode steps were recorded
    assert trace.gate.shape[1] == trace.n_tokens
    # each decoded token was routed on its own pass: its gates differ from the prompt's last token
    assert not np.allclose(trace.gate[:, n_prompt], trace.gate[:, n_prompt - 1])
    # routing a decoded token with the KV cache equals routing it inside the full sequence
    full = tiny.trace(tiny.tokenizer.decode(trace.token_ids))
    if full.token_ids == trace.token_ids:
        np.testing.assert_allclose(full.gate, trace.gate, atol=1e-4)


def test_dense_generate_matches_backbone_generate(tiny):
    from hero_core.method.tiny import tiny_backbone

    bare = tiny_backbone(seed=0)
    enc = tiny.encode([PROMPTS[1]])
    with torch.no_grad():
        ref = bare.model.generate(enc.input_ids, attention_mask=enc.attention_mask, max_new_tokens=8, do_sample=False,
                                  pad_token_id=bare.tokenizer.eos_token_id)[0, enc.input_ids.shape[1]:]
    text, _ = tiny.generate(PROMPTS[1], max_new_tokens=8, variant="dense")
    ours = tiny.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tiny.tokenizer.decode(ref, skip_special_tokens=True) == text
    assert len(ours) > 0


def test_concurrent_calls_do_not_mix(tiny):
    prompts = [f"{p} #{i}" for i, p in enumerate(PROMPTS * 3)][:8]
    serial = [tiny.trace(p) for p in prompts]
    results: dict[int, object] = {}

    def work(i):
        results[i] = tiny.trace(prompts[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, trace in enumerate(serial):
        assert results[i].equals(trace)


def test_same_input_gives_bit_identical_trace(tiny):
    assert tiny.trace(PROMPTS[0]).equals(tiny.trace(PROMPTS[0]))


def test_trace_and_logits_is_trace_then_logits_in_one_pass(tiny):
    text = "Routing decides per token which layers run. " * 6
    for options in ({}, {"max_tokens": 9}, {"tau": 0.7}, {"param_skip": 0.2}):
        trace, logits = tiny.trace_and_logits(text, "hero", **options)
        alone = tiny.trace(text, "hero", **options)
        np.testing.assert_array_equal(trace.executed, alone.executed)
        assert trace.tau == alone.tau and trace.token_ids == alone.token_ids
        cut = options.get("max_tokens")
        torch.testing.assert_close(logits, tiny.logits(text, "hero", tau=alone.tau, max_tokens=cut))
        assert logits.shape[0] == trace.n_tokens


def test_gradients_reach_every_router_part(tiny):
    call = tiny.new_call("hero", keep_gates=True)
    enc = tiny.encode([PROMPTS[0]])
    tiny.router.zero_grad()
    logits = tiny.forward(enc.input_ids, enc.attention_mask, call, use_cache=False)
    gates = torch.stack(call.passes[-1].gates)
    (logits.float().pow(2).mean() + gates.sum()).backward()
    for name in ("state_encoder.down.weight", "path_encoder.0.weight", "to_q.weight", "to_k.weight", "to_v.weight",
                 "history_head.0.weight", "local_head.mlp.0.weight", "eta", "adapters.0.w1.weight"):
        grad = dict(tiny.router.named_parameters())[name].grad
        assert grad is not None and grad.abs().sum() > 0, name
    assert all(p.grad is None for p in tiny.model.parameters())  # the backbone stays frozen
    tiny.router.zero_grad()


@pytest.mark.parametrize("bad", ["", "   \n\t "])
def test_empty_prompt_is_refused(tiny, bad):
    with pytest.raises(PromptError, match="empty"):
        tiny.trace(bad)


def test_odd_characters_and_overlong_prompts(tiny):
    trace = tiny.trace("naïve café 😀 中文 مرحبا \x00\x07 \ud800 end")
    assert len(trace.tokens) == len(trace.token_ids) == trace.gate.shape[1]
    long = tiny.trace("word " * 5000, max_tokens=64)
    assert long.n_tokens == 64 and any("truncated" in n for n in long.notices)


def test_tau_must_lie_in_open_unit_interval(tiny):
    for bad in (0.0, 1.0, -0.2, 3):
        with pytest.raises(ValueError, match="tau"):
            tiny.trace(PROMPTS[0], tau=bad)
    low, high = tiny.trace(PROMPTS[0], tau=0.05), tiny.trace(PROMPTS[0], tau=0.95)
    assert low.executed.sum() >= high.executed.sum()


def test_straight_through_keeps_the_hard_forward_and_gives_g_the_ffn_signal(tiny):
    enc = tiny.encode([PROMPTS[0]])
    hard = tiny.forward(enc.input_ids, enc.attention_mask, tiny.new_call("hero"), use_cache=False)
    call = tiny.new_call("hero", keep_gates=True, straight_through=True)
    with torch.enable_grad():
        st_logits = tiny.forward(enc.input_ids, enc.attention_mask, call, use_cache=False)
        assert (st_logits - hard).abs().max() <= 1e-5  # same forward value
        gates = call.passes[-1].gates
        grads = torch.autograd.grad(st_logits.float().pow(2).mean(), gates)
    skipped = ~call.passes[-1].records[0].executed
    assert skipped.any() and grads[0][skipped].abs().sum() > 0  # skipped tokens still learn about the FFN


def _gates_of(router, hbars, grad: bool) -> torch.Tensor:
    with torch.set_grad_enabled(grad):
        path = router.new_path(hbars[0].shape[0], "hero", device="cpu", dtype=torch.float32)
        return torch.stack([router.decide(j, h, path, "hero").gate for j, h in enumerate(hbars, start=1)]).detach()


def test_inference_fast_path_matches_the_modules_and_follows_weight_updates(tiny):
    """At inference the router folds its norm weights into one matmul and takes the depth cosine from one
    dot product; with a graph it runs the paper's modules. Both must agree, also after weights change."""
    router = tiny.router
    torch.manual_seed(3)
    hbars = [torch.randn(5, router.config.d_model) * (1 + j) for j in range(router.config.n_routed)]
    before = _gates_of(router, hbars, grad=False)
    torch.testing.assert_close(before, _gates_of(router, hbars, grad=True), rtol=0, atol=1e-6)
    originals = [w.detach().clone() for w in (router.local_head.norm.weight, router.state_encoder.norm.weight)]
    try:
        with torch.no_grad():  # an in-place update, as an optimiser step or load_state_dict makes
            router.local_head.norm.weight.mul_(-3.0)
            router.state_encoder.norm.weight.add_(0.5)
        after = _gates_of(router, hbars, grad=False)
        assert (after - before).abs().max() > 1e-3  # the folded weights were rebuilt
        torch.testing.assert_close(after, _gates_of(router, hbars, grad=True), rtol=0, atol=1e-6)
    finally:
        with torch.no_grad():
            router.local_head.norm.weight.copy_(originals[0])
            router.state_encoder.norm.weight.copy_(originals[1])
    torch.testing.assert_close(_gates_of(router, hbars, grad=False), before, rtol=0, atol=0)
