"""Configuration of a HeRo router stack.

Glossary (docs/method.md symbol -> name in code):
    L_R / R        -> ``len(routed_layers)``          number of routed blocks
    l_j            -> ``routed_layers[j-1]``          backbone index of routed block j (1-based j)
    d_s            -> ``d_state`` (= d_hidden_state + d_aux)
    z_h, z_a       -> ``d_hidden_state``, ``d_aux``   hidden-state and path parts of s_j
    d_m            -> ``d_memory``                    width of q, k, v
    d_r            -> ``adapter_rank``                adapter bottleneck (paper: intermediate / 16)
    tau            -> ``tau``                         hard branch threshold on g
    T_hist         -> ``t_hist``                      temperature of p_hist
    rho_j          -> sigmoid(eta_j), eta_j initialised so that rho_j = ``rho_init``
    beta           -> exp(``memory_log_scale``), initialised to ``memory_scale_init`` / sqrt(d_m)   (softmax kernel)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Any

from hero_core.choices import check_choice
from hero_core.method.memory import check_memory_kernel

# Variants a router can be trained as; every one is also selectable at inference.
TRAINABLE_VARIANTS = ("hero", "no_history", "no_memread", "no_aux", "no_pos")
# How the hard branch uses the gate (recorded in every checkpoint):
#   "paper":    h = hbar + g * FFN(u)  if g >= tau,  else  hbar + (1 - g) * Adapter(u)   (the paper's form)
#   "unscaled": h = hbar + FFN(u)      if g >= tau,  else  hbar + Adapter(u); in training the gate learns from
#               the soft mixture's gradient (straight-through), d out / d g = FFN(u) - Adapter(u).
# Under "paper" an executed FFN is shrunk by g, so a run with 0 % skip is still not the dense model.
BRANCH_SCALINGS = ("paper", "unscaled")
# ``dense`` is an inference mode: every FFN runs unscaled, routers are bypassed.
INFERENCE_VARIANTS = TRAINABLE_VARIANTS + ("dense",)


@dataclass(frozen=True)
class VariantSpec:
    """What a variant's router uses (docs/method.md, "Variants"). One table, read by the router and the app."""

    history: bool  # the history head a = f_theta([s; c; nu]) (False: a = 0, the local router)
    memory_read: bool  # the depth memory and its read c, nu (False: c = 0, nu = 0)
    path_encoder: bool  # z_a = FFN_path(features) (False: z_a = 0)
    positional: bool  # the features r, q_rem, d, gamma (False: zeroed)
    description: str


VARIANTS = MappingProxyType({
    "hero": VariantSpec(True, True, True, True, "full HeRo: local + history heads"),
    "no_history": VariantSpec(False, False, True, True, "local router only (a = 0)"),
    "no_memread": VariantSpec(True, False, True, True, "history head without the memory read"),
    "no_aux": VariantSpec(True, True, False, True, "no path encoder"),
    "no_pos": VariantSpec(True, True, True, False, "no positional path features"),
})


def check_variant(variant: str, *, allow_dense: bool = True) -> str:
    return check_choice("variant", variant, INFERENCE_VARIANTS if allow_dense else TRAINABLE_VARIANTS)


def check_tau(tau: float) -> float:
    if not isinstance(tau, (int, float)) or isinstance(tau, bool) or not 0.0 < float(tau) < 1.0:
        raise ValueError(f"tau must be a number strictly between 0 and 1, got {tau!r}")
    return float(tau)


def parse_layers(spec: str | list[int] | tuple[int, ...] | range, n_layers: int) -> list[int]:
    """Turn ``"1-28"``, ``"0,2,4-6"``, ``"all"`` or a list of ints into a sorted list of block indices."""
    if isinstance(spec, str):
        spec = spec.strip()
        if spec == "all":
            return list(range(n_layers))
        out: list[int] = []
        for part in spec.split(","):
            part = part.strip()
            try:
                if "-" in part:
                    lo, hi = part.split("-")
                    out.extend(range(int(lo), int(hi) + 1))
                else:
                    out.append(int(part))
            except ValueError:
                raise ValueError(f"cannot read routed layers {spec!r}: use e.g. '0-29' or '1,3,5-9'") from None
        spec = out
    layers = sorted(set(int(i) for i in spec))
    if not layers:
        raise ValueError("routed_layers is empty: route at least one block")
    if layers[0] < 0 or layers[-1] >= n_layers:
        raise ValueError(f"routed layers {layers} out of range for a backbone with {n_layers} blocks")
    return layers


# The paper's router widths (its backbone: d = 4096); every checkpoint bundled before recipe 7 was trained with them.
PAPER_HEAD_HIDDEN, PAPER_ENCODER = 256, 128
PAPER_D_MODEL = 4096


def router_widths(d_model: int) -> tuple[int, int]:
    """(head_hidden, d_encoder) sized to a backbone of width ``d_model``: the paper's widths scaled by
    d_model / 4096, in steps of 16, at least 16 and never above the paper's. The router's cost then stays about the
    same share of the model whatever its size (~1.4 % on SmolLM2-135M, ~0.7 % on Llama-3.1-8B), where the paper's
    fixed widths cost 6.3 % on SmolLM2-135M: three FFNs a token, about all the default router skipped."""
    steps = max(1, round(d_model * PAPER_HEAD_HIDDEN / PAPER_D_MODEL / 16))
    return min(PAPER_HEAD_HIDDEN, 16 * steps), min(PAPER_ENCODER, 16 * steps)


LEGACY_BRANCH_SCALING = "paper"  # checkpoints saved without a branch_scaling field


@dataclass
class HeroConfig:
    routed_layers: list[int]
    d_model: int  # backbone hidden size: input of the state encoder, local head, adapters
    d_ffn: int  # backbone intermediate size: sets the adapter rank and the FLOP accounting
    variant: str = "hero"  # the variant this router stack was trained as
    d_hidden_state: int = 48  # z_h: what the router keeps of the hidden state (paper: 48)
    d_aux: int = 16  # z_a: the path-feature part of s_j (paper: 16)
    # The router's hidden widths; 0 sizes them to the backbone (router_widths): the paper's 256 / 128 on an
    # 8B backbone (d = 4096), 32 / 32 on SmolLM2-135M (d = 576), where the paper's widths cost 6.3 % of the model.
    d_encoder: int = 0  # width of W_hd (paper silent)
    d_path_hidden: int = 32  # hidden width of FFN_path (paper silent)
    d_memory: int = 64  # d_m
    head_hidden: int = 0  # hidden width of both heads (paper: 256); one width, as the packed decode step assumes
    adapter_rank: int = 0  # d_r; 0 means d_ffn // 16 as in the paper
    tau: float = 0.5
    t_hist: float = 0.9
    rho_init: float = 0.98
    # How the depth memory weighs its entries (hero_core.method.memory): "elu1" is the paper's linear attention (reads
    # start, and in our runs stayed, within 0.3 % of uniform); "softmax" is an exact softmax over the <= R stored
    # keys with log rho as a decay bias and a learned temperature. Checkpoints without the field are "elu1".
    memory_kernel: str = "elu1"
    # softmax kernel only: beta at init, as a multiple of 1 / sqrt(d_m) (1 = the usual attention scaling).
    memory_scale_init: float = 1.0
    # Local-head output bias at init: sigmoid(4) = 0.982, so training starts close to the dense model
    # (every FFN executed; under the paper's branch scaling also multiplied by g ~ 0.98) while the gate still
    # has gradient (g(1-g) ~ 0.018).
    gate_bias_init: float = 4.0
    eps: float = 1e-6
    # What every bundled checkpoint uses (hero_core.method.inject). Files written before this field existed were all
    # trained with the paper's scaling: from_dict reads a missing field as LEGACY_BRANCH_SCALING.
    branch_scaling: str = "unscaled"
    extra: dict[str, Any] = field(default_factory=dict)  # free-form provenance (training recipe, notes)

    def __post_init__(self) -> None:
        # Checked in this order, so a config wrong in several ways names the same fault first as it always has
        check_variant(self.variant, allow_dense=False)
        self._size_widths()
        self.tau = check_tau(self.tau)
        check_choice("branch_scaling", self.branch_scaling, BRANCH_SCALINGS)
        self._check_widths()
        self._check_adapter_rank()
        self._check_routed_layers()
        if not 0.0 < self.t_hist:
            raise ValueError(f"t_hist must be positive, got {self.t_hist!r}")
        self._check_memory()

    def _size_widths(self) -> None:
        """Widths left at 0 are sized to the backbone (router_widths); a non-integer d_model is refused later."""
        scaled_head, scaled_encoder = router_widths(self.d_model) if isinstance(self.d_model, int) else (1, 1)
        if self.head_hidden == 0:
            self.head_hidden = scaled_head
        if self.d_encoder == 0:
            self.d_encoder = scaled_encoder

    def _check_widths(self) -> None:
        for name in ("d_model", "d_ffn", "d_hidden_state", "d_aux", "d_encoder", "d_path_hidden",
                     "d_memory", "head_hidden"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")

    def _check_adapter_rank(self) -> None:
        """A non-negative rank; 0 becomes the paper's d_ffn // 16."""
        if not isinstance(self.adapter_rank, int) or self.adapter_rank < 0:
            raise ValueError(f"adapter_rank must be a non-negative integer, got {self.adapter_rank!r}")
        if self.adapter_rank == 0:
            self.adapter_rank = max(1, self.d_ffn // 16)

    def _check_routed_layers(self) -> None:
        """Block indices, strictly increasing, kept as a list (a tuple read from code is accepted)."""
        if not isinstance(self.routed_layers, (list, tuple)) or not self.routed_layers:
            raise ValueError("routed_layers must be a non-empty list of block indices")
        if any(not isinstance(i, int) or isinstance(i, bool) for i in self.routed_layers):
            raise ValueError(f"routed_layers must hold integers, got {self.routed_layers!r}")
        if list(self.routed_layers) != sorted(set(self.routed_layers)):
            raise ValueError(f"routed_layers must be strictly increasing, got {self.routed_layers!r}")
        self.routed_layers = list(self.routed_layers)

    def _check_memory(self) -> None:
        check_memory_kernel(self.memory_kernel)
        if not (isinstance(self.memory_scale_init, (int, float)) and self.memory_scale_init > 0):
            raise ValueError(f"memory_scale_init must be a positive number, got {self.memory_scale_init!r}")
        if not 0.0 < self.rho_init < 1.0:
            raise ValueError(f"rho_init must lie in (0, 1), got {self.rho_init!r}")

    @property
    def n_routed(self) -> int:
        return len(self.routed_layers)

    @property
    def d_state(self) -> int:
        return self.d_hidden_state + self.d_aux

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HeroConfig:
        if not isinstance(data, dict):
            raise ValueError(f"router config must be a JSON object, got {type(data).__name__}")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"router config has unknown fields {unknown}; known: {sorted(known)}")
        try:
            return cls(**{"branch_scaling": LEGACY_BRANCH_SCALING, **data})
        except TypeError as err:
            raise ValueError(f"router config is incomplete or malformed: {err}") from None

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, indent=2)
