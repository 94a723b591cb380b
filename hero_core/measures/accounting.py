"""Compute accounting: parameter skip (the paper's metric), its net form and the FLOP share saved.

* **param skip** (paper): per token, the parameters of the FFNs it skipped divided by the model's total
  parameter count; averaged over tokens.
* **net param skip**: the same, minus what the token used instead: the adapters of the skipped blocks
  and the router at every routed block (state encoder, path encoder, memory projections, both heads).
* **FLOP share saved**: FLOPs a token did not spend, over the dense model's FLOPs for that token
  (2 per weight of every matrix multiply, including the LM head, plus causal attention's
  4 * n_heads * head_dim * context per layer), net of adapter, router and memory-read FLOPs.

Also here: :class:`ComputeTally` (token-weighted means over many forwards, as evaluation reports them),
the FLOP ideal speed-up the benchmark compares against (:func:`flop_ideal`), the skip-count <-> param-skip
conversion, a run's realised param skip (:func:`mean_param_skip`), and the searches that match a threshold to a
skip target (:func:`bisect_increasing` and :func:`search_increasing`, its interpolating form; the tau search itself is
:func:`hero_core.method.tau_search.matched_tau`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ComputeProfile:
    total_params: int  # every parameter of the backbone, tied embeddings counted once
    ffn_params: int  # one block's FFN (gate, up, down)
    adapter_params: int  # one block's adapter
    router_params: int  # router parameters used once per routed block
    linear_params: int  # weights of every matmul in a dense token's forward (blocks + LM head)
    n_layers: int
    attention_width: int  # n_heads * head_dim
    d_memory: int

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def without_router(profile: ComputeProfile) -> ComputeProfile:
    """``profile`` for a run that computes no router (static pruning, random skipping, an oracle): it pays only the
    adapters of the FFNs it skips."""
    return replace(profile, router_params=0, d_memory=0)


def dense_token_flops(profile: ComputeProfile, positions: np.ndarray) -> np.ndarray:
    """Dense FLOPs of each token at ``positions`` (context length minus one): 2 per weight of every matmul
    plus causal attention's 4 * n_heads * head_dim * context per layer."""
    return 2.0 * profile.linear_params + 4.0 * profile.attention_width * (positions + 1) * profile.n_layers


def ffns_for_param_skip(param_skip: float, profile: ComputeProfile) -> float:
    """Skipped FFNs per token that give ``param_skip`` under the paper's definition (the inverse of
    ``param_skip = skipped * ffn_params / total_params``)."""
    return param_skip * profile.total_params / profile.ffn_params


def _router_flops(profile: ComputeProfile, n_routed: int) -> float:
    """What a routed token pays for routing whatever it skips: the router at every routed block and the memory's
    reads over the earlier blocks' states."""
    return 2.0 * n_routed * profile.router_params + 4.0 * profile.d_memory * np.arange(n_routed).sum()


def ffns_for_net_saving(net_saving: float, profile: ComputeProfile, n_routed: int, positions: np.ndarray,
                        routed: bool = True) -> float:
    """Skipped FFNs per token that save ``net_saving`` of a dense token's FLOPs, averaged over tokens at
    ``positions``, with the adapter of each skipped FFN charged and, for a ``routed`` run, the router at every
    routed block and the memory's reads (the inverse of :func:`token_compute`'s ``flop_share_saved`` for a count
    that is the same for every token). A run without a router (static pruning) pays adapters only."""
    inverse_dense = float(np.mean(1.0 / dense_token_flops(profile, np.asarray(positions))))
    fixed = _router_flops(profile, n_routed) if routed else 0.0
    return (net_saving / inverse_dense + fixed) / (2.0 * (profile.ffn_params - profile.adapter_params))


def net_saving_for_param_skip(param_skip: float, profile: ComputeProfile, n_routed: int, positions: np.ndarray,
                              routed: bool = True) -> float:
    """The share of a dense token's FLOPs a run at ``param_skip`` saves net, averaged over tokens at ``positions``:
    the inverse of :func:`ffns_for_net_saving`, for a skip count that is the same for every token (a run's mean)."""
    inverse_dense = float(np.mean(1.0 / dense_token_flops(profile, np.asarray(positions))))
    fixed = _router_flops(profile, n_routed) if routed else 0.0
    saved = 2.0 * ffns_for_param_skip(param_skip, profile) * (profile.ffn_params - profile.adapter_params) - fixed
    return float(saved * inverse_dense)


def ffn_share_for_param_skip(param_skip: float, profile: ComputeProfile, n_routed: int) -> float:
    """The share of a token's ``n_routed`` FFNs it must skip for ``param_skip``."""
    return param_skip * profile.total_params / (profile.ffn_params * n_routed)


def mean_param_skip(executed, profile: ComputeProfile) -> float:
    """The realised param skip of a run: the paper's param skip averaged over its tokens, from the executed matrix
    (R, N) of booleans (numpy, or a torch tensor left on its device, as a training step's is). The one place the
    skipped FFNs of a run become its param skip; :func:`token_compute` gives the same per token."""
    n_tokens = executed.shape[1]
    if n_tokens == 0:
        raise ValueError("no tokens: a realised skip needs at least one routed token")
    skipped_per_token = (executed.shape[0] * n_tokens - int(executed.sum())) / n_tokens
    return skipped_per_token * profile.ffn_params / profile.total_params


def bisect_increasing(f: Callable[[float], float], target: float, lo: float, hi: float, iters: int, *,
                      tol: float = 0.0, start: float | None = None) -> tuple[float, float]:
    """``(x, f(x))`` of the x in [lo, hi] whose ``f(x)`` came closest to ``target``, bisecting as if f grew
    with x. A skip share grows with tau, but not exactly monotonically (later gates read a residual
    stream that earlier decisions changed), so the best point seen is kept. ``start``: an x tried
    first; ``tol``: stop once a point is this close."""
    best = (start, f(start)) if start is not None else None
    for _ in range(iters):
        mid = (lo + hi) / 2
        value = f(mid)
        if best is None or abs(value - target) < abs(best[1] - target):
            best = (mid, value)
        if abs(value - target) < tol:
            break
        lo, hi = (mid, hi) if value < target else (lo, mid)
    return best


def search_increasing(f: Callable[[float], float], target: float, lo: float, hi: float, iters: int, *,
                      f_lo: float, f_hi: float, tol: float = 0.0) -> tuple[float, float]:
    """Like :func:`bisect_increasing`, in fewer calls of ``f``: each step tries the x where the line through the
    bracket's ends meets ``target`` (regula falsi, Illinois variant: an end kept twice has its value halved
    towards the target), kept at least a tenth of the bracket from either end, so it never does worse than a
    slow bisection. ``f_lo`` / ``f_hi`` are f's values (or bounds) at the ends, which are not evaluated.

    Why: matching a router's tau to a skip target costs one forward pass per call, and a skip share against
    tau is close to a smooth CDF of the gates: interpolation lands on the target's level in 3-6 calls where
    bisection takes 12."""
    best: tuple[float, float] | None = None
    kept = 0  # which end stayed put last step: -1 low, +1 high
    for _ in range(iters):
        span = hi - lo
        if f_hi > f_lo:
            x = lo + span * min(max((target - f_lo) / (f_hi - f_lo), 0.1), 0.9)
        else:
            x = lo + span / 2
        value = f(x)
        if best is None or abs(value - target) < abs(best[1] - target):
            best = (x, value)
        if abs(value - target) <= tol:
            break
        if value < target:
            lo, f_lo = x, value
            f_hi = (f_hi + target) / 2 if kept == 1 else f_hi  # Illinois: the stuck end moves halfway
            kept = 1
        else:
            hi, f_hi = x, value
            f_lo = (f_lo + target) / 2 if kept == -1 else f_lo
            kept = -1
    return best


def token_compute(executed: np.ndarray, profile: ComputeProfile, positions: np.ndarray | None = None,
                  routed: bool = True) -> dict[str, np.ndarray]:
    """Per-token compute figures from the executed matrix (R, T) of booleans.

    ``positions`` are the tokens' context lengths minus one (defaults to 0..T-1); ``routed`` is False for
    the dense variant, where no router or adapter runs.
    """
    R, T = executed.shape
    skipped = (~executed.astype(bool)).sum(axis=0).astype(np.float64)  # (T,)
    if positions is None:
        positions = np.arange(T)
    p = profile
    param_skip = skipped * p.ffn_params / p.total_params
    router_uses = R if routed else 0
    net = (skipped * (p.ffn_params - p.adapter_params) - router_uses * p.router_params) / p.total_params
    dense_flops = dense_token_flops(p, positions)
    saved = 2.0 * skipped * (p.ffn_params - p.adapter_params) - (_router_flops(p, R) if routed else 0.0)
    return {"param_skip": param_skip, "net_param_skip": net, "flop_share_saved": saved / dense_flops}


def flop_ideal(executed: np.ndarray, positions: np.ndarray, profile: ComputeProfile) -> dict[str, float]:
    """The ideal speed-up the skipped FLOPs give, with the skip figures, from an executed matrix (R, N) and
    the tokens' positions (N,): ``sum_t dense_flops_t / sum_t (dense_flops_t - saved_flops_t)``, router and
    adapter work charged."""
    figures = token_compute(executed, profile, positions=positions, routed=True)
    dense = dense_token_flops(profile, positions)
    saved = figures["flop_share_saved"] * dense
    return {"ideal_speedup": float(dense.sum() / (dense.sum() - saved.sum())),
            "flop_share_saved": float(saved.sum() / dense.sum()),
            "param_skip": float(figures["param_skip"].mean()),
            "net_param_skip": float(figures["net_param_skip"].mean()),
            "ffn_executed_share": float(executed.mean())}


def compact(summary: dict[str, Any]) -> dict[str, Any]:
    """A :meth:`ComputeTally.summary` without its per-layer list, for tables."""
    return {k: v for k, v in summary.items() if k != "layer_skip_rates"}


@dataclass
class ComputeTally:
    """Accumulates per-token compute figures over many forwards (token-weighted means)."""

    profile: ComputeProfile | None
    routed: bool
    n_tokens: int = 0
    sums: dict[str, float] = field(default_factory=lambda: {"param_skip": 0.0, "net_param_skip": 0.0,
                                                            "flop_share_saved": 0.0})
    executed_per_layer: np.ndarray | None = None  # (R,) count of tokens that ran each FFN
    ffn_executed: float = 0.0

    def add(self, executed: np.ndarray | None, n_tokens: int, positions: np.ndarray | None = None) -> None:
        """``executed`` (R, n) bool for n tokens, or None (every FFN ran)."""
        if n_tokens == 0:
            return
        self.n_tokens += n_tokens
        if executed is None:
            return
        executed = np.asarray(executed, dtype=bool)
        if self.executed_per_layer is None:
            self.executed_per_layer = np.zeros(executed.shape[0])
        self.executed_per_layer += executed.sum(axis=1)
        self.ffn_executed += float(executed.sum())
        if self.profile is not None:
            figures = token_compute(executed, self.profile, positions=positions, routed=self.routed)
            for key in self.sums:
                self.sums[key] += float(figures[key].sum())

    def add_rows(self, executed: np.ndarray | None, lengths: list[int]) -> None:
        """Add each row's real tokens (right padding) of a batch's executed (B, R, T)."""
        for b, n in enumerate(lengths):
            self.add(None if executed is None else executed[b][:, :n], n, np.arange(n))

    def merge(self, other: ComputeTally) -> None:
        """Add everything ``other`` counted."""
        self.n_tokens += other.n_tokens
        for key in self.sums:
            self.sums[key] += other.sums[key]
        self.ffn_executed += other.ffn_executed
        if other.executed_per_layer is not None:
            self.executed_per_layer = other.executed_per_layer.copy() if self.executed_per_layer is None \
                else self.executed_per_layer + other.executed_per_layer

    def summary(self) -> dict[str, Any]:
        n = max(self.n_tokens, 1)
        if self.executed_per_layer is None:  # dense: nothing skipped, no router work
            R = self.profile.n_layers if self.profile is not None else 0
            return {"tokens": self.n_tokens, "param_skip": 0.0, "net_param_skip": 0.0, "flop_share_saved": 0.0,
                    "ffn_executed_per_token": float(R), "layer_skip_rates": [0.0] * R}
        out: dict[str, Any] = {"tokens": self.n_tokens}
        if self.profile is not None:
            out.update({k: v / n for k, v in self.sums.items()})
        out["ffn_executed_per_token"] = self.ffn_executed / n
        out["layer_skip_rates"] = (1.0 - self.executed_per_layer / n).round(6).tolist()
        return out
