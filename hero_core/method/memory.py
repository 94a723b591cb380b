"""Depth memory: attention over the routed blocks of one token (docs/method.md, Eq. 3-5 and "Memory kernels").

Glossary (paper -> code):
    phi(x) = ELU(x) + 1          -> ``feature_map`` (kernel ``elu1``, the paper's)
    beta (learned temperature)   -> ``scale`` (kernel ``softmax``, ours)
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

Two kernels choose the read's weights (``HeroConfig.memory_kernel``, recorded in every checkpoint):

* ``elu1`` (the paper's): ``w_{j,i} = decay_{j,i} phi(q_j).phi(k_i)``, ``alpha = w / (sum w + eps)``. Linear
  attention's weights are flat unless q and k become large and aligned ("attention dilution"): with 64-d
  projections of similar router states every read starts, and in our runs stays, within 0.3 % of uniform.
* ``softmax`` (ours): ``alpha_{j,.} = softmax_i(beta q_j.k_i + log decay_{j,i})`` over the <= R stored keys:
  the decay enters as an additive log-bias (as FoX's forget gate), beta is learned, and the read is still an
  exact convex combination of the earlier values, so the memory-attention map stays exact. There is no
  fixed-size state S for this kernel; with R <= a few dozen blocks storing the keys is the cheaper form anyway.

``tests/test_memory.py`` proves both forms give the same contexts and the same gradients, for both kernels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from hero_core.choices import check_choice

MEMORY_KERNELS = ("elu1", "softmax")
# How a read may be replaced at inference (``hero.trace(..., memory_read=...)``): "learned" is the router's own,
# "uniform" averages the same values with equal weights (the read-matters ablation: a flat map, all else equal).
MEMORY_READS = ("learned", "uniform")


def feature_map(x: torch.Tensor) -> torch.Tensor:
    """phi(x) = ELU(x) + 1, positive so that the read is a convex combination."""
    return F.elu(x) + 1.0


def check_memory_kernel(kernel: str) -> str:
    return check_choice("memory_kernel", kernel, MEMORY_KERNELS)


def check_memory_read(mode: str) -> str:
    return check_choice("memory_read", mode, MEMORY_READS)


def stored_key(kernel: str, k: torch.Tensor) -> torch.Tensor:
    """What the memory keeps of a key: phi(k) for the linear kernel (its reads only need that), k for softmax."""
    return feature_map(k) if kernel == "elu1" else k


def read_weights(kernel: str, q: torch.Tensor, keys: torch.Tensor, decay: torch.Tensor, *,
                 scale: torch.Tensor | None, eps: float) -> torch.Tensor:
    """alpha_{j,i} for queries q (N, d_m) over the stored keys (N, i, d_m) with decay products (i,): (N, i)."""
    if kernel == "elu1":
        scores = torch.bmm(feature_map(q).unsqueeze(1), keys.transpose(1, 2)).squeeze(1) * decay  # w_{j,i}
        return scores / (scores.sum(dim=1, keepdim=True) + eps)
    logits = torch.bmm(q.unsqueeze(1), keys.transpose(1, 2)).squeeze(1) * scale + torch.log(decay)
    return torch.softmax(logits, dim=1)


def softmax_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rho: torch.Tensor,
                      scale: torch.Tensor) -> torch.Tensor:
    """The ``softmax`` kernel's read-before-write loop, one token and one block at a time.

    For j = 1..R, with a list of stored (k_i, log-decay_i)::

        c_j = sum_i softmax_i(scale q_j.k_i + logdecay_i) v_i          # read (nothing stored before block 1)
        logdecay_i <- logdecay_i + log rho_j for every stored i;  store (k_j, 0)   # write

    Args as :func:`reference_recurrence`, plus the scalar ``scale`` (beta). Returns contexts (N, R, d_m)."""
    n, r, d_m = q.shape
    contexts = []
    for t in range(n):
        keys, values, log_decay, per_block = [], [], [], []
        for j in range(r):
            if keys:
                logits = torch.stack([scale * (q[t, j] @ key) + ld for key, ld in zip(keys, log_decay)])
                alpha = torch.softmax(logits, 0)
                per_block.append((alpha[:, None] * torch.stack(values)).sum(0))
            else:
                per_block.append(q.new_zeros(d_m))
            log_decay = [ld + torch.log(rho[j]) for ld in log_decay] + [q.new_zeros(())]
            keys.append(k[t, j])
            values.append(v[t, j])
        contexts.append(torch.stack(per_block))
    return torch.stack(contexts)


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

    With ``capacity`` (the number of routed blocks) and autograd off, keys, values and decay products
    live in buffers preallocated for all blocks and are written in place: the same numbers as the
    growing form, without re-copying the whole history at every block (O(R) instead of O(R^2) traffic).
    When a write needs a graph (training, attribution) the memory keeps the growing, out-of-place form,
    whose every step autograd can differentiate.
    """

    def __init__(self, n_tokens: int, d_memory: int, eps: float, *, device, dtype,
                 capacity: int | None = None, kernel: str = "elu1", uniform: bool = False) -> None:
        self.eps = eps
        self.kernel = check_memory_kernel(kernel)
        self.uniform = uniform  # read the plain mean of the stored values (memory_read="uniform")
        self.size = 0  # blocks written so far (i)
        self._buffered = capacity is not None and capacity > 0 and not torch.is_grad_enabled()
        width = capacity if self._buffered else 0
        self._keys = torch.empty(n_tokens, width, d_memory, device=device, dtype=dtype)  # stored k_i: (N, i, d_m)
        self._values = torch.empty(n_tokens, width, d_memory, device=device, dtype=dtype)  # v_i: (N, i, d_m)
        self._decay = torch.empty(width, device=device, dtype=dtype)  # prod_{m=i+1..j-1} rho_m for each i: (i,)

    @property
    def keys(self) -> torch.Tensor:
        return self._keys[:, : self.size] if self._buffered else self._keys

    @property
    def values(self) -> torch.Tensor:
        return self._values[:, : self.size] if self._buffered else self._values

    @property
    def decay(self) -> torch.Tensor:
        return self._decay[: self.size] if self._buffered else self._decay

    def read(self, q: torch.Tensor, scale: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """c_j and alpha_{j,.} for queries q (N, d_m). Returns (context (N, d_m), weights (N, j-1)).

        ``scale`` is the softmax kernel's beta (unused by elu1)."""
        if self.size == 0:
            return torch.zeros_like(q), q.new_zeros(q.shape[0], 0)
        if self.uniform:
            weights = q.new_full((q.shape[0], self.size), 1.0 / self.size)
        else:
            weights = read_weights(self.kernel, q, self.keys, self.decay, scale=scale, eps=self.eps)
        context = torch.bmm(weights.unsqueeze(1), self.values).squeeze(1)  # c_j: (N, d_m)
        return context, weights

    def write(self, k: torch.Tensor, v: torch.Tensor, rho: torch.Tensor) -> None:
        """S <- rho S + phi(k) v^T, in attention form: decay the old entries, append the new one."""
        needs_graph = torch.is_grad_enabled() and (k.requires_grad or v.requires_grad or rho.requires_grad)
        if self._buffered and (needs_graph or self.size >= self._keys.shape[1]):
            self._keys, self._values, self._decay = self.keys, self.values, self.decay  # fall back: grow
            self._buffered = False
        i = self.size
        if self._buffered and i == 0 and k.dtype != self._keys.dtype:
            # Under autocast the projections arrive in bf16, and the read's autocast products would cast the whole
            # stored history back to bf16 at every block (O(R^2) copies); stored as they come, the read is the
            # same to the bit without them.
            self._keys, self._values = (buffer.new_empty(buffer.shape, dtype=k.dtype)
                                        for buffer in (self._keys, self._values))
        if self._buffered:
            self._decay[:i].mul_(rho)
            self._decay[i] = 1.0
            self._keys[:, i] = stored_key(self.kernel, k)
            self._values[:, i] = v
        else:
            one = rho.new_ones(1)
            self._decay = torch.cat([self._decay * rho, one])
            self._keys = torch.cat([self._keys, stored_key(self.kernel, k).unsqueeze(1)], dim=1)
            self._values = torch.cat([self._values, v.unsqueeze(1)], dim=1)
        self.size = i + 1

    def state_norm(self) -> torch.Tensor:
        """Frobenius norm of S after the latest write, per token: (N,). Only computed when asked for.

        For the softmax kernel, which has no fixed-size state, the same sum over the raw keys (sum_i decay k_i v_i^T):
        a size of what is stored, comparable across tokens of one checkpoint, not across kernels."""
        # in the decay's precision (the router's): under autocast the entries are stored in bf16
        keys, values = (stored.to(self._decay.dtype) for stored in (self.keys, self.values))
        S = torch.einsum("nik,niv->nkv", keys * self.decay[None, :, None], values)
        return S.flatten(1).norm(dim=1)
