"""RoutingTrace: everything one call decided, per (routed block x token), as a model-free object.

Arrays are indexed ``[block, token]`` (R, T) except ``memory_attention`` (T, R, R), whose row j holds
alpha_{j,i} for the earlier blocks i < j (row 0 is all zero: the first routed block has no history).
A trace carries its own compute profile, so it can be re-analysed after :meth:`RoutingTrace.load`
without any model. Values are float64 in memory so the JSON round trip is exact.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hero_core.files import atomic_write_text
from hero_core.measures.accounting import ComputeProfile, token_compute
from hero_core.measures.metrics import perplexity_ratio

SCHEMA_VERSION = 1
# Per (block x token) arrays, named as in the saved JSON.
BLOCK_TOKEN_FIELDS = ("gate", "executed", "history_logit", "local_logit", "p_hist", "m_hist", "nu")
STATE_FIELDS = ("router_state", "memory_context", "memory_state_norm")
QUALITY_FIELDS = ("nll", "dense_nll", "kl_to_dense")  # per token, with quality=True (plus top1_agree)


def quality_fields(quality: dict[str, Any]) -> dict[str, np.ndarray]:
    """A trace's per-token ``quality`` (T,) from :func:`hero_core.measures.metrics.quality_of_log_probs` of its T tokens
    (tensors): ``nll`` and ``dense_nll`` get NaN at the last token, which has no next token to score."""
    q = {name: value.cpu().double().numpy() for name, value in quality.items()}
    pad = np.array([np.nan])
    return {"nll": np.concatenate([q["nll"], pad]), "dense_nll": np.concatenate([q["dense_nll"], pad]),
            "kl_to_dense": q["kl"], "top1_agree": q["top1_agree"]}


class TraceFormatError(ValueError):
    """A trace file that cannot be read: say what is wrong with it."""


@dataclass
class RoutingTrace:
    backbone: str
    checkpoint: str
    variant: str
    tau: float
    tokens: list[str]
    token_ids: list[int]
    routed_layers: list[int]
    gate: np.ndarray  # (R, T) g
    executed: np.ndarray  # (R, T) bool: FFN ran (g >= tau)
    history_logit: np.ndarray  # (R, T) a
    local_logit: np.ndarray  # (R, T) b
    p_hist: np.ndarray  # (R, T)
    m_hist: np.ndarray  # (R, T)
    nu: np.ndarray  # (R, T)
    memory_attention: np.ndarray  # (T, R, R) alpha
    forgetting: np.ndarray  # (R,) rho_j
    profile: ComputeProfile
    n_prompt_tokens: int | None = None  # tokens before generation started (None: all are prompt)
    notices: list[str] = field(default_factory=list)
    states: dict[str, np.ndarray] | None = None  # router_state (R,T,d_s), memory_context (R,T,d_m), norm (R,T)
    # How tau was chosen: "checkpoint" (its trained tau), "given", or "param_skip=…" (matched compute on this input)
    tau_rule: str = "checkpoint"
    # "learned": the router's own memory reads; "uniform": every read replaced by the plain mean of the same values
    memory_read: str = "learned"
    # rho_j's value before training (HeroConfig.rho_init), so a view can say how far training moved it; None when
    # unknown (traces saved before it was recorded)
    forgetting_init: float | None = None
    # The memory kernel of the router that made the trace ("elu1", "softmax"); None when unknown
    memory_kernel: str | None = None
    # With quality=True: per-token arrays (T,) against the dense model on the same tokens. ``nll`` and
    # ``dense_nll`` at position t score the prediction of token t + 1 (NaN at the last token, which has none);
    # ``kl_to_dense`` is KL(dense || routed) of the next-token distribution at t.
    quality: dict[str, np.ndarray] | None = None
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        self.executed = np.asarray(self.executed, dtype=bool)
        for name in ("gate", "history_logit", "local_logit", "p_hist", "m_hist", "nu", "memory_attention",
                     "forgetting"):
            setattr(self, name, np.asarray(getattr(self, name), dtype=np.float64))
        R, T = len(self.routed_layers), len(self.tokens)
        if len(self.token_ids) != T:
            raise TraceFormatError(f"trace has {T} tokens but {len(self.token_ids)} token ids")
        for name in BLOCK_TOKEN_FIELDS:
            if getattr(self, name).shape != (R, T):
                raise TraceFormatError(f"trace field {name!r} has shape {getattr(self, name).shape}, "
                                       f"expected (routed layers, tokens) = {(R, T)}")
        if self.memory_attention.shape != (T, R, R):
            raise TraceFormatError(f"memory_attention has shape {self.memory_attention.shape}, expected {(T, R, R)}")
        if self.quality is not None:
            self.quality = {k: np.asarray(v, dtype=np.float64) for k, v in self.quality.items()}
            for name in QUALITY_FIELDS:
                if name not in self.quality or self.quality[name].shape != (T,):
                    raise TraceFormatError(f"trace quality needs {QUALITY_FIELDS} of shape ({T},)")

    def quality_summary(self) -> dict[str, float] | None:
        """Perplexity ratio routed / dense, mean KL and top-1 agreement over the prompt (None without quality)."""
        if self.quality is None:
            return None
        nll, dense = self.quality["nll"][:-1], self.quality["dense_nll"][:-1]
        out = {"mean_kl_to_dense": float(self.quality["kl_to_dense"].mean())}
        out["perplexity_ratio"] = perplexity_ratio(nll, dense) if len(nll) else 1.0
        if "top1_agree" in self.quality:
            out["top1_agreement"] = float(self.quality["top1_agree"].mean())
        return out

    # -- derived figures ------------------------------------------------------------------------
    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def n_routed(self) -> int:
        return len(self.routed_layers)

    def compute(self) -> dict[str, np.ndarray]:
        """Per-token param_skip, net_param_skip and flop_share_saved arrays (T,)."""
        return token_compute(self.executed, self.profile, routed=self.variant != "dense")

    @property
    def param_skip(self) -> float:
        """The paper's metric, averaged over tokens (fraction, not percent)."""
        return float(self.compute()["param_skip"].mean()) if self.n_tokens else 0.0

    def summary(self) -> dict[str, float]:
        figures = self.compute()
        return {"param_skip": self.param_skip,
                "net_param_skip": float(figures["net_param_skip"].mean()),
                "flop_share_saved": float(figures["flop_share_saved"].mean()),
                "ffn_executed_per_token": float(self.executed.sum(axis=0).mean()),
                "skip_rate": float(1.0 - self.executed.mean())}

    def executed_per_token(self) -> np.ndarray:
        """Number of FFNs each token ran: (T,)."""
        return self.executed.sum(axis=0)

    def layer_skip_rates(self) -> np.ndarray:
        """Share of tokens that skipped each routed block's FFN: (R,)."""
        return 1.0 - self.executed.mean(axis=1)

    def margin(self) -> np.ndarray:
        """g - tau: how far each decision is from flipping (R, T)."""
        return self.gate - self.tau

    def mean_memory_attention(self) -> np.ndarray:
        """Memory-attention map averaged over tokens: (R, R)."""
        return self.memory_attention.mean(axis=0)

    def to_frame(self) -> pd.DataFrame:
        """Tidy table: one row per (token, routed layer)."""
        R, T = self.n_routed, self.n_tokens
        token_index = np.tile(np.arange(T), R)
        frame = pd.DataFrame({
            "token_index": token_index,
            "token": np.asarray(self.tokens, dtype=object)[token_index],
            "token_id": np.asarray(self.token_ids)[token_index],
            "block": np.repeat(np.arange(1, R + 1), T),
            "layer": np.repeat(np.asarray(self.routed_layers), T),
        })
        for name in BLOCK_TOKEN_FIELDS:
            frame[name] = getattr(self, name).reshape(-1)
        frame["margin"] = frame["gate"] - self.tau
        for name, values in (self.quality or {}).items():  # per-token quality, repeated on the token's rows
            frame[name] = values[token_index]
        return frame.sort_values(["token_index", "block"], kind="stable").reset_index(drop=True)

    # -- serialisation --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema_version": self.schema_version, "backbone": self.backbone, "checkpoint": self.checkpoint,
            "variant": self.variant, "tau": self.tau, "tau_rule": self.tau_rule,
            "memory_read": self.memory_read, "forgetting_init": self.forgetting_init,
            "memory_kernel": self.memory_kernel, "tokens": list(self.tokens),
            "token_ids": [int(i) for i in self.token_ids], "routed_layers": [int(i) for i in self.routed_layers],
            "n_prompt_tokens": self.n_prompt_tokens, "notices": list(self.notices),
            "memory_attention": self.memory_attention.tolist(), "forgetting": self.forgetting.tolist(),
            "profile": self.profile.to_dict(), "param_skip": self.param_skip, "summary": self.summary(),
        }
        for name in BLOCK_TOKEN_FIELDS:
            out[name] = getattr(self, name).tolist()
        if self.states is not None:
            out["states"] = {k: np.asarray(v).tolist() for k, v in self.states.items()}
        if self.quality is not None:  # NaN (no next token) is written as null: JSON has no NaN
            out["quality"] = {k: [None if math.isnan(x) else x for x in v.tolist()] for k, v in self.quality.items()}
        return out

    def save(self, path: str | os.PathLike) -> Path:
        """Write JSON atomically (temp file + rename): a crash never leaves half a trace."""
        return atomic_write_text(path, json.dumps(self.to_dict(), allow_nan=False))

    @classmethod
    def from_call(cls, call: Any, batch_index: int, *, token_ids: list[int], tokens: list[str], backbone: str,
                  checkpoint: str, routed_layers: list[int], forgetting: np.ndarray, profile: ComputeProfile,
                  notices: list[str] | None = None, n_prompt_tokens: int | None = None,
                  tau_rule: str = "checkpoint", forgetting_init: float | None = None,
                  memory_kernel: str | None = None) -> RoutingTrace:
        """The trace of batch row ``batch_index`` of a finished call
        (a :class:`~hero_core.method.call_state.RoutingCall`, whose passes turn their records into arrays): its passes
        concatenated over tokens, cut to ``token_ids``."""
        R, T = len(routed_layers), len(token_ids)
        per_pass = [p.arrays(batch_index, R, call.variant, call.record_states) for p in call.passes]
        arrays = {k: np.concatenate([p[k] for p in per_pass], axis=-1)[:, :T] for k in BLOCK_TOKEN_FIELDS}
        attention = np.concatenate([p["memory_attention"] for p in per_pass], axis=0)[:T]
        states = None
        if call.record_states and call.variant != "dense":
            states = {k: np.concatenate([p[k] for p in per_pass], axis=1)[:, :T] for k in STATE_FIELDS}
        return cls(backbone=backbone, checkpoint=checkpoint, variant=call.variant, tau=call.tau, tokens=tokens,
                   token_ids=list(token_ids), routed_layers=list(routed_layers), memory_attention=attention,
                   forgetting=forgetting, profile=profile, n_prompt_tokens=n_prompt_tokens,
                   notices=list(notices or []), states=states, tau_rule=tau_rule,
                   memory_read=getattr(call, "memory_read", "learned"), forgetting_init=forgetting_init,
                   memory_kernel=memory_kernel, **arrays)

    @classmethod
    def from_dict(cls, data: Any) -> RoutingTrace:
        version = _readable_version(data)
        try:
            profile = ComputeProfile(**data["profile"])
            R = len(data["routed_layers"])
            T = len(data["tokens"])

            def block_token(name: str, dtype) -> np.ndarray:
                return np.asarray(data[name], dtype=dtype).reshape(R, T)

            attention = np.asarray(data["memory_attention"], dtype=np.float64).reshape(T, R, R)
            return cls(
                backbone=str(data["backbone"]), checkpoint=str(data["checkpoint"]), variant=str(data["variant"]),
                tau=float(data["tau"]), tokens=[str(t) for t in data["tokens"]],
                token_ids=[int(i) for i in data["token_ids"]], routed_layers=[int(i) for i in data["routed_layers"]],
                gate=block_token("gate", np.float64), executed=block_token("executed", bool),
                history_logit=block_token("history_logit", np.float64),
                local_logit=block_token("local_logit", np.float64), p_hist=block_token("p_hist", np.float64),
                m_hist=block_token("m_hist", np.float64), nu=block_token("nu", np.float64),
                memory_attention=attention, forgetting=np.asarray(data["forgetting"], dtype=np.float64),
                profile=profile, schema_version=version, **_optional_fields(data))
        except TraceFormatError:
            raise
        except (TypeError, ValueError, KeyError) as err:
            raise TraceFormatError(f"trace fields have the wrong type or shape: {err}") from None

    @classmethod
    def load(cls, path: str | os.PathLike) -> RoutingTrace:
        path = Path(path)
        if not path.is_file():
            raise TraceFormatError(f"no trace file at {path}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise TraceFormatError(f"{path} is not valid JSON ({err}); was it truncated?") from None
        return cls.from_dict(data)

    def equals(self, other: RoutingTrace) -> bool:
        """Exact equality of every recorded value (used by round-trip and determinism checks)."""
        a, b = self.to_dict(), other.to_dict()
        return _deep_equal(a, b)


REQUIRED_FIELDS = ("backbone", "checkpoint", "variant", "tau", "tokens", "token_ids", "routed_layers",
                   "memory_attention", "forgetting", "profile") + BLOCK_TOKEN_FIELDS


def _readable_version(data: Any) -> int:
    """The schema version of a trace this hero_core can read, every required field present; else why not."""
    if not isinstance(data, dict):
        raise TraceFormatError("a trace must be a JSON object")
    version = data.get("schema_version")
    if not isinstance(version, int):
        raise TraceFormatError("trace has no integer schema_version: is this a HeRo Lens trace?")
    if version > SCHEMA_VERSION:
        raise TraceFormatError(f"trace schema_version {version} is newer than this hero_core reads "
                               f"({SCHEMA_VERSION}); upgrade hero_core to open it")
    missing = [k for k in REQUIRED_FIELDS if k not in data]
    if missing:
        raise TraceFormatError(f"trace is missing fields {missing}")
    return version


def _optional_fields(data: dict) -> dict[str, Any]:
    """The fields a trace may lack (older schema versions, or not recorded), with their defaults."""
    states, quality = data.get("states"), data.get("quality")
    return {
        "n_prompt_tokens": data.get("n_prompt_tokens"), "notices": [str(n) for n in data.get("notices", [])],
        "states": None if states is None else {k: np.asarray(v, dtype=np.float64) for k, v in states.items()},
        "tau_rule": str(data.get("tau_rule", "checkpoint")), "memory_read": str(data.get("memory_read", "learned")),
        "forgetting_init": None if data.get("forgetting_init") is None else float(data["forgetting_init"]),
        "memory_kernel": None if data.get("memory_kernel") is None else str(data["memory_kernel"]),
        "quality": None if quality is None else {k: np.asarray([np.nan if x is None else x for x in v],
                                                               dtype=np.float64) for k, v in quality.items()},
    }


def _deep_equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_deep_equal(x, y) for x, y in zip(a, b))
    return a == b
