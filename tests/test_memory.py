"""The batched depth memory equals the paper's recurrence, in outputs and gradients."""

import torch

from hero_core.memory import DepthMemory, reference_recurrence


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
