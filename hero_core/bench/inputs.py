"""What the benchmark runs on: its configuration (:class:`BenchConfig`), real-text token batches, and the
routed configurations under test (a checkpoint, or a synthetic router calibrated to the name's skip)."""

from __future__ import annotations

import copy
import logging
import math
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from hero_core.backbones.precision import check_dtype
from hero_core.measures.accounting import ffn_share_for_param_skip
from hero_core.method.call_state import RoutingCall
from hero_core.method.model import DEFAULT_CHECKPOINT

DEFAULT_BENCH_CHECKPOINTS = (DEFAULT_CHECKPOINT, "hero-25-r7", "hero-40-r7")  # the budgets at the default's widths


def parse_shape(text: str) -> tuple[int, int]:
    """``"4x512"`` -> (4, 512)."""
    try:
        b, t = (int(x) for x in str(text).lower().split("x"))
    except ValueError:
        raise ValueError(f"cannot read the shape {text!r}: write BATCHxTOKENS, e.g. 4x512") from None
    if b < 1 or t < 1:
        raise ValueError(f"shape {text!r} must have a positive batch and token count")
    return b, t


@dataclass
class BenchConfig:
    sizes: list[tuple[int, int]] = field(default_factory=lambda: [(4, 128), (4, 512), (1, 2048)])  # prefill
    reps: int = 5  # timed repetitions per configuration (after warm-up)
    warmup: int = 1
    # The checkpoint people run first (its speed-up decides whether routing pays where it is used), then the
    # bigger budgets.
    checkpoints: list[str] = field(default_factory=lambda: list(DEFAULT_BENCH_CHECKPOINTS))
    decode_batches: list[int] = field(default_factory=lambda: [1, 8])
    decode_prompt: int = 64  # prompt tokens before decoding (equal for every row: no padding)
    decode_tokens: int = 32  # greedy tokens decoded per row (no early stop: equal work)
    record_shape: tuple[int, int] = (4, 512)  # record=True vs record=False
    overhead_shape: tuple[int, int] = (4, 512)  # dense-through-wrapper vs bare
    train_shape: tuple[int, int] = (4, 128)
    train_alpha: float = 1e-3
    memory: bool = True  # fp32 vs NF4 peak memory, one subprocess each
    memory_shape: tuple[int, int] = (1, 128)  # forward run inside the memory probe
    threads: int | None = None  # torch threads; None: $OMP_NUM_THREADS, else the cores this process may use
    seed: int = 0
    quick: bool = False
    sections: tuple[str, ...] = ("prefill", "decode", "recording", "overhead", "training", "memory")
    # Backbone precisions, each measured with every section (memory aside) in the same run: fp32 is the
    # reference, bf16 what a CPU with bf16 matrix units or a GPU runs; "auto" resolves by the precision probe.
    dtypes: tuple[str, ...] = ("fp32", "bf16")

    def __post_init__(self) -> None:
        if self.reps < 1 or self.warmup < 0:
            raise ValueError("reps must be >= 1 and warmup >= 0")
        if not self.sizes:
            raise ValueError("give at least one prefill size (e.g. --sizes 4x128)")
        if any(b < 1 for b in self.decode_batches) or self.decode_prompt < 1 or self.decode_tokens < 1:
            raise ValueError("decode batches, prompt and token counts must be positive")
        unknown = set(self.sections) - set(BenchConfig.__dataclass_fields__["sections"].default)
        if unknown:
            raise ValueError(f"unknown bench sections {sorted(unknown)}")
        if not self.dtypes:
            raise ValueError("give at least one precision (e.g. --dtypes fp32)")
        for name in self.dtypes:
            check_dtype(name)

    @classmethod
    def quick_preset(cls, **overrides) -> BenchConfig:
        """Small sizes and few reps: a smoke run of every section in well under a minute on SmolLM2."""
        base = dict(sizes=[(2, 64), (1, 256)], reps=3, warmup=1, decode_batches=[1, 8], decode_prompt=16,
                    decode_tokens=8, record_shape=(2, 64), overhead_shape=(2, 64), train_shape=(2, 64),
                    memory_shape=(1, 32), quick=True)
        base.update(overrides)
        return cls(**base)


# -- inputs ------------------------------------------------------------------------------------------
def token_pool(tokenizer, n_tokens: int, skip: int = 0) -> torch.Tensor:
    """``n_tokens`` real token ids from Python's standard-library sources (deterministic for a given
    Python), starting ``skip`` tokens in; used so routers see text rather than random ids."""
    import argparse as _a
    import inspect as _i
    import json as _j

    files = [Path(m.__file__) for m in (_a, _i, _j, copy, logging, subprocess, tempfile)]
    files += sorted(Path(_i.__file__).parent.glob("*.py"))
    ids: list[int] = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
            ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
        except OSError:
            continue
        if len(ids) >= n_tokens + skip:
            break
    if len(ids) < n_tokens + skip:
        raise ValueError(f"could not gather {n_tokens + skip} tokens of text for the benchmark")
    return torch.tensor(ids[skip: skip + n_tokens], dtype=torch.long)


def batch_of(pool: torch.Tensor, batch: int, length: int, offset: int = 0) -> torch.Tensor:
    need = batch * length
    reps = math.ceil((need + offset) / pool.numel())
    flat = pool.repeat(reps)[offset: offset + need] if reps > 1 else pool[offset: offset + need]
    return flat.view(batch, length).clone()


# -- routers -----------------------------------------------------------------------------------------
@dataclass
class RoutedConfig:
    """One routed configuration under test: a router, its variant and threshold, and where it came from."""

    name: str
    router: torch.nn.Module
    variant: str
    tau: float
    source: str  # "checkpoint" | "synthetic"
    note: str = ""
    calibration: dict[str, float] = field(default_factory=dict)

    def call(self, *, record: bool = False, keep_gates: bool = False, router=None,
             straight_through: bool = False) -> RoutingCall:
        return RoutingCall(router=router if router is not None else self.router, variant=self.variant,
                           tau=self.tau, record=record, keep_gates=keep_gates, straight_through=straight_through)

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, "variant": self.variant, "tau": self.tau, "note": self.note,
                "calibration": self.calibration}


def target_param_skip(name: str) -> float | None:
    """``hero-25`` -> 0.25 (the bundled names carry their target param skip)."""
    tail = str(name).rstrip("/").rsplit("-", 1)[-1]
    return int(tail) / 100 if tail.isdigit() and 0 < int(tail) < 100 else None


def synthetic_router(hero, name: str, calibration_ids: torch.Tensor, seed: int) -> RoutedConfig:
    """A fresh router with gates spread around 0.5 (as the tests' ``embedded`` fixture builds), its tau
    calibrated so the share of skipped FFNs matches the param skip the name asks for."""
    from hero_core.method.model import fresh_router, spread_gates

    want_param_skip = target_param_skip(name) or 0.25
    p = hero.profile
    R = hero.config.n_routed
    skip_share = ffn_share_for_param_skip(want_param_skip, p, R)
    how = f"param skip {want_param_skip:.0%} <=> {skip_share:.1%} of FFNs skipped"
    if skip_share >= 0.95:  # e.g. the tiny test model: FFNs are a sliver of its parameters
        skip_share = want_param_skip
        how = f"{want_param_skip:.0%} of FFNs skipped (this backbone cannot reach a {want_param_skip:.0%} param skip)"
    torch.manual_seed(seed)
    router = fresh_router(hero.backbone, variant="hero", routed_layers=list(hero.config.routed_layers),
                          gate_bias_init=0.0)
    router = spread_gates(router).to(hero.device).eval()
    ids = calibration_ids.to(hero.device)
    # The one tau search (hero_core.method.tau_search.matched_tau), on the param skip that this share of skipped
    # FFNs is (every skipped FFN counts the same, so the two scales are proportional); it keeps the best tau seen,
    # as a random router's gates react strongly to the routing of earlier blocks.
    per_ffn = p.ffn_params / p.total_params
    tau, realised = hero.with_router(router, name).tau_for_param_skip(ids, None, "hero", skip_share * R * per_ffn)
    realised = realised / (R * per_ffn)
    cfg = RoutedConfig(name=name, router=router, variant="hero", tau=tau, source="synthetic")
    cfg.calibration = {"target_ffn_skip_share": skip_share, "calibrated_ffn_skip_share": realised,
                       "calibration_tokens": int(ids.numel())}
    cfg.note = (f"synthetic stand-in (checkpoint {name!r} not available): random router, tau={cfg.tau:.4f} "
                f"calibrated on the benchmark's prompt text to {how}; timings are real, quality is meaningless")
    return cfg


def load_routed_configs(hero, names: list[str], calibration_ids: torch.Tensor, seed: int,
                        say: Callable[[str], None]) -> list[RoutedConfig]:
    from hero_core.method.model import load_checkpoint

    configs = []
    for i, name in enumerate(names):
        try:
            # on the benchmark's wrapped backbone: a checkpoint routing other layers is refused there
            found = load_checkpoint(name, hero.backbone)
            configs.append(RoutedConfig(name=name, router=found.router, variant=found.config.variant,
                                        tau=found.config.tau, source="checkpoint",
                                        note=f"checkpoint {found.checkpoint_name}"))
        except ValueError as err:  # CheckpointError is a ValueError, as is the routed-layer mismatch
            cfg = synthetic_router(hero, name, calibration_ids, seed + i)
            say(f"note: {err} -> {cfg.note}")
            configs.append(cfg)
    return configs


def recorded_pass(hero, cfg: RoutedConfig, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Gates and executed matrix (R, B*T) of one recorded routed forward."""
    call = cfg.call(record=True)
    with torch.no_grad():
        hero.forward(ids, None, call, use_cache=False)
    records = call.passes[-1].records
    return torch.stack([r.fields["gate"] for r in records]), call.passes[-1].executed()
