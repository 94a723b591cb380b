"""The batched depth memory equals the paper's recurrence, in outputs and gradients."""

import torch

from hero_core.method.memory import DepthMemory, reference_recurrence, softmax_reference, stored_key


def _batched(q, k, v, rho, eps=1e-6):
    n, r, d = q.shape
    memory = DepthMemory(n, d, eps, device=q.device, dtype=q.dtype)
    contexts, weights = [], []
    for j in range(r):
        c, w = memory.read(q[:, j])
        memory.write(k[:, j], v[:, j], rho[j])
        contexts.append(c)
        weights.append(w)
    return torch.stack(contexts, 1), weights


def _inputs(seed=0, n=5, r=7, d=8):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(n, r, d, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    eta = torch.randn(r, generator=g, dtype=torch.float64, requires_grad=True)
    return q, k, v, eta


def test_batched_memory_matches_reference_outputs_and_gradients():
    q, k, v, eta = _inputs()
    ref = reference_recurrence(q, k, v, torch.sigmoid(eta))
    fast, _ = _batched(q, k, v, torch.sigmoid(eta))
    assert torch.allclose(ref, fast, atol=1e-10)
    upstream = torch.randn_like(ref)
    grads_ref = torch.autograd.grad((ref * upstream).sum(), (q, k, v, eta))
    grads_fast = torch.autograd.grad((fast * upstream).sum(), (q, k, v, eta))
    for a, b in zip(grads_ref, grads_fast):
        assert torch.allclose(a, b, atol=1e-10)
    assert grads_fast[3].abs().sum() > 0  # the forgetting factors do learn


def test_first_block_reads_nothing_and_weights_rebuild_context():
    q, k, v, eta = _inputs(seed=1)
    rho = torch.sigmoid(eta)
    contexts, weights = _batched(q, k, v, rho)
    assert torch.count_nonzero(contexts[:, 0]) == 0
    assert weights[0].shape == (5, 0)
    for j in range(1, 7):
        rebuilt = torch.einsum("ni,nid->nd", weights[j], v[:, :j])
        assert torch.allclose(rebuilt, contexts[:, j], atol=1e-10)
        assert torch.all(weights[j] >= 0) and torch.all(weights[j].sum(1) <= 1 + 1e-9)


def test_decay_products_follow_the_definition():
    # w_{j,i} = prod_{m=i+1..j-1} rho_m phi(q_j).phi(k_i): with phi(q).phi(k) forced equal for every i, the
    # weights are proportional to the decay products alone.
    n, r, d = 1, 4, 3
    q = torch.zeros(n, r, d)
    k = torch.zeros(n, r, d)
    v = torch.randn(n, r, d)
    rho = torch.tensor([0.9, 0.5, 0.8, 0.7])
    _, weights = _batched(q, k, v, rho)
    w3 = weights[3][0]  # read at block j=4 (index 3): entries i=1,2,3 decayed by rho_2 rho_3, rho_3, 1
    expected = torch.tensor([0.5 * 0.8, 0.8, 1.0])
    assert torch.allclose(w3, expected / expected.sum(), atol=1e-5)


# -- the softmax kernel ---------------------------------------------------------------------------------------
def _batched_kernel(q, k, v, rho, kernel, scale=None, uniform=False, capacity=None):
    n, r, d = q.shape
    memory = DepthMemory(n, d, 1e-6, device=q.device, dtype=q.dtype, kernel=kernel, uniform=uniform,
                         capacity=capacity)
    contexts, weights = [], []
    for j in range(r):
        c, w = memory.read(q[:, j], scale)
        memory.write(k[:, j], v[:, j], rho[j])
        contexts.append(c)
        weights.append(w)
    return torch.stack(contexts, 1), weights


def test_softmax_memory_matches_its_reference_outputs_and_gradients():
    q, k, v, eta = _inputs(seed=4)
    log_scale = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    ref = softmax_reference(q, k, v, torch.sigmoid(eta), log_scale.exp())
    fast, _ = _batched_kernel(q, k, v, torch.sigmoid(eta), "softmax", log_scale.exp())
    assert torch.allclose(ref, fast, atol=1e-10)
    upstream = torch.randn_like(ref)
    inputs = (q, k, v, eta, log_scale)
    grads_ref = torch.autograd.grad((ref * upstream).sum(), inputs)
    grads_fast = torch.autograd.grad((fast * upstream).sum(), inputs)
    for a, b in zip(grads_ref, grads_fast):
        assert torch.allclose(a, b, atol=1e-10)
    assert grads_fast[3].abs().sum() > 0 and grads_fast[4].abs() > 0  # rho and the temperature learn


def test_softmax_read_is_an_exact_convex_combination_and_can_be_selective():
    q, k, v, eta = _inputs(seed=5)
    with torch.no_grad():
        contexts, weights = _batched_kernel(q, k, v, torch.sigmoid(eta), "softmax", torch.tensor(8.0),
                                            capacity=7)
    for j in range(1, 7):
        assert torch.allclose(weights[j].sum(1), torch.ones(5, dtype=torch.float64), atol=1e-12)
        assert torch.allclose(torch.einsum("ni,nid->nd", weights[j], v[:, :j]), contexts[:, j], atol=1e-10)
    # a sharp temperature concentrates the read: far from the uniform 1 / (j - 1)
    assert float(weights[6].max(1).values.min()) > 0.5


def test_softmax_decay_is_an_additive_log_bias():
    # equal scores: the weights are proportional to the decay products, as for elu1
    q, k = torch.zeros(1, 4, 3), torch.zeros(1, 4, 3)
    v = torch.randn(1, 4, 3)
    rho = torch.tensor([0.9, 0.5, 0.8, 0.7])
    _, weights = _batched_kernel(q, k, v, rho, "softmax", torch.tensor(1.0))
    expected = torch.tensor([0.5 * 0.8, 0.8, 1.0])
    assert torch.allclose(weights[3][0], expected / expected.sum(), atol=1e-6)


def test_uniform_read_averages_the_same_values():
    q, k, v, eta = _inputs(seed=6)
    for kernel in ("elu1", "softmax"):
        with torch.no_grad():
            contexts, weights = _batched_kernel(q, k, v, torch.sigmoid(eta), kernel, torch.tensor(3.0),
                                                uniform=True)
        for j in range(1, 7):
            assert torch.allclose(weights[j], torch.full((5, j), 1.0 / j, dtype=torch.float64))
            assert torch.allclose(contexts[:, j], v[:, :j].mean(1), atol=1e-12)


def test_unknown_kernel_and_read_are_refused():
    import pytest

    from hero_core.method.config import HeroConfig
    from hero_core.method.memory import check_memory_read

    with pytest.raises(ValueError, match="memory_kernel"):
        HeroConfig(routed_layers=[0, 1], d_model=8, d_ffn=16, memory_kernel="cosine")
    with pytest.raises(ValueError, match="memory_read"):
        check_memory_read("flat")


def _write_into_fp32_buffers(memory, k, v, rho):
    """DepthMemory.write as it was before the buffers took the keys' dtype: bf16 projections stored in fp32."""
    i = memory.size
    memory._decay[:i].mul_(rho)
    memory._decay[i] = 1.0
    memory._keys[:, i] = stored_key(memory.kernel, k)
    memory._values[:, i] = v
    memory.size = i + 1


def test_under_bf16_autocast_an_inference_memory_stores_what_autocast_produced_and_reads_the_same():
    """Under autocast the router's projections come in bf16 and the read's products run in bf16: fp32 buffers were
    cast back to bf16 at every block (O(R^2) copies in a bf16 prefill). The buffers now take the keys' dtype, and
    every read, and the state norm a trace records, equals the fp32 buffers' bit for bit."""
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(64, 6, 16, generator=g).bfloat16() for _ in range(3))  # as autocast makes them
    rho = torch.full((6,), 0.8)
    for kernel in ("elu1", "softmax"):
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            memory, fp32_buffers = (DepthMemory(64, 16, 1e-6, device="cpu", dtype=torch.float32, capacity=6,
                                                kernel=kernel) for _ in range(2))
            for j in range(6):
                got, expected = memory.read(q[:, j], torch.tensor(2.0)), fp32_buffers.read(q[:, j], torch.tensor(2.0))
                for a, b in zip(got, expected):
                    assert a.dtype == b.dtype and torch.equal(a, b)
                memory.write(k[:, j], v[:, j], rho[j])
                _write_into_fp32_buffers(fp32_buffers, k[:, j], v[:, j], rho[j])
        state_norm = memory.state_norm()  # what record_states keeps (outside autocast): the router's fp32
        assert state_norm.dtype == torch.float32 and torch.equal(state_norm, fp32_buffers.state_norm())
        assert memory.keys.dtype == memory.values.dtype == torch.bfloat16
        assert fp32_buffers.keys.dtype == torch.float32
