"""Per-call routing state, passed to the wrapped blocks through a ``ContextVar``.

Streamlit serves every session from its own thread on one shared model, so nothing about a call may
live on a module or a global: :func:`routing_call` sets a fresh :class:`RoutingCall` for the duration
of one API call and resets it in ``finally`` (the pattern transformers uses for its output capture).
Threads start with an empty context, so concurrent calls never see each other's state.

A call spans one or more *forward passes* (one for a trace, one per decode step for generation).
A pass starts at the first routed block and holds the depth memory of its tokens; records of every
routed block are appended to the pass and turned into a :class:`~hero_core.method.trace.RoutingTrace` later.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch

from hero_core.method.path_state import Decision, PathState
from hero_core.method.router import HeroRouter

_CURRENT_CALL: contextvars.ContextVar[RoutingCall | None] = contextvars.ContextVar("hero_routing_call",
                                                                                      default=None)

# Per-block fields copied into a trace, in the order of the trace schema.
RECORDED_FIELDS = ("gate", "history_logit", "local_logit", "p_hist", "m_hist", "nu")


@dataclass
class BlockRecord:
    """What one routed block decided for the tokens of one pass (detached; (N,) unless noted). Every value
    carries its name in the trace (:class:`~hero_core.method.trace.RoutingTrace`)."""

    executed: torch.Tensor  # bool
    fields: dict[str, torch.Tensor]  # RECORDED_FIELDS
    memory_attention: torch.Tensor  # alpha_{j, i<j} (N, j-1)
    router_state: torch.Tensor | None = None  # s_j (N, d_s), only with record_states
    memory_context: torch.Tensor | None = None  # c_j (N, d_m), only with record_states
    memory_state_norm: torch.Tensor | None = None  # ||S_j||_F (N,), only with record_states


@dataclass
class ForwardPass:
    """One forward pass of the backbone: its token mask, depth memory and block records."""

    active: torch.Tensor | None  # (B, T) bool: real (non-padding) tokens; None = all real
    shape: tuple[int, int]  # (B, T)
    path: PathState | None = None
    pending_hbar: torch.Tensor | None = None  # hbar_j handed from the norm tap to the FFN wrapper
    # The current block's FFN input u_j and post-attention state hbar_j (N, d), set only while a policy
    # decides: a reference policy such as the oracle compares FFN(u) with Adapter(u) itself.
    ffn_input: torch.Tensor | None = None
    ffn_hbar: torch.Tensor | None = None
    records: list[BlockRecord] = field(default_factory=list)
    gates: list[torch.Tensor] = field(default_factory=list)  # g with grad, for the usage loss

    def executed(self) -> torch.Tensor:
        """Which FFNs ran in this pass: (R, B*T) bool, one row per routed block (needs records)."""
        return torch.stack([r.executed for r in self.records])

    def arrays(self, batch_index: int, n_routed: int, variant: str, record_states: bool) -> dict[str, np.ndarray]:
        """This pass's records for one batch row, restricted to its real tokens: (R, T_b) arrays named as in
        the trace (``memory_attention`` (T_b, R, R); its state fields (R, T_b, ...) with ``record_states``)."""
        R = n_routed
        B, T = self.shape
        keep = self.active[batch_index].cpu().numpy() if self.active is not None else np.ones(T, dtype=bool)
        n = int(keep.sum())
        rows = slice(batch_index * T, (batch_index + 1) * T)
        if variant == "dense" or not self.records:
            ones, zeros = np.ones((R, n)), np.zeros((R, n))
            return {"gate": ones, "executed": np.ones((R, n), dtype=bool), "history_logit": zeros,
                    "local_logit": zeros, "p_hist": ones, "m_hist": ones, "nu": zeros,
                    "memory_attention": np.zeros((n, R, R))}

        def stacked(values: list[torch.Tensor]) -> np.ndarray:
            return torch.stack([v[rows] for v in values]).cpu().double().numpy()[:, keep]

        out = {name: stacked([r.fields[name] for r in self.records]) for name in RECORDED_FIELDS}
        out["executed"] = self.executed()[:, rows].cpu().numpy()[:, keep]
        attention = np.zeros((n, R, R))
        for j, record in enumerate(self.records):
            if j:
                attention[:, j, :j] = record.memory_attention[rows].cpu().double().numpy()[keep]
        out["memory_attention"] = attention
        if record_states:
            out["router_state"] = stacked([r.router_state for r in self.records])
            out["memory_context"] = stacked([r.memory_context for r in self.records])
            out["memory_state_norm"] = stacked([r.memory_state_norm if r.memory_state_norm is not None
                                                else torch.zeros(B * T) for r in self.records])
        return out


@dataclass
class RoutingCall:
    router: HeroRouter
    variant: str
    tau: float
    record: bool = True  # keep per-block records for a trace
    record_states: bool = False  # also keep s_j, c_j and ||S||
    keep_gates: bool = False  # keep gates with their graph (training)
    # Training only: give g the gradient of the soft mixture, d out / d g = FFN(u) - Adapter(u), for every token,
    # while the forward value stays the hard branch (see RoutedFFN._straight_through).
    straight_through: bool = False
    # Baselines override the router's hard decision: policy(block, gate (N,), pass) -> (executed (N,), gate (N,)).
    # The returned gate scales the branches as usual (g * FFN, (1 - g) * Adapter).
    policy: Callable[[int, torch.Tensor, ForwardPass], tuple[torch.Tensor, torch.Tensor]] | None = None
    # "uniform" replaces every memory read by the plain mean of the stored values
    # (hero_core.method.memory.MEMORY_READS).
    memory_read: str = "learned"
    passes: list[ForwardPass] = field(default_factory=list)

    @property
    def current(self) -> ForwardPass:
        if not self.passes:
            raise RuntimeError("routed block reached before the backbone's forward pre-hook ran")
        return self.passes[-1]

    def begin_pass(self, input_shape: tuple[int, int], attention_mask: torch.Tensor | None) -> None:
        active = None
        if attention_mask is not None:
            mask = attention_mask[:, -input_shape[1]:].bool()  # with a KV cache the mask covers the past too
            if not bool(mask.all()):
                active = mask
        self.passes.append(ForwardPass(active=active, shape=input_shape))

    def add_record(self, j: int, decision: Decision, executed: torch.Tensor, path: PathState) -> None:
        p = self.current
        if self.keep_gates:
            p.gates.append(decision.gate)
        if not self.record:
            return
        record = BlockRecord(executed=executed,
                             fields={name: getattr(decision, name).detach() for name in RECORDED_FIELDS},
                             memory_attention=decision.memory_attention.detach())
        if self.record_states:
            record.router_state = decision.router_state.detach()
            record.memory_context = decision.memory_context.detach()
            record.memory_state_norm = path.memory.state_norm().detach() if path.memory is not None else None
        p.records.append(record)


def current_call() -> RoutingCall | None:
    return _CURRENT_CALL.get()


@contextlib.contextmanager
def routing_call(call: RoutingCall) -> Iterator[RoutingCall]:
    token = _CURRENT_CALL.set(call)
    try:
        yield call
    finally:
        _CURRENT_CALL.reset(token)
