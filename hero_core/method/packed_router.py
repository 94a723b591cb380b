"""The router's packed decode path: one new token per sequence, autograd off.

At one token per step a routed block's ~100 small tensor operations on the module path cost their fixed
per-call latency, not their arithmetic. Here the router of one variant is rewritten as a few packed matrix
products (:class:`PackedLayers`, rebuilt when a parameter changes) over a depth memory in fixed-size buffers
(:class:`PackedMemory`, the same read as :class:`~hero_core.method.memory.DepthMemory`), and a decision takes
~35 operations (:func:`decide_packed`), or one call of the compiled step (hero_core.method.fused_router).
Every form gives the module path's decisions to float rounding (tests/test_fast_router.py).

:func:`new_packed_path` is where the decode path is chosen (``HERO_DECODE_PATH``, logged once per process).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from hero_core.method.config import VARIANTS
from hero_core.method.fused_router import decode_path, fused_extension
from hero_core.method.path_state import POSITIONAL_FEATURES, Decision, PathState


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
    block_weights: tuple[list[torch.Tensor], ...]  # per block j, the weights of the fused step in its order

    def fused_weights(self, j: int) -> list[torch.Tensor]:
        """Block j's weights as fused_step.cpp takes them (its ``Weight`` enum)."""
        return self.block_weights[j - 1]


class PackedMemory:
    """Depth memory of the packed path: the stored keys (phi(k_i) for elu1, k_i for softmax) and [v_i, 1] of all R
    blocks in zero-filled buffers of fixed size, read with the constant decay matrix (unwritten slots have decay
    0). The same read as :class:`~hero_core.method.memory.DepthMemory`; for elu1 the denominator comes from the ones
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
    """PathState of the packed decode path (its ``memory`` is a :class:`PackedMemory`)."""

    weights: PackedLayers | None = None
    fused: object | None = None  # the compiled step (hero_core.method.fused_router), or None: the Python packed path


def new_packed_path(router, n_tokens: int, variant: str, *, device, dtype) -> PackedPath | None:
    """Per-call state of the decode path this process chose (:func:`~hero_core.method.fused_router.decode_path`):
    a PackedPath (the compiled step where it is built and the tokens are on the CPU, else the packed Python
    step), or None where ``HERO_DECODE_PATH=module`` asks for the module path."""
    chosen = decode_path()
    if chosen == "module":
        return None
    weights = packed_layers(router, variant)
    c = router.config
    memory = (PackedMemory(n_tokens, c.n_routed, c.d_memory, weights.decay, device=device, dtype=dtype)
              if VARIANTS[variant].memory_read else None)
    fused = fused_extension() if chosen == "fused" and torch.device(device).type == "cpu" else None
    return PackedPath(memory=memory, weights=weights, fused=fused)


def packed_layers(router, variant: str) -> PackedLayers:
    """Packed weights of ``variant``, cached on the router and rebuilt whenever a parameter changed."""
    return router.inference_weights(f"packed:{variant}", tuple(router.parameters()),
                                    lambda version: _build(router, variant, version))


def _build(router, variant: str, version: tuple) -> PackedLayers:
    c, spec = router.config, VARIANTS[variant]
    R, E, H, dm, ds = c.n_routed, c.d_encoder, c.head_hidden, c.d_memory, c.d_state
    se, lh, pe, hh = router.state_encoder, router.local_head, router.path_encoder, router.history_head
    folded = router.folded_first_layers()
    P = pe[0].out_features
    # path encoder, layer 1: features [r, q_rem, d, gamma, p, m]; r and q_rem are constants of block j
    w_path = pe[0].weight.clone()
    if not spec.positional:
        w_path[:, POSITIONAL_FEATURES] = 0.0
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
    rows_w = [router.to_q.weight, router.to_k.weight, router.to_v.weight, zeros(1, ds), router.novelty_state.weight,
              h_w[:, :ds]]
    rows_b = [se.up.weight.new_zeros(3 * dm), se.up.weight.new_ones(1), se.up.weight.new_zeros(dm), h_b]
    w_final = hh[2].weight if spec.history else torch.zeros_like(hh[2].weight)  # (1, H)
    b_final = hh[2].bias if spec.history else torch.zeros_like(hh[2].bias)
    rho = router.forgetting()
    decay = rho.new_zeros(R + 1, R)
    for j in range(2, R + 2):  # decay[j-1, i-1] = prod(rho_{i+1..j-1}) for i = 1..j-1
        seg = torch.cat([rho[1 : j - 1], rho.new_ones(1)])  # rho_2..rho_{j-1}, then 1
        decay[j - 1, : j - 1] = seg.flip(0).cumprod(0).flip(0)
    layers = PackedLayers(
        version=version, first_weight_t=folded.weight.t().contiguous(), first_bias=folded.bias,
        rms_eps=se.norm.eps if se.norm.eps is not None else torch.finfo(folded.weight.dtype).eps,
        path_weight_t=w_path[:, 2:].t().contiguous(), path_bias=path_bias,
        state_weight_t=state_w.t().contiguous(), state_bias=state_b.contiguous(),
        proj_weight_t=torch.cat(rows_w).t().contiguous(), proj_bias=torch.cat(rows_b).contiguous(),
        context_weight_t=torch.cat([router.novelty_context.weight, h_w[:, ds : ds + dm]]).t().contiguous(),
        novelty_weight=h_w[:, ds + dm].contiguous(),
        final_weight_t=torch.cat([w_final, w_final / c.t_hist, w_final]).t().contiguous(),
        final_bias=torch.cat([b_final, b_final / c.t_hist, b_final]).contiguous(),
        decay=decay, decay_rows=tuple(decay[j - 1][None] for j in range(1, R + 1)),
        log_decay_rows=(tuple(decay[j - 1][None].log() for j in range(1, R + 1)) if c.memory_kernel == "softmax"
                        else None),
        scale=float(router.memory_scale()) if c.memory_kernel == "softmax" else None,
        proj_split=(2 * dm, dm + 1, dm, H), block_weights=())
    rows = layers.log_decay_rows if layers.scale is not None else layers.decay_rows
    return dataclasses.replace(layers, block_weights=tuple(
        [layers.first_weight_t, layers.first_bias, layers.path_weight_t, layers.path_bias[j - 1],
         layers.state_weight_t, layers.state_bias, layers.proj_weight_t, layers.proj_bias,
         layers.context_weight_t, layers.novelty_weight, layers.final_weight_t, layers.final_bias, rows[j - 1]]
        for j in range(1, R + 1)))

def decide_packed(router, j: int, hbar: torch.Tensor, path: PackedPath) -> Decision:
    """``HeroRouter.decide`` at inference in about 35 tensor operations instead of about 100: the same
    function, equal to float rounding (tests/test_fast_router.py), for one token per step, where each
    operation's fixed cost, not its arithmetic, is the price. Views are taken with narrow/select/split."""
    w, c = path.weights, router.config
    if path.fused is not None:
        return _decide_fused(router, j, hbar, path)
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


def _decide_fused(router, j: int, hbar: torch.Tensor, path: PackedPath) -> Decision:
    """:func:`decide_packed` as one call of the compiled step (hero_core/method/fused_step.cpp): the same
    operations in the same order, issued from C++."""
    return _fused_outputs(j, hbar, path, path.fused.decide(hbar, j, *_fused_arguments(router, j, path)))


def run_block_fused(router, j: int, u: torch.Tensor, hbar: torch.Tensor, path: PackedPath, tau: float,
                    scaled: bool, ffn: list[torch.Tensor],
                    adapter: list[torch.Tensor]) -> tuple[Decision, torch.Tensor, torch.Tensor]:
    """A whole routed block of a decode step in one compiled call: the decision, then each token's branch
    (``ffn``: [W_gate, W_up, W_down] of a gated SiLU FFN; ``adapter``: [W_1, W_2]), the same operations as
    ``RoutedFFN._branch``. ``hbar`` is in the backbone's precision (cast to the router's in the call).
    Returns (decision, executed (N,) bool, the block's FFN-branch output (N, d))."""
    *outputs, executed, out, router_hbar = path.fused.routed_block(u, hbar, tau, scaled, ffn, adapter, j,
                                                                   *_fused_arguments(router, j, path))
    return _fused_outputs(j, router_hbar, path, outputs), executed, out


def _fused_arguments(router, j: int, path: PackedPath) -> tuple:
    """The compiled step's arguments after hbar and j: the previous block's path state, the memory buffers,
    block j's weights and the constants."""
    c, memory, w = router.config, path.memory, path.weights
    prev = [] if j == 1 else [path.hbar_prev, path.delta_prev, path.dist_prev, path.p_hist, path.m_hist]
    buffers = [memory.keys, memory.values] if memory is not None else []
    return (prev, buffers, w.fused_weights(j), w.rms_eps, c.eps, w.scale or 0.0, c.d_state, c.d_memory,
            c.head_hidden)


def _fused_outputs(j: int, hbar: torch.Tensor, path: PackedPath, outputs) -> Decision:
    """The compiled step's outputs as a Decision, with the path state the next block reads updated (``hbar``: the
    router-precision hbar the step read)."""
    (gate, history_logit, local_logit, p_hist, m_hist, nu, weights, state, context, delta, dist) = outputs
    if path.memory is not None:
        path.memory.size = j
    path.hbar_prev, path.delta_prev, path.dist_prev, path.p_hist, path.m_hist = hbar, delta, dist, p_hist, m_hist
    return Decision(gate, history_logit, local_logit, p_hist, m_hist, nu, weights, state, context)
