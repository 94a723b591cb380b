"""The router's decode paths (packed Python step, compiled fused step) against the module path they rewrite."""

import shutil

import pytest
import torch

from hero_core.method.config import TRAINABLE_VARIANTS, VARIANTS
from hero_core.method.packed_router import PackedPath
from hero_core.method.tiny import tiny_hero

FIELDS = ("gate", "history_logit", "local_logit", "p_hist", "m_hist", "nu", "memory_attention", "router_state",
          "memory_context")
PROMPT = "The quick brown fox jumps over the lazy dog."


# Every fast decode path, each held to the module path. The compiled step needs a C++ compiler (g++ via torch's
# extension builder and ninja): where there is none it is skipped with that reason; where there is one, a
# failed build fails the test (decode_path would otherwise fall back to the packed step without it).
FAST_PATHS = ["packed", pytest.param("fused", marks=pytest.mark.skipif(
    shutil.which("g++") is None and shutil.which("c++") is None, reason="no C++ compiler for the fused step"))]


@pytest.fixture(params=FAST_PATHS)
def decode_path(request, monkeypatch):
    monkeypatch.setenv("HERO_DECODE_PATH", request.param)
    if request.param == "fused":
        from hero_core.method.fused_router import fused_extension

        assert fused_extension() is not None, "the fused router step did not build (see the warning logged)"
    return request.param


def _decisions(router, hbars, variant, packed, expect_fused=False):
    with torch.no_grad():
        path = router.new_path(hbars[0].shape[0], variant, device="cpu", dtype=router.eta.dtype, packed=packed)
        # the local router computes its head alone: it has no packed path (HeroRouter.decide_local)
        packed = packed and VARIANTS[variant].history
        assert isinstance(path, PackedPath) == packed
        if packed:
            assert (path.fused is not None) == expect_fused
        out = []
        for j, hbar in enumerate(hbars, start=1):
            d = router.decide(j, hbar.to(router.eta.dtype), path, variant)
            norm = path.memory.state_norm() if path.memory is not None else None
            out.append(({f: getattr(d, f).clone() for f in FIELDS}, norm))
        return out


def _hbars(router, n=3, seed=3):
    torch.manual_seed(seed)
    return [torch.randn(n, router.config.d_model) * (1 + j) for j in range(router.config.n_routed)]


@pytest.mark.parametrize("variant", TRAINABLE_VARIANTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kernel", ["elu1", "softmax"])
def test_packed_path_gives_the_module_paths_decisions(variant, dtype, kernel, decode_path):
    router = tiny_hero(seed=1, variant=variant, n_layers=6, memory_kernel=kernel,
                       memory_scale_init=4.0).router.to(dtype)
    hbars = _hbars(router)
    atol = 2e-5 if dtype == torch.float32 else 0.1  # bf16: a few roundings of 2^-8 through two heads
    tau = router.config.tau
    for (ref, ref_norm), (new, new_norm) in zip(_decisions(router, hbars, variant, False),
                                                _decisions(router, hbars, variant, True,
                                                           expect_fused=decode_path == "fused")):
        for f in FIELDS:
            assert ref[f].shape == new[f].shape, f
            torch.testing.assert_close(new[f].float(), ref[f].float(), rtol=0, atol=atol, msg=f)
        if ref_norm is not None:
            torch.testing.assert_close(new_norm.float(), ref_norm.float(), rtol=2e-2 if dtype != torch.float32
                                       else 1e-5, atol=atol)
        clear = (ref["gate"].float() - tau).abs() > atol  # decisions agree wherever the gate is not at tau
        assert torch.equal((ref["gate"] >= tau)[clear], (new["gate"] >= tau)[clear])


def test_packed_weights_follow_in_place_updates(decode_path):
    router = tiny_hero(seed=2).router
    hbars = _hbars(router)
    fused = decode_path == "fused"
    before = _decisions(router, hbars, "hero", True, expect_fused=fused)[-1][0]["gate"]
    with torch.no_grad():
        router.to_q.weight.mul_(-2.0)
        router.eta.add_(-1.0)
    after = _decisions(router, hbars, "hero", True, expect_fused=fused)
    reference = _decisions(router, hbars, "hero", False)
    assert (after[-1][0]["gate"] - before).abs().max() > 1e-4  # rebuilt, not stale
    for (new, _), (ref, _) in zip(after, reference):
        torch.testing.assert_close(new["gate"], ref["gate"], rtol=0, atol=2e-5)


def test_autograd_keeps_the_module_path():
    router = tiny_hero(seed=2).router
    with torch.enable_grad():
        path = router.new_path(2, "hero", device="cpu", dtype=torch.float32, packed=True)
    assert not isinstance(path, PackedPath)


def _decode(hero, steps, *, reference, record_states=False):
    """Greedy decode with the KV cache; per step: logits, gates and executed of the new token."""
    from transformers import DynamicCache

    router = hero.router
    if reference:
        original = router.new_path
        router.new_path = lambda *a, packed=False, **k: original(*a, **k)
    try:
        call = hero.new_call("hero", record_states=record_states)
        cache = DynamicCache(config=hero.model.config)
        ids = hero.encode([PROMPT]).input_ids
        out = []
        with torch.no_grad():
            logits = hero.forward(ids, None, call, cache=cache, use_cache=True)
            for _ in range(steps):
                next_id = logits[:, -1].argmax(-1, keepdim=True)
                logits = hero.forward(next_id, None, call, cache=cache, use_cache=True)
                out.append(logits[0, -1].float())
                assert isinstance(call.passes[-1].path, PackedPath) != reference
        assert not isinstance(call.passes[0].path, PackedPath)  # the prefill keeps the module path
        return out, call
    finally:
        if reference:
            del router.new_path


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_decode_steps_give_the_same_logits_and_decisions(dtype, decode_path):
    hero = tiny_hero(seed=0)
    hero.model.to(dtype)  # the backbone's precision; routers stay fp32
    ref_logits, ref_call = _decode(hero, 6, reference=True, record_states=True)
    new_logits, new_call = _decode(hero, 6, reference=False, record_states=True)
    atol = 1e-4 if dtype == torch.float32 else 2e-2
    for a, b in zip(ref_logits, new_logits):
        torch.testing.assert_close(b, a, rtol=0, atol=atol)
    for p_ref, p_new in zip(ref_call.passes[1:], new_call.passes[1:]):
        for r_ref, r_new in zip(p_ref.records, p_new.records):
            torch.testing.assert_close(r_new.fields["gate"], r_ref.fields["gate"], rtol=0, atol=1e-5)
            assert torch.equal(r_new.executed, r_ref.executed)
            torch.testing.assert_close(r_new.memory_attention, r_ref.memory_attention, rtol=0, atol=1e-5)
            torch.testing.assert_close(r_new.memory_state_norm, r_ref.memory_state_norm, rtol=1e-5, atol=1e-5)


def test_generate_takes_the_packed_path_and_traces_every_token():
    hero = tiny_hero(seed=0)
    text, trace = hero.generate(PROMPT, max_new_tokens=5)
    assert trace.gate.shape[1] == len(trace.tokens)
    assert trace.memory_attention.shape == (len(trace.tokens), hero.config.n_routed, hero.config.n_routed)


def test_the_decode_path_is_chosen_by_name(monkeypatch):
    router = tiny_hero(seed=2).router
    monkeypatch.setenv("HERO_DECODE_PATH", "module")
    with torch.no_grad():
        assert not isinstance(router.new_path(2, "hero", device="cpu", dtype=torch.float32, packed=True), PackedPath)
    monkeypatch.setenv("HERO_DECODE_PATH", "fastest")
    with pytest.raises(ValueError, match="HERO_DECODE_PATH='fastest': choose one of fused, packed, module"), \
            torch.no_grad():
        router.new_path(2, "hero", device="cpu", dtype=torch.float32, packed=True)


def test_a_fused_step_that_cannot_be_built_falls_back_loudly(monkeypatch, caplog):
    from hero_core.method import fused_router

    monkeypatch.setenv("HERO_DECODE_PATH", "fused")
    monkeypatch.setattr(fused_router, "_compiled", lambda: (None, "CalledProcessError: ninja: build stopped"))
    fused_router._warn_once.cache_clear()
    with caplog.at_level("WARNING", logger=fused_router.__name__):
        assert fused_router.decode_path() == "packed"
    assert "could not be built (CalledProcessError: ninja: build stopped)" in caplog.text
    fused_router._warn_once.cache_clear()


@pytest.mark.parametrize("kernel", ["elu1", "softmax"])
def test_fp32_decode_steps_run_the_compiled_loops_at_every_block(kernel, monkeypatch):
    """The compiled step has fp32 loops and an ATen fallback; the previous block's (N,) outputs are strided
    views, which once sent every block after the first to the slower fallback unnoticed."""
    from hero_core.method import packed_router

    monkeypatch.setenv("HERO_DECODE_PATH", "fused")
    router = tiny_hero(seed=1, n_layers=6, memory_kernel=kernel, memory_scale_init=4.0).router
    served: list[bool] = []
    real_decide = packed_router._decide_fused

    def watching(router, j, hbar, path):
        memory = [path.memory.keys, path.memory.values] if path.memory is not None else []
        prev = [] if j == 1 else [path.hbar_prev, path.delta_prev, path.dist_prev, path.p_hist, path.m_hist]
        served.append(path.fused.takes_loops(hbar, prev, memory, path.weights.fused_weights(j)))
        return real_decide(router, j, hbar, path)

    monkeypatch.setattr(packed_router, "_decide_fused", watching)
    hbars = _hbars(router, n=1)
    _decisions(router, hbars, "hero", True, expect_fused=True)
    assert served == [True] * len(hbars)


def _batch_decode(hero, steps, tau, branch_scaling):
    """Greedy decode of two prompts of one length (no padding) under ``tau``; logits and records per step."""
    from transformers import DynamicCache

    hero.router.config.branch_scaling = branch_scaling
    call = hero.new_call("hero", tau=tau)
    cache = DynamicCache(config=hero.model.config)
    rows = [hero.encode([text]).input_ids[0] for text in (PROMPT, "Routers choose which layers each token needs.")]
    ids = torch.stack([row[: min(map(len, rows))] for row in rows])
    out = []
    with torch.no_grad():
        logits = hero.forward(ids, None, call, cache=cache, use_cache=True)
        for _ in range(steps):
            logits = hero.forward(logits[:, -1].argmax(-1, keepdim=True), None, call, cache=cache, use_cache=True)
            out.append(logits[:, -1].float())
    return out, call


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None, reason="no C++ compiler")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("branch_scaling", ["unscaled", "paper"])
def test_a_routed_block_as_one_compiled_call_computes_what_the_python_branch_does(dtype, branch_scaling,
                                                                                 monkeypatch):
    """The compiled routed block (decision, FFN or adapter, gather and scatter) against the compiled decision
    followed by RoutedFFN's Python branch: the same operations, so the same logits bit for bit, at a tau where
    some tokens of a batch take the FFN and others the adapter."""
    from hero_core.method import inject

    monkeypatch.setenv("HERO_DECODE_PATH", "fused")
    hero = tiny_hero(seed=0)
    hero.model.to(dtype)
    for adapter in hero.router.adapters:  # trained adapters are not zero: give the skipped branch an output
        torch.nn.init.normal_(adapter.w2.weight, std=0.05)
    blocks_run = []
    real = inject.run_block_fused
    monkeypatch.setattr(inject, "run_block_fused", lambda *a, **k: blocks_run.append(1) or real(*a, **k))
    _, probe = _batch_decode(hero, 2, 0.5, branch_scaling)
    gates = torch.cat([r.fields["gate"] for p in probe.passes[1:] for r in p.records])
    tau = float(gates.median())  # half the decode decisions skip
    fused_logits, fused_call = _batch_decode(hero, 4, tau, branch_scaling)
    assert len(blocks_run) == hero.config.n_routed * (2 + 4)  # every block of every decode step, none of prefill
    monkeypatch.setattr(inject.RoutedFFN, "_takes_fused_block", lambda *a: False)
    ref_logits, ref_call = _batch_decode(hero, 4, tau, branch_scaling)
    executed = torch.stack([r.executed for p in fused_call.passes[1:] for r in p.records])
    assert 0 < executed.float().mean() < 1 and (executed.all(1) != executed.any(1)).any()  # mixed within a batch
    for a, b in zip(ref_logits, fused_logits):
        assert torch.equal(a, b)
    for p_ref, p_new in zip(ref_call.passes[1:], fused_call.passes[1:]):
        for r_ref, r_new in zip(p_ref.records, p_new.records):
            assert torch.equal(r_new.executed, r_ref.executed)
            assert torch.equal(r_new.fields["gate"], r_ref.fields["gate"])


def test_only_plain_gated_silu_ffns_are_run_by_the_compiled_block():
    from hero_core.method.inject import decoder_layers, gated_silu_projections

    mlp = decoder_layers(tiny_hero(seed=0).model)[0].mlp.base_layer
    assert gated_silu_projections(mlp) == (mlp.gate_proj, mlp.up_proj, mlp.down_proj)
    mlp.act_fn = torch.nn.GELU()
    assert gated_silu_projections(mlp) is None
    assert gated_silu_projections(torch.nn.Linear(4, 4)) is None


def _prefill_gates(hero, *, grad=False):
    """The recorded gates of one prefill of PROMPT (one tensor per routed block)."""
    call = hero.new_call("hero")
    with torch.set_grad_enabled(grad):
        hero.forward(hero.encode([PROMPT]).input_ids, None, call, use_cache=False)
    return [record.fields["gate"] for record in call.passes[0].records]


@pytest.mark.parametrize("trained_in", ["bfloat16", "float32"])
def test_a_bf16_prefill_decides_in_the_precision_the_router_was_trained_in(trained_in, monkeypatch):
    hero = tiny_hero(seed=0)
    hero.model.to(torch.bfloat16)
    hero.router.config.extra["compute_dtype"] = trained_in
    seen = []  # every block's (j, hbar) as the router received them
    decide = type(hero.router).decide
    monkeypatch.setattr(type(hero.router), "decide",
                        lambda self, j, hbar, path, variant: seen.append((j, hbar.clone())) or decide(
                            self, j, hbar, path, variant))
    gates = _prefill_gates(hero)
    autocast = trained_in == "bfloat16"
    assert {g.dtype for g in gates} == {torch.bfloat16 if autocast else torch.float32}
    assert {hbar.dtype for _, hbar in seen} == {torch.float32}  # hbar enters in the router's dtype either way
    # the same gates as the router's own module path run by hand, under bf16 autocast or not
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        path = hero.router.new_path(seen[0][1].shape[0], "hero", device="cpu", dtype=torch.float32)
        by_hand = [decide(hero.router, j, hbar, path, "hero").gate for j, hbar in seen]
    for ours, theirs in zip(gates, by_hand):
        assert torch.equal(ours, theirs)


def test_a_bf16_prefill_records_every_router_state_a_trace_shows():
    """Under bf16 autocast the depth memory stores its entries in bf16; the states a trace records (router state,
    memory context, memory state norm) still come out for every block, finite, the norm in the router's fp32."""
    hero = tiny_hero(seed=0)
    hero.model.to(torch.bfloat16)
    hero.router.config.extra["compute_dtype"] = "bfloat16"
    call = hero.new_call("hero", record_states=True)
    with torch.no_grad():
        hero.forward(hero.encode([PROMPT]).input_ids, None, call, use_cache=False)
    records = call.passes[-1].records
    assert len(records) == hero.config.n_routed
    for record in records:
        assert record.memory_state_norm.dtype == torch.float32
        for state in (record.router_state, record.memory_context, record.memory_state_norm):
            assert torch.isfinite(state.float()).all()
    assert (records[-1].memory_state_norm > 0).all()


def test_fp32_backbones_training_and_decode_steps_keep_fp32_decisions():
    hero = tiny_hero(seed=0)
    hero.router.config.extra["compute_dtype"] = "bfloat16"
    assert {g.dtype for g in _prefill_gates(hero)} == {torch.float32}  # an fp32 backbone: the reference
    hero.model.to(torch.bfloat16)
    assert {g.dtype for g in _prefill_gates(hero, grad=True)} == {torch.float32}  # training brings its own autocast
    _, call = _decode(hero, 2, reference=True)  # decode steps on the module path, as the fast paths are held to
    assert {r.fields["gate"].dtype for p in call.passes[1:] for r in p.records} == {torch.float32}
    assert {r.fields["gate"].dtype for r in call.passes[0].records} == {torch.bfloat16}  # its prefill
