"""Depth memory: kernelised linear attention over the routed blocks of one token (DESIGN §1).

Glossary (paper -> code):
    phi(x) = ELU(x) + 1          -> ``feature_map``
    S_j   (d_m x d_m)            -> ``S`` in the reference recurrence
    zeta_j (d_m)                 -> ``zeta``
    rho_j = sigmoid(eta_j)       -> ``rho`` (one scalar per routed block)
    q_j, k_j, v_j                -> ``q``, ``k``, ``v``
    c_j                          -> ``context``
    alpha_{j,i}                  -> ``weights`` (the memory-attention map)

Two forms of the same recurrence live here:

* :func:`reference_recurrence` is the paper's read-before-write loop with explicit S and zeta, one token
  and one block at a time. It is slow and exists to pin down the maths.
* :class:`DepthMemory` is what the model runs: batched over tokens, it keeps phi(k_i) and v_i of the
  blocks seen so far and reads in attention form,
  ``c_j = sum_{i<j} w_{j,i} v_i / (sum_{i<j} w_{j,i} + eps)`` with
  ``w_{j,i} = (prod_{m=i+1..j-1} rho_m) phi(q_j).phi(k_i)``. With R <= a few dozen blocks this is cheaper
  than carrying a d_m x d_m state per token, and it yields the attention weights the trace records.

``tests/test_memory.py`` proves both give the same contexts and the same gradients.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def feature_map(x: torch.Tensor) -> torch.Tensor:
    """phi(x) = ELU(x) + 1, positive so that the read is a convex combination."""
    return F.elu(x) + 1.0


def reference_recurrence(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rho: torch.Tensor,
                         eps: float = 1e-6) -> torch.Tensor:
    """Read-before-write linear attention over depth, written as the paper states it.

    For j = 1..R::

        c_j   = phi(q_j)^T S / (phi(q_j)^T zeta + eps)      # read (S = zeta = 0 before block 1)
        S    <- rho_j S + phi(k_j) v_j^T                     # write
        zeta <- rho_j zeta + phi(k_j)

    Args:
        q, k, v: (N, R, d_m) per-token queries, keys and values of the R routed blocks.
        rho: (R,) forgetting factors in (0, 1).
    Returns:
        contexts c: (N, R, d_m); c_1 = 0.
    """
    n, r, d_m = q.shape
    contexts = []
    for t in range(n):
        S = q.new_zeros(d_m, d_m)
        zeta = q.new_zeros(d_m)
        per_block = []
        for j in range(r):
            fq = feature_map(q[t, j])
            per_block.append((fq @ S) / (fq @ zeta + eps))
            fk = feature_map(k[t, j])
            S = rho[j] * S + torch.outer(fk, v[t, j])
            zeta = rho[j] * zeta + fk
        contexts.append(torch.stack(per_block))
    return torch.stack(contexts)


class DepthMemory:
    """Per-call memory of one forward pass: batched over N tokens, stepped once per routed block.

    Created fresh for every forward pass (memory never crosses tokens or decode steps) and never stored
    on a module, so concurrent calls on one shared model cannot see each other's state.
    """

    def __init__(self, n_tokens: int, d_memory: int, eps: float, *, device, dtype) -> None:
        self.eps = eps
        self.keys = torch.empty(n_tokens, 0, d_memory, device=device, dtype=dtype)  # phi(k_i): (N, i, d_m)
        self.values = torch.empty(n_tokens, 0, d_memory, device=device, dtype=dtype)  # v_i: (N, i, d_m)
        self.decay = torch.empty(0, device=device, dtype=dtype)  # prod_{m=i+1..j-1} rho_m for each i: (i,)

    def read(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """c_j and alpha_{j,.} for queries q (N, d_m). Returns (context (N, d_m), weights (N, j-1))."""
        if self.keys.shape[1] == 0:
            return torch.zeros_like(q), q.new_zeros(q.shape[0], 0)
        scores = torch.einsum("nd,nid->ni", feature_map(q), self.keys) * self.decay  # w_{j,i}: (N, j-1)
        weights = scores / (scores.sum(dim=1, keepdim=True) + self.eps)  # alpha_{j,i}
        context = torch.einsum("ni,nid->nd", weights, self.values)
        return context, weights

    def write(self, k: torch.Tensor, v: torch.Tensor, rho: torch.Tensor) -> None:
        """S <- rho S + phi(k) v^T, in attention form: decay the old entries, append the new one."""
        one = rho.new_ones(1)
        self.decay = torch.cat([self.decay * rho, one])
        self.keys = torch.cat([self.keys, feature_map(k).unsqueeze(1)], dim=1)
        self.values = torch.cat([self.values, v.unsqueeze(1)], dim=1)

    def state_norm(self) -> torch.Tensor:
        """Frobenius norm of S after the latest write, per token: (N,). Only computed when asked for."""
        decayed_keys = self.keys * self.decay[None, :, None]
        S = torch.einsum("nik,niv->nkv", decayed_keys, self.values)
        return S.flatten(1).norm(dim=1)
