"""What a forward pass carries from one routed block to the next (:class:`PathState`) and what the router
decides at each block (:class:`Decision`): shared by the module path (hero_core.method.router) and the packed
decode path (hero_core.method.packed_router). Per call, never stored on a module."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from hero_core.method.memory import DepthMemory

# Which path features each variant keeps: no_pos drops r, q_rem, d, gamma and keeps p_hist, m_hist.
POSITIONAL_FEATURES = slice(0, 4)


@dataclass
class PathState:
    """What one forward pass carries from one routed block to the next, per token (never stored on a
    module). Created by :meth:`~hero_core.method.router.HeroRouter.new_path`."""

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
