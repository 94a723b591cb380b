"""The HeRo router: state encoder, depth memory, history head, local head and per-block adapters.

Glossary (docs/method.md -> code). j is the 1-based index of a routed block, R their number.
    hbar_j             post-attention residual state           ``hbar``          (N, d)
    u_j = LN_ffn(hbar) FFN input                               ``u``             (N, d)
    delta_j            hbar_j - hbar_{j-1}                     ``delta``         (N, d)
    r, q_rem, d, gamma, p_hist_{j-1}, m_hist_{j-1}  path features   ``path``    (N, 6)
    z_h = W_hu SiLU(W_hd RMSNorm(hbar))                        ``StateEncoder``  (N, d_h)
    z_a = FFN_path(path)                                       ``PathEncoder``   (N, d_a)
    s_j = [z_h ; z_a]                                          ``router_state``  (N, d_s)
    q, k, v = W_q s, W_k s, W_v s                              ``to_q/to_k/to_v``
    c_j                                                        ``memory_context`` (N, d_m)
    alpha_{j,i}  memory-attention weights                      ``memory_attention`` (N, j-1)
    nu = 1 - cos(W_n s, W_c c)                                 ``nu``            (N,)
    a = f_theta([s; c; nu])  history logit                     ``history_head``  (N,)
    b = f_psi(hbar)          local logit                       ``local_head``    (N,)
    g = sigmoid(a + b)       gate                              ``gate``          (N,)
    p_hist = sigmoid(a / T_hist),  m_hist <- m_hist * p_hist
    rho_j = sigmoid(eta_j)   forgetting factor                 ``eta``           (R,)
    beta = exp(memory_log_scale)  softmax kernel's temperature ``memory_log_scale`` ()
    Adapter(u) = W_2 SiLU(W_1 u)                               ``Adapter``

Shared across routed blocks: encoders, memory projections, both heads. Per block: adapter and eta.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from hero_core.method import packed_router
from hero_core.method.config import VARIANTS, HeroConfig
from hero_core.method.memory import DepthMemory, check_memory_read
from hero_core.method.path_state import POSITIONAL_FEATURES, Decision, PathState

N_PATH_FEATURES = 6


def _mlp(d_in: int, d_hidden: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, d_hidden), nn.SiLU(), nn.Linear(d_hidden, d_out))


class StateEncoder(nn.Module):
    """z_h = W_hu SiLU(W_hd RMSNorm(hbar)): a small summary of the hidden state."""

    def __init__(self, d_model: int, d_encoder: int, d_out: int) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(d_model)
        self.down = nn.Linear(d_model, d_encoder, bias=False)  # W_hd
        self.up = nn.Linear(d_encoder, d_out, bias=False)  # W_hu

    def forward(self, hbar: torch.Tensor) -> torch.Tensor:
        return self.up(F.silu(self.down(self.norm(hbar))))


class LocalHead(nn.Module):
    """b = f_psi(hbar). The RMSNorm is our choice: residual norms grow ~10x across depth, and one
    shared head must read every block. Its output bias starts high so the gate starts near 1."""

    def __init__(self, d_model: int, d_hidden: int, bias_init: float) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(d_model)
        self.mlp = _mlp(d_model, d_hidden, 1)
        nn.init.zeros_(self.mlp[2].weight)
        nn.init.constant_(self.mlp[2].bias, bias_init)

    def forward(self, hbar: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.norm(hbar)).squeeze(-1)


def unit_rms(hbar: torch.Tensor, norm: nn.RMSNorm) -> torch.Tensor:
    """hbar / RMS(hbar) with ``norm``'s eps and no weight: both router norms read the same hbar, so at
    inference it is computed once per block and the norms' weights are folded into the next layers."""
    return F.rms_norm(hbar, norm.normalized_shape, None, norm.eps)


class Adapter(nn.Module):
    """Adapter(u) = W_2 SiLU(W_1 u), the cheap branch a skipped token takes. W_2 starts at zero so a
    skipped FFN initially contributes nothing (plain skip)."""

    def __init__(self, d_model: int, rank: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(d_model, rank, bias=False)
        self.w2 = nn.Linear(rank, d_model, bias=False)
        nn.init.zeros_(self.w2.weight)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(u)))


@dataclass(frozen=True)
class FoldedLayers:
    """W_hd and the local head's first layer as one inference matmul on rms_norm(hbar) (no weight): both
    read hbar through an RMSNorm, whose weights are folded into theirs. The same function as the two
    modules, with products reordered (equal to float rounding)."""

    version: tuple
    weight: torch.Tensor  # (d_encoder + head_hidden, d)
    bias: torch.Tensor
    split: int  # rows of W_hd


class HeroRouter(nn.Module):
    """All trainable HeRo parameters for one backbone. Holds no per-call state."""

    def __init__(self, config: HeroConfig) -> None:
        super().__init__()
        self.config = config
        c = config
        self.state_encoder = StateEncoder(c.d_model, c.d_encoder, c.d_hidden_state)
        self.path_encoder = _mlp(N_PATH_FEATURES, c.d_path_hidden, c.d_aux)  # FFN_path
        self.to_q = nn.Linear(c.d_state, c.d_memory, bias=False)
        self.to_k = nn.Linear(c.d_state, c.d_memory, bias=False)
        self.to_v = nn.Linear(c.d_state, c.d_memory, bias=False)
        self.novelty_state = nn.Linear(c.d_state, c.d_memory, bias=False)  # W_n
        self.novelty_context = nn.Linear(c.d_memory, c.d_memory, bias=False)  # W_c
        self.history_head = _mlp(c.d_state + c.d_memory + 1, c.head_hidden, 1)  # f_theta
        nn.init.zeros_(self.history_head[2].weight)  # a = 0 at init: training starts from the local gate
        nn.init.zeros_(self.history_head[2].bias)
        self.local_head = LocalHead(c.d_model, c.head_hidden, c.gate_bias_init)  # f_psi
        rho = torch.full((c.n_routed,), c.rho_init)
        self.eta = nn.Parameter(torch.log(rho / (1 - rho)))  # rho_j = sigmoid(eta_j)
        if c.memory_kernel == "softmax":  # beta, learned in log space so it stays positive
            self.memory_log_scale = nn.Parameter(torch.tensor(math.log(c.memory_scale_init / math.sqrt(c.d_memory))))
        self.adapters = nn.ModuleList(Adapter(c.d_model, c.adapter_rank) for _ in range(c.n_routed))

    # -- per-call state -------------------------------------------------------------------------
    def new_path(self, n_tokens: int, variant: str, *, device, dtype, packed: bool = False,
                 memory_read: str = "learned") -> PathState:
        """Fresh per-pass state. ``packed`` (decode steps: one new token per sequence) asks for the decode
        path this process chose (hero_core.method.packed_router: the compiled step, the packed Python step, or
        the module path); it is taken only with autograd off and in the router's dtype.
        ``memory_read="uniform"`` replaces every read by the plain mean of the stored values (module path)."""
        uniform = check_memory_read(memory_read) == "uniform"
        # the local router computes its head alone (decide_local): nothing to pack
        computes_state = VARIANTS[variant].history
        if packed and computes_state and not uniform and not torch.is_grad_enabled() and dtype == self.eta.dtype:
            fast = packed_router.new_packed_path(self, n_tokens, variant, device=device, dtype=dtype)
            if fast is not None:
                return fast
        needs_memory = VARIANTS[variant].memory_read
        memory = DepthMemory(n_tokens, self.config.d_memory, self.config.eps, device=device, dtype=dtype,
                             capacity=self.config.n_routed, kernel=self.config.memory_kernel,
                             uniform=uniform) if needs_memory else None
        return PathState(memory=memory)

    def trained_under_bf16_autocast(self) -> bool:
        """Whether training ran this router's products in bf16 (recorded as ``extra["compute_dtype"]``)."""
        return self.config.extra.get("compute_dtype") == "bfloat16"

    def forgetting(self) -> torch.Tensor:
        """rho_j for every routed block: (R,)."""
        return torch.sigmoid(self.eta)

    def memory_scale(self) -> torch.Tensor | None:
        """beta of the softmax kernel (None for elu1)."""
        return self.memory_log_scale.exp() if self.config.memory_kernel == "softmax" else None

    # -- one routed block -----------------------------------------------------------------------
    def path_features(self, j: int, hbar: torch.Tensor, path: PathState) -> torch.Tensor:
        """The six scalars [r, q_rem, d, gamma, p_hist_{j-1}, m_hist_{j-1}] for block j: (N, 6).

        d enters as log1p(||delta||) (our choice): raw norms range over two orders of magnitude."""
        R = self.config.n_routed
        n = hbar.shape[0]
        delta = hbar - path.hbar_prev if path.hbar_prev is not None else torch.zeros_like(hbar)
        dist = delta.norm(dim=-1)
        if j >= 3 and torch.is_grad_enabled():
            gamma = F.cosine_similarity(delta, path.delta_prev, dim=-1, eps=self.config.eps)
        elif j >= 3:  # the same cosine from one dot product and the norms already at hand: cosine_similarity
            # re-reads both (N, d) states ~4 times, which costs ~1 % of a long prefill per block here
            eps = self.config.eps
            gamma = torch.linalg.vecdot(delta, path.delta_prev) / (dist.clamp_min(eps) * path.dist_prev.clamp_min(eps))
        else:
            gamma = hbar.new_zeros(n)
        ones = hbar.new_ones(n)
        p_prev = path.p_hist if path.p_hist is not None else ones
        m_prev = path.m_hist if path.m_hist is not None else ones
        path.hbar_prev, path.delta_prev, path.dist_prev = hbar, delta, dist
        return torch.stack([ones * (j / R), ones * ((R - j) / R), torch.log1p(dist), gamma, p_prev, m_prev], -1)

    def decide(self, j: int, hbar: torch.Tensor, path: PathState, variant: str) -> Decision:
        """Gate of routed block j (1-based) for N tokens with post-attention states hbar (N, d)."""
        if isinstance(path, packed_router.PackedPath):
            return packed_router.decide_packed(self, j, hbar, path)
        c = self.config
        spec = VARIANTS[variant]
        if not spec.history:
            return self.decide_local(j, hbar, path)
        features = self.path_features(j, hbar, path)
        if not spec.positional:
            features = features.clone()
            features[:, POSITIONAL_FEATURES] = 0.0
        # Both norms of the router read hbar: at inference share its RMS normalisation (the same numbers
        # as two RMSNorms, bit for bit). With a graph the two norms stay apart, so gradients are unchanged.
        same_norm = not torch.is_grad_enabled() and self.state_encoder.norm.eps == self.local_head.norm.eps
        if same_norm:  # one matmul for W_hd and the local head's first layer, norm weights folded in
            first = self.folded_first_layers()
            hidden = F.linear(unit_rms(hbar, self.state_encoder.norm), first.weight, first.bias)
            z_h = self.state_encoder.up(F.silu(hidden[:, : first.split]))
        else:
            z_h = self.state_encoder(hbar)
        # without the path encoder z_a = 0, and it is not computed (nor charged: parameter_counts)
        z_a = self.path_encoder(features) if spec.path_encoder else hbar.new_zeros(hbar.shape[0], c.d_aux)
        state = torch.cat([z_h, z_a], dim=-1)  # s_j: (N, d_s)
        n = hbar.shape[0]

        if path.memory is not None:  # read before write
            context, weights = path.memory.read(self.to_q(state), self.memory_scale())
            if path.rho is None:
                path.rho = self.forgetting()
            path.memory.write(self.to_k(state), self.to_v(state), path.rho[j - 1])
            if j == 1:
                nu = hbar.new_zeros(n)
            else:
                nu = 1 - F.cosine_similarity(self.novelty_state(state), self.novelty_context(context),
                                             dim=-1, eps=c.eps)
        else:
            context = hbar.new_zeros(n, c.d_memory)
            weights = hbar.new_zeros(n, j - 1)
            nu = hbar.new_zeros(n)

        if not spec.history:
            history_logit = hbar.new_zeros(n)
        else:
            history_logit = self.history_head(torch.cat([state, context, nu[:, None]], -1)).squeeze(-1)
        if same_norm:
            head = self.local_head.mlp
            local_logit = head[2](head[1](hidden[:, first.split:])).squeeze(-1)
        else:
            local_logit = self.local_head(hbar)
        gate = torch.sigmoid(history_logit + local_logit)
        p_hist = torch.sigmoid(history_logit / c.t_hist)
        m_hist = (path.m_hist if path.m_hist is not None else torch.ones_like(p_hist)) * p_hist
        path.p_hist, path.m_hist = p_hist, m_hist
        return Decision(gate, history_logit, local_logit, p_hist, m_hist, nu, weights, state, context)

    def decide_local(self, j: int, hbar: torch.Tensor, path: PathState) -> Decision:
        """The local router (variant ``no_history``): g = sigmoid(b), b = f_psi(hbar), and nothing else computed --
        no state s_j, no path features, no memory (a = 0, nu = 0, p_hist = sigmoid(0)). What it computes is what
        :meth:`parameter_counts` charges it. At inference the head's first layer is the folded matmul's local rows,
        so its gates are the numbers the full router's local head gives."""
        n = hbar.shape[0]
        head = self.local_head.mlp
        if not torch.is_grad_enabled() and self.state_encoder.norm.eps == self.local_head.norm.eps:
            first = self.folded_first_layers()
            hidden = F.linear(unit_rms(hbar, self.state_encoder.norm), first.weight[first.split:],
                              first.bias[first.split:])
            local_logit = head[2](head[1](hidden)).squeeze(-1)
        else:
            local_logit = self.local_head(hbar)
        history_logit = hbar.new_zeros(n)
        p_hist = torch.sigmoid(history_logit / self.config.t_hist)
        m_hist = (path.m_hist if path.m_hist is not None else torch.ones_like(p_hist)) * p_hist
        path.p_hist, path.m_hist = p_hist, m_hist
        zeros = hbar.new_zeros
        return Decision(torch.sigmoid(local_logit), history_logit, local_logit, p_hist, m_hist, zeros(n),
                        zeros(n, j - 1), zeros(n, self.config.d_state), zeros(n, self.config.d_memory))

    def folded_first_layers(self) -> FoldedLayers:
        """W_hd and the local head's first layer with the norms' weights folded in (:class:`FoldedLayers`)."""
        se, lh = self.state_encoder, self.local_head

        def build(version: tuple) -> FoldedLayers:
            weight = torch.cat([se.down.weight * se.norm.weight, lh.mlp[0].weight * lh.norm.weight])
            bias = torch.cat([se.down.weight.new_zeros(se.down.out_features), lh.mlp[0].bias])
            return FoldedLayers(version, weight.contiguous(), bias, se.down.out_features)

        return self.inference_weights("folded", (se.norm.weight, se.down.weight, lh.norm.weight, lh.mlp[0].weight,
                                                 lh.mlp[0].bias), build)

    def inference_weights(self, key: str, sources: Iterable[torch.Tensor], build: Callable[[tuple], object]):
        """Weights derived from parameters for inference (folded, packed), built by ``build(version)`` without
        autograd and kept under ``key`` until one of ``sources`` changes in place (optimiser step, load) or
        moves. They are the same for every call, so caching them on the module is not per-call state."""
        # torch bumps a tensor's _version on every in-place write: the cheapest exact "has it changed" test
        version = (key,) + tuple((p._version, p.data_ptr(), p.dtype, p.device) for p in sources)
        cache = self.__dict__.setdefault("_inference_weights", {})
        derived = cache.get(key)
        if derived is None or derived.version != version:
            with torch.no_grad():
                derived = build(version)
            cache[key] = derived
        return derived

    def parameter_counts(self, variant: str | None = None) -> dict[str, int]:
        """Parameters ``variant`` (default: the one trained) uses per token per routed block, for the net-skip
        accounting: each variant is charged only the parts it computes. The local router computes its head alone;
        the state s_j (state encoder, and path encoder unless the variant drops it) feeds the memory and the
        history head; the memory's projections only where it reads."""
        spec = VARIANTS[variant or self.config.variant]
        used: list[nn.Module] = [self.local_head]
        if spec.history:
            used += [self.state_encoder, self.history_head] + ([self.path_encoder] if spec.path_encoder else [])
        if spec.memory_read:
            used += [self.to_q, self.to_k, self.to_v, self.novelty_state, self.novelty_context]
        count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
        return {"router_per_block": sum(count(m) for m in used), "adapter_per_block": count(self.adapters[0]),
                "total": count(self), "reads_memory": int(spec.memory_read)}
