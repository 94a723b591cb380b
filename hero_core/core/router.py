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
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import VARIANTS, HeroConfig
from .memory import DepthMemory, check_memory_read

N_PATH_FEATURES = 6
# Which path features each variant keeps: no_pos drops r, q_rem, d, gamma and keeps p_hist, m_hist.
_POSITIONAL_FEATURES = slice(0, 4)


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


@dataclass
class PathState:
    """What one forward pass carries from one routed block to the next, per token (never stored on a
    module). Created by :meth:`HeroRouter.new_path`."""

    memory: DepthMemory | None
    hbar_prev: torch.Tensor | None = None  # hbar_{j-1}: (N, d)
    delta_prev: torch.Tensor | None = None  # delta_{j-1}: (N, d)
    dist_prev: torch.Tensor | None = None  # ||delta_{j-1}||: (N,)
    p_hist: torch.Tensor | None = None  # p_hist_{j-1}: (N,)
    m_hist: torch.Tensor | None = None  # m_hist_{j-1}: (N,)
    rho: torch.Tensor | None = None  # rho_j of every block, computed once per pass: (R,)


@dataclass
class Decision:
    """The router's output at one routed block, per token (all (N,) unless noted)."""

    gate: torch.Tensor  # g
    history_logit: torch.Tensor  # a
    local_logit: torch.Tensor  # b
    p_hist: torch.Tensor
    m_hist: torch.Tensor
    nu: torch.Tensor  # novelty nu
    memory_attention: torch.Tensor  # alpha_{j, i<j}: (N, j-1)
    router_state: torch.Tensor  # s_j: (N, d_s)
    memory_context: torch.Tensor  # c_j: (N, d_m)


@dataclass(frozen=True)
class FoldedLayers:
    """W_hd and the local head's first layer as one inference matmul on rms_norm(hbar) (no weight): both
    read hbar through an RMSNorm, whose weights are folded into theirs. The same function as the two
    modules, with products reordered (equal to float rounding)."""

    version: tuple
    weight: torch.Tensor  # (d_encoder + head_hidden, d)
    bias: torch.Tensor
    split: int  # rows of W_hd


@dataclass(frozen=True)
class PackedLayers:
    """The router of one variant rewritten for inference as a few packed matrix products (built from the
    modules, rebuilt when a parameter changes). Every map that is linear in a shared input is one matmul:

    * ``first``: [W_hd ; local head layer 1] on rms_norm(hbar), norm weights folded in (as FoldedLayers);
    * ``path``: FFN_path's first layer on [log1p d, gamma, p_hist, m_hist]; the constant features r, q_rem
      of block j are folded into its bias row ``path_bias[j - 1]``;
    * ``state``: on act = SiLU([first ; path]) at once: s = [W_hu . ; W_p2 .] and the local logit b;
    * ``proj``: every map of s at once (q, k, v, W_n s, the history head's s-columns) and a constant 1, so
      [v, 1] carries the read's denominator. Not composed with ``state``: at one token a product costs
      the bytes of its weight, and the composition would be 4x larger;
    * ``context``: [W_c ; the history head's c-columns] on c_j;
    * ``final``: the history head's output as [a, a / T_hist, a] (b is added to the last column).

    Ablations are zeroed weights: no_aux (z_a = 0), no_pos (r, q_rem, d, gamma = 0), no_history (a = 0).
    ``decay[j - 1, i - 1] = prod_{m=i+1..j-1} rho_m`` for i < j (0 otherwise): the depth memory's decay of
    entry i at block j, a constant of the router, so a read is two bmm over fixed-size buffers."""

    version: tuple
    first_weight_t: torch.Tensor  # (d, d_enc + head)
    first_bias: torch.Tensor
    rms_eps: float  # the router norms' eps (None there: the dtype's machine epsilon, as F.rms_norm takes it)
    path_weight_t: torch.Tensor  # (4, d_path), transposed for addmm
    path_bias: tuple[torch.Tensor, ...]  # R rows of (d_path,)
    state_weight_t: torch.Tensor  # (d_enc + head + d_path, d_s + 1): act -> [s, b]
    state_bias: torch.Tensor
    proj_weight_t: torch.Tensor  # (d_s, width): s -> [q, k, v, 1, W_n s, history head's s-columns]
    proj_bias: torch.Tensor  # (width,)
    context_weight_t: torch.Tensor  # (d_m, d_m + head)
    novelty_weight: torch.Tensor  # (head,): the history head's weight on nu
    final_weight_t: torch.Tensor  # (head, 3)
    final_bias: torch.Tensor  # (3,)
    decay: torch.Tensor  # (R + 1, R)
    decay_rows: tuple[torch.Tensor, ...]  # decay[j - 1] viewed as (1, R), j = 1..R (elu1 kernel)
    log_decay_rows: tuple[torch.Tensor, ...] | None  # log decay[j - 1], -inf where unwritten (softmax kernel)
    scale: float | None  # beta of the softmax kernel
    proj_split: tuple[int, ...]  # proj's output as [phi inputs q, k | v, 1 | W_n s | history head's s-part]


class PackedMemory:
    """Depth memory of the packed path: the stored keys (phi(k_i) for elu1, k_i for softmax) and [v_i, 1] of all R
    blocks in zero-filled buffers of fixed size, read with the constant decay matrix (unwritten slots have decay
    0). The same read as :class:`~hero_core.core.memory.DepthMemory`; for elu1 the denominator comes from the ones
    column; it also gives ``state_norm`` for record_states."""

    def __init__(self, n_tokens: int, capacity: int, d_memory: int, decay: torch.Tensor, *, device, dtype) -> None:
        self.size = 0
        self.d_memory = d_memory
        self.decay = decay
        self.keys = torch.zeros(n_tokens, capacity, d_memory, device=device, dtype=dtype)  # stored keys
        self.keys_t = self.keys.transpose(1, 2)  # (N, d_m, R)
        self.values = torch.zeros(n_tokens, capacity, d_memory + 1, device=device, dtype=dtype)  # [v_i, 1]

    def state_norm(self) -> torch.Tensor:
        """||S||_F after the latest write, per token (as DepthMemory.state_norm)."""
        decayed = self.keys * self.decay[self.size][None, :, None]
        S = torch.einsum("nik,niv->nkv", decayed, self.values[..., : self.d_memory])
        return S.flatten(1).norm(dim=1)


@dataclass
class PackedPath(PathState):
    """PathState of the packed path (its ``memory`` is a :class:`PackedMemory`)."""

    weights: PackedLayers | None = None


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
        """Fresh per-pass state. ``packed`` (decode steps: one new token per sequence) asks for the packed
        inference path (:meth:`_decide_packed`); it is taken only with autograd off and the router's dtype.
        ``memory_read="uniform"`` replaces every read by the plain mean of the stored values (module path)."""
        uniform = check_memory_read(memory_read) == "uniform"
        if packed and not uniform and not torch.is_grad_enabled() and dtype == self.eta.dtype:
            weights = self._packed_layers(variant)
            memory = (PackedMemory(n_tokens, self.config.n_routed, self.config.d_memory, weights.decay, device=device,
                                   dtype=dtype) if VARIANTS[variant].memory_read else None)
            return PackedPath(memory=memory, weights=weights)
        needs_memory = VARIANTS[variant].memory_read
        memory = DepthMemory(n_tokens, self.config.d_memory, self.config.eps, device=device, dtype=dtype,
                             capacity=self.config.n_routed, kernel=self.config.memory_kernel,
                             uniform=uniform) if needs_memory else None
        return PathState(memory=memory)

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
        if isinstance(path, PackedPath):
            return self._decide_packed(j, hbar, path)
        c = self.config
        spec = VARIANTS[variant]
        features = self.path_features(j, hbar, path)
        if not spec.positional:
            features = features.clone()
            features[:, _POSITIONAL_FEATURES] = 0.0
        # Both norms of the router read hbar: at inference share its RMS normalisation (the same numbers
        # as two RMSNorms, bit for bit). With a graph the two norms stay apart, so gradients are unchanged.
        same_norm = not torch.is_grad_enabled() and self.state_encoder.norm.eps == self.local_head.norm.eps
        if same_norm:  # one matmul for W_hd and the local head's first layer, norm weights folded in
            first = self._folded_first_layers()
            hidden = F.linear(unit_rms(hbar, self.state_encoder.norm), first.weight, first.bias)
            z_h = self.state_encoder.up(F.silu(hidden[:, : first.split]))
        else:
            z_h = self.state_encoder(hbar)
        z_a = self.path_encoder(features)
        if not spec.path_encoder:
            z_a = torch.zeros_like(z_a)
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

    def _folded_first_layers(self) -> FoldedLayers:
        """Inference weights, rebuilt whenever a source parameter changed in place (optimiser step, load)."""
        se, lh = self.state_encoder, self.local_head
        sources = (se.norm.weight, se.down.weight, lh.norm.weight, lh.mlp[0].weight, lh.mlp[0].bias)
        version = tuple((p._version, p.data_ptr(), p.dtype, p.device) for p in sources)
        folded = self.__dict__.get("_folded")
        if folded is None or folded.version != version:
            with torch.no_grad():
                weight = torch.cat([se.down.weight * se.norm.weight, lh.mlp[0].weight * lh.norm.weight])
                bias = torch.cat([se.down.weight.new_zeros(se.down.out_features), lh.mlp[0].bias])
            folded = FoldedLayers(version, weight.contiguous(), bias, se.down.out_features)
            self.__dict__["_folded"] = folded  # derived weights, the same for every call: not per-call state
        return folded

    # -- packed inference path (decode steps) ---------------------------------------------------
    def _packed_layers(self, variant: str) -> PackedLayers:
        """Packed weights of ``variant``, cached per variant and rebuilt whenever a parameter changed."""
        params = tuple(self.parameters())
        version = (variant,) + tuple((p._version, p.data_ptr(), p.dtype, p.device) for p in params)
        cache = self.__dict__.setdefault("_packed", {})  # derived weights, not per-call state
        packed = cache.get(variant)
        if packed is None or packed.version != version:
            with torch.no_grad():
                packed = self._build_packed(variant, version)
            cache[variant] = packed
        return packed

    def _build_packed(self, variant: str, version: tuple) -> PackedLayers:
        c, spec = self.config, VARIANTS[variant]
        R, E, H, dm, ds = c.n_routed, c.d_encoder, c.head_hidden, c.d_memory, c.d_state
        se, lh, pe, hh = self.state_encoder, self.local_head, self.path_encoder, self.history_head
        folded = self._folded_first_layers()
        P = pe[0].out_features
        # path encoder, layer 1: features [r, q_rem, d, gamma, p, m]; r and q_rem are constants of block j
        w_path = pe[0].weight.clone()
        if not spec.positional:
            w_path[:, _POSITIONAL_FEATURES] = 0.0
        path_bias = tuple((pe[0].bias + w_path[:, 0] * (j / R) + w_path[:, 1] * ((R - j) / R)).contiguous()
                          for j in range(1, R + 1))
        # s = W_state act + b_state with act = [enc (E), local (H), path (P)]
        zeros = lambda rows, cols: se.up.weight.new_zeros(rows, cols)  # noqa: E731
        w_aux = pe[2].weight if spec.path_encoder else torch.zeros_like(pe[2].weight)
        b_aux = pe[2].bias if spec.path_encoder else torch.zeros_like(pe[2].bias)
        w_state = torch.cat([torch.cat([se.up.weight, zeros(c.d_hidden_state, H + P)], 1),
                             torch.cat([zeros(c.d_aux, E + H), w_aux], 1)])  # (ds, E + H + P)
        b_state = torch.cat([se.up.weight.new_zeros(c.d_hidden_state), b_aux])
        h_w = hh[0].weight if spec.history else torch.zeros_like(hh[0].weight)  # [s | c | nu] columns
        h_b = hh[0].bias if spec.history else torch.zeros_like(hh[0].bias)
        # act -> [s, b]: block-sparse but small; s -> every map of s (kept apart: composing them with
        # W_state would read a 4x larger weight per token, and at one token a product costs its weight's bytes)
        w_local = torch.cat([zeros(1, E), lh.mlp[2].weight, zeros(1, P)], 1)
        state_w, state_b = torch.cat([w_state, w_local]), torch.cat([b_state, lh.mlp[2].bias])
        rows_w = [self.to_q.weight, self.to_k.weight, self.to_v.weight, zeros(1, ds), self.novelty_state.weight,
                  h_w[:, :ds]]
        rows_b = [se.up.weight.new_zeros(3 * dm), se.up.weight.new_ones(1), se.up.weight.new_zeros(dm), h_b]
        w_final = hh[2].weight if spec.history else torch.zeros_like(hh[2].weight)  # (1, H)
        b_final = hh[2].bias if spec.history else torch.zeros_like(hh[2].bias)
        rho = self.forgetting()
        decay = rho.new_zeros(R + 1, R)
        for j in range(2, R + 2):  # decay[j-1, i-1] = prod(rho_{i+1..j-1}) for i = 1..j-1
            seg = torch.cat([rho[1 : j - 1], rho.new_ones(1)])  # rho_2..rho_{j-1}, then 1
            decay[j - 1, : j - 1] = seg.flip(0).cumprod(0).flip(0)
        return PackedLayers(
            version=version, first_weight_t=folded.weight.t().contiguous(), first_bias=folded.bias,
            rms_eps=se.norm.eps if se.norm.eps is not None else torch.finfo(folded.weight.dtype).eps,
            path_weight_t=w_path[:, 2:].t().contiguous(), path_bias=path_bias,
            state_weight_t=state_w.t().contiguous(), state_bias=state_b.contiguous(),
            proj_weight_t=torch.cat(rows_w).t().contiguous(), proj_bias=torch.cat(rows_b).contiguous(),
            context_weight_t=torch.cat([self.novelty_context.weight, h_w[:, ds : ds + dm]]).t().contiguous(),
            novelty_weight=h_w[:, ds + dm].contiguous(),
            final_weight_t=torch.cat([w_final, w_final / c.t_hist, w_final]).t().contiguous(),
            final_bias=torch.cat([b_final, b_final / c.t_hist, b_final]).contiguous(),
            decay=decay, decay_rows=tuple(decay[j - 1][None] for j in range(1, R + 1)),
            log_decay_rows=(tuple(decay[j - 1][None].log() for j in range(1, R + 1)) if c.memory_kernel == "softmax"
                            else None),
            scale=float(self.memory_scale()) if c.memory_kernel == "softmax" else None,
            proj_split=(2 * dm, dm + 1, dm, H))

    def _decide_packed(self, j: int, hbar: torch.Tensor, path: PackedPath) -> Decision:
        """:meth:`decide` at inference in about 35 tensor operations instead of about 100: the same function,
        equal to float rounding (tests/test_fast_router.py), for one token per step, where each operation's
        fixed cost, not its arithmetic, is the price. Views are taken with narrow/select/split (one call each)."""
        w, c = path.weights, self.config
        eps, n, dm = c.eps, hbar.shape[0], c.d_memory
        # path features [log1p d, gamma, p_{j-1}, m_{j-1}] (r, q_rem live in the bias row)
        if j == 1:
            dist = hbar.new_zeros(n)
            features = hbar.new_tensor([0.0, 0.0, 1.0, 1.0]).expand(n, 4)
            delta = torch.zeros_like(hbar)
        else:
            delta = hbar - path.hbar_prev
            dist = torch.linalg.vector_norm(delta, dim=-1)
            if j >= 3:
                gamma = torch.linalg.vecdot(delta, path.delta_prev) / (
                    dist.clamp_min(eps) * path.dist_prev.clamp_min(eps))
            else:
                gamma = hbar.new_zeros(n)
            features = torch.stack([torch.log1p(dist), gamma, path.p_hist, path.m_hist], -1)
        path.hbar_prev, path.delta_prev, path.dist_prev = hbar, delta, dist
        # rms_norm(hbar) without weight (its weights are folded into first_weight_t)
        inv_rms = hbar.square().mean(-1, keepdim=True).add_(w.rms_eps).rsqrt_()
        first = torch.addmm(w.first_bias, hbar * inv_rms, w.first_weight_t)
        act = F.silu(torch.cat([first, torch.addmm(w.path_bias[j - 1], features, w.path_weight_t)], 1))
        state_local = torch.addmm(w.state_bias, act, w.state_weight_t)  # [s, b]
        state, local_logit = state_local.narrow(1, 0, c.d_state), state_local.select(1, c.d_state)
        proj = torch.addmm(w.proj_bias, state, w.proj_weight_t)
        qk, v_one, ns, history_in = proj.split(w.proj_split, 1)
        memory = path.memory
        softmax = w.scale is not None
        if memory is not None:
            stored_qk = qk if softmax else F.elu(qk).add_(1.0)  # [q, k] or [phi(q), phi(k)]
            memory.keys.select(1, j - 1).copy_(stored_qk.narrow(1, dm, dm))  # write; the read gives slot j-1 weight 0
            memory.values.select(1, j - 1).copy_(v_one)
            memory.size = j
        if memory is not None and j > 1:
            scores = torch.bmm(stored_qk.narrow(1, 0, dm).unsqueeze(1), memory.keys_t)  # (N, 1, R)
            if softmax:  # unwritten slots have log decay -inf: weight exactly 0
                scores = torch.softmax(scores.mul_(w.scale).add_(w.log_decay_rows[j - 1]), -1)
                context = torch.bmm(scores, memory.values).squeeze(1).narrow(1, 0, dm)
                weights = scores.squeeze(1).narrow(1, 0, j - 1)
            else:
                scores.mul_(w.decay_rows[j - 1])
                read = torch.bmm(scores, memory.values).squeeze(1)  # [sum w v, sum w]: (N, dm + 1)
                denominator = read.narrow(1, dm, 1).add(eps)
                context = read.narrow(1, 0, dm) / denominator
                weights = scores.squeeze(1).narrow(1, 0, j - 1) / denominator
            wc, history_c = (context @ w.context_weight_t).split((dm, c.head_hidden), 1)
            # nu = 1 - cos(W_n s, W_c c)
            nu = torch.linalg.vecdot(ns, wc).div_(torch.linalg.vector_norm(ns, dim=-1).clamp_min_(eps)
                                                   * torch.linalg.vector_norm(wc, dim=-1).clamp_min_(eps))
            nu = nu.neg_().add_(1.0)
            history_in = torch.addcmul(history_in + history_c, nu.unsqueeze(1), w.novelty_weight)
        else:
            context = hbar.new_zeros(n, dm)
            weights = hbar.new_zeros(n, j - 1)
            nu = hbar.new_zeros(n)
        final = torch.addmm(w.final_bias, F.silu(history_in), w.final_weight_t)  # [a, a / T, a]
        final.select(1, 2).add_(local_logit)
        squashed = torch.sigmoid(final.narrow(1, 1, 2))  # [p_hist, g]
        p_hist = squashed.select(1, 0)
        m_hist = p_hist if j == 1 else path.m_hist * p_hist
        path.p_hist, path.m_hist = p_hist, m_hist
        return Decision(squashed.select(1, 1), final.select(1, 0), local_logit, p_hist, m_hist, nu, weights,
                        state, context)

    def parameter_counts(self) -> dict[str, int]:
        """Parameters used per token per routed block, for the net-skip accounting."""
        count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
        shared = sum(count(m) for m in (self.state_encoder, self.path_encoder, self.to_q, self.to_k, self.to_v,
                                         self.novelty_state, self.novelty_context, self.history_head,
                                         self.local_head))
        adapter = count(self.adapters[0])
        return {"router_per_block": shared, "adapter_per_block": adapter,
                "total": count(self)}

