"""Benchmark routed against dense inference, decoding, tracing, training and memory (``python -m hero_core bench``).

Everything runs side by side in one process on one backbone, so the comparisons share weights, threads
and machine load:

* **prefill**: dense vs each routed configuration (``hero-25``, ``hero-40``) on batches of prompts; the
  achieved speed-up (dense time / routed time) next to the *ideal* one implied by the FLOPs the routed
  pass really skipped (its executed matrix through :mod:`hero_core.accounting`):
  ``ideal = sum_t dense_flops_t / sum_t (dense_flops_t - saved_flops_t)``, router and adapter work charged.
* **decode**: greedy KV-cache decoding of equal-length prompts at batch 1 and 8, tokens/s, same ideal.
* **recording**: a routed forward with ``record=True`` vs ``record=False`` (and the trace assembly).
* **overhead**: the ``dense`` variant through the wrappers vs the bare backbone (wrappers taken off).
* **training**: a routed forward + backward + AdamW step on a copy of the router (as ``train.py`` does)
  vs a dense forward + backward to the input embeddings.
* **memory**: peak resident memory of the backbone in full precision vs NF4, one subprocess per config.

Timing: after warm-up, the configurations of a section run interleaved (rotating order) ``reps``
times; figures are medians with quartiles, min and max. A ratio is the median of the *paired* per-rep
ratios (the two runs of a pair are adjacent in time, so slow drifts of machine load cancel). Wall
time is the headline; process CPU time is kept too: with one thread it is much less sensitive to
other processes sharing the cores. The thread count is set explicitly and the load average is
recorded at the start, the end and before every section.

When a checkpoint named by ``--checkpoints`` is missing (or trained for another backbone), a
*synthetic* router stands in: a fresh router with spread gates whose threshold tau is calibrated on
the benchmark's prompt text so that it skips as many FFNs as the name's target param skip implies. The JSON and the
report say so: its speed figures are real, its quality is meaningless.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import gc
import importlib.metadata
import importlib.util
import json
import logging
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .accounting import ComputeProfile, token_compute
from .routing import RoutingCall, routing_call

log = logging.getLogger(__name__)

SCHEMA = "hero-lens-bench/1"
TARGETS = {  # name -> (description, threshold, direction)
    "prefill_efficiency": ("prefill {shape}, {router}: achieved / ideal speed-up", 0.90, ">="),
    "decode_efficiency": ("decode batch 1, {router}: achieved / ideal speed-up", 0.90, ">="),
    "recording_overhead": ("trace recording (record=True) over record=False", 0.10, "<="),
    "wrapper_overhead": ("dense variant through the wrappers over the bare backbone", 0.05, "<="),
}
TARGET_PREFILL_SHAPE = (4, 512)


# -- configuration ---------------------------------------------------------------------------------
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
    checkpoints: list[str] = field(default_factory=lambda: ["hero-25", "hero-40"])
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

    @classmethod
    def quick_preset(cls, **overrides) -> BenchConfig:
        """Small sizes and few reps: a smoke run of every section in well under a minute on SmolLM2."""
        base = dict(sizes=[(2, 64), (1, 256)], reps=3, warmup=1, decode_batches=[1, 8], decode_prompt=16,
                    decode_tokens=8, record_shape=(2, 64), overhead_shape=(2, 64), train_shape=(2, 64),
                    memory_shape=(1, 32), quick=True)
        base.update(overrides)
        return cls(**base)


# -- statistics --------------------------------------------------------------------------------------
def stats(values: list[float]) -> dict[str, Any]:
    a = np.asarray(values, dtype=np.float64)
    return {"median": float(np.median(a)), "p25": float(np.percentile(a, 25)), "p75": float(np.percentile(a, 75)),
            "min": float(a.min()), "max": float(a.max()), "n": int(a.size), "values": [float(x) for x in a]}


def time_stats(times: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, Any]]:
    """Wall and CPU statistics of every configuration that :func:`measure` timed."""
    return {"time_s": {k: stats(v["wall"]) for k, v in times.items()},
            "cpu_s": {k: stats(v["cpu"]) for k, v in times.items()}}


def paired_ratio(numerator: list[float], denominator: list[float]) -> dict[str, Any]:
    """Median (and spread) of the per-rep ratios numerator_i / denominator_i."""
    return stats([n / d for n, d in zip(numerator, denominator, strict=True)])


# -- machine -----------------------------------------------------------------------------------------
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def machine_info(device: torch.device) -> dict[str, Any]:
    info = {"platform": platform.platform(), "python": platform.python_version(), "cpu": _cpu_model(),
            "logical_cores": os.cpu_count(), "available_cores": available_cores(),
            "torch_threads": torch.get_num_threads(), "torch_interop_threads": torch.get_num_interop_threads(),
            "omp_num_threads_env": os.environ.get("OMP_NUM_THREADS"), "device": str(device),
            "versions": {p: _version(p) for p in ("torch", "transformers", "bitsandbytes", "numpy", "hero-lens")}}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# -- timing ------------------------------------------------------------------------------------------
Timed = Callable[[], "tuple[float, float] | None"]


def measure(fns: dict[str, Timed], reps: int, warmup: int, device: torch.device) -> dict[str, dict[str, list[float]]]:
    """Run every function ``warmup`` times, then ``reps`` times interleaved in rotating order.

    A function may time itself (return ``(wall_s, cpu_s)``, e.g. to leave out a decode loop's prefill);
    otherwise the whole call is timed. Returns name -> {"wall": [...], "cpu": [...]}."""
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
    out = {name: {"wall": [], "cpu": []} for name in names}
    for rep in range(reps):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            gc.collect()
            _sync(device)
            w0, c0 = time.perf_counter(), time.process_time()
            own = fns[name]()
            _sync(device)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            if own is not None:
                wall, cpu = own
            out[name]["wall"].append(wall)
            out[name]["cpu"].append(cpu)
    return out


def _timer(device: torch.device) -> Callable[[], tuple[float, float]]:
    _sync(device)
    w0, c0 = time.perf_counter(), time.process_time()

    def stop() -> tuple[float, float]:
        _sync(device)
        return time.perf_counter() - w0, time.process_time() - c0
    return stop


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
    from .model import fresh_router

    want_param_skip = target_param_skip(name) or 0.25
    p = hero.profile
    R = hero.config.n_routed
    skip_share = want_param_skip * p.total_params / (p.ffn_params * R)
    how = f"param skip {want_param_skip:.0%} <=> {skip_share:.1%} of FFNs skipped"
    if skip_share >= 0.95:  # e.g. the tiny test model: FFNs are a sliver of its parameters
        skip_share = want_param_skip
        how = f"{want_param_skip:.0%} of FFNs skipped (this backbone cannot reach a {want_param_skip:.0%} param skip)"
    torch.manual_seed(seed)
    router = fresh_router(hero.backbone, variant="hero", routed_layers=list(hero.config.routed_layers),
                          gate_bias_init=0.0)
    with torch.no_grad():
        torch.nn.init.normal_(router.local_head.mlp[2].weight, std=0.3)
        torch.nn.init.normal_(router.history_head[2].weight, std=0.3)
    router = router.to(hero.device).eval()
    cfg = RoutedConfig(name=name, router=router, variant="hero", tau=0.5, source="synthetic")
    ids = calibration_ids.to(hero.device)
    # Bisection on tau (skipping grows with tau): a random router's gates react strongly to the routing
    # of earlier blocks, so quantile fixed points can oscillate; keep the best tau seen.
    lo, hi, best = 0.0, 1.0, (0.5, float("inf"))
    for _ in range(10):
        cfg.tau = (lo + hi) / 2
        _, executed = _recorded_pass(hero, cfg, ids)
        skip = 1.0 - float(executed.float().mean())
        if abs(skip - skip_share) < abs(best[1] - skip_share):
            best = (cfg.tau, skip)
        if abs(skip - skip_share) < 0.01:
            break
        lo, hi = (cfg.tau, hi) if skip < skip_share else (lo, cfg.tau)
    cfg.tau, realised = best
    cfg.calibration = {"target_ffn_skip_share": skip_share, "calibrated_ffn_skip_share": realised,
                       "calibration_tokens": int(ids.numel())}
    cfg.note = (f"synthetic stand-in (checkpoint {name!r} not available): random router, tau={cfg.tau:.4f} "
                f"calibrated on the benchmark's prompt text to {how}; timings are real, quality is meaningless")
    return cfg


def load_routed_configs(hero, names: list[str], calibration_ids: torch.Tensor, seed: int,
                        say: Callable[[str], None]) -> list[RoutedConfig]:
    from . import checkpoint as ckpt

    configs = []
    for i, name in enumerate(names):
        try:
            found = ckpt.read_checkpoint(name)
            ckpt.check_backbone(found, hero.backbone.fingerprint, hero.backbone.name)
            if list(found.config.routed_layers) != list(hero.config.routed_layers):
                raise ckpt.CheckpointError(f"checkpoint {name!r} routes layers {found.config.routed_layers}, "
                                           f"the wrapped model {hero.config.routed_layers}")
            router = ckpt.build_router(found).to(hero.device).eval()
            configs.append(RoutedConfig(name=name, router=router, variant=found.config.variant,
                                        tau=found.config.tau, source="checkpoint", note=f"checkpoint {found.name}"))
        except ValueError as err:  # CheckpointError is a ValueError
            cfg = synthetic_router(hero, name, calibration_ids, seed + i)
            say(f"note: {err} -> {cfg.note}")
            configs.append(cfg)
    return configs


# -- one pass helpers --------------------------------------------------------------------------------
def _recorded_pass(hero, cfg: RoutedConfig, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Gates and executed matrix (R, B*T) of one recorded routed forward."""
    call = cfg.call(record=True)
    with torch.no_grad():
        hero.forward(ids, None, call, use_cache=False)
    records = call.passes[-1].records
    return torch.stack([r.fields["gate"] for r in records]), torch.stack([r.executed for r in records])


def dense_token_flops(profile: ComputeProfile, positions: np.ndarray) -> np.ndarray:
    """Dense FLOPs of each token, the same formula :func:`hero_core.accounting.token_compute` divides by."""
    return 2.0 * profile.linear_params + 4.0 * profile.attention_width * (positions + 1) * profile.n_layers


def compute_figures(executed: np.ndarray, positions: np.ndarray, profile: ComputeProfile) -> dict[str, float]:
    """Ideal speed-up and skip figures from an executed matrix (R, N) and the tokens' positions (N,)."""
    figures = token_compute(executed, profile, positions=positions, routed=True)
    dense = dense_token_flops(profile, positions)
    saved = figures["flop_share_saved"] * dense
    return {"ideal_speedup": float(dense.sum() / (dense.sum() - saved.sum())),
            "flop_share_saved": float(saved.sum() / dense.sum()),
            "param_skip": float(figures["param_skip"].mean()),
            "net_param_skip": float(figures["net_param_skip"].mean()),
            "ffn_executed_share": float(executed.mean())}


def weight_read_ideal(executed: np.ndarray, batch: int, profile: ComputeProfile) -> float:
    """Ideal decode speed-up if a step's time were the weights it reads (small-batch decoding is bound by
    memory bandwidth). ``executed``: (R, steps * batch), step-major. A block's FFN weights are read when
    *any* row of the batch runs it, its adapter when any row skips it; the shared router weights are
    counted once per step (they are small enough to stay in cache)."""
    R, n = executed.shape
    per_step = executed.reshape(R, n // batch, batch)
    ffn_read = per_step.any(axis=2).sum(axis=0)  # (steps,) blocks whose FFN some row ran
    adapter_read = (~per_step).any(axis=2).sum(axis=0)  # (steps,) blocks whose adapter some row ran
    p = profile
    dense = p.linear_params
    routed = (p.linear_params - R * p.ffn_params + ffn_read * p.ffn_params + adapter_read * p.adapter_params
              + p.router_params)
    return float(dense * len(ffn_read) / routed.sum())


def _dense_call(hero) -> RoutingCall:
    return hero.new_call("dense", record=False)


# -- sections ----------------------------------------------------------------------------------------
def bench_prefill(hero, routed: list[RoutedConfig], pool: torch.Tensor, cfg: BenchConfig,
                  say: Callable[[str], None]) -> list[dict[str, Any]]:
    rows = []
    for batch, length in cfg.sizes:
        ids = batch_of(pool, batch, length).to(hero.device)

        def run(make_call, ids=ids):
            def fn():
                with torch.no_grad():
                    hero.forward(ids, None, make_call(), use_cache=False)
            return fn

        fns = {"dense": run(lambda: _dense_call(hero))}
        for rc in routed:
            fns[rc.name] = run(lambda rc=rc: rc.call(record=False))
        times = measure(fns, cfg.reps, cfg.warmup, hero.device)
        positions = np.tile(np.arange(length), batch)
        row = {"batch": batch, "tokens": length, "n_tokens": batch * length, **time_stats(times), "routed": {}}
        for rc in routed:
            _, executed = _recorded_pass(hero, rc, ids)
            figures = compute_figures(executed.cpu().numpy(), positions, hero.profile)
            speedup = paired_ratio(times["dense"]["wall"], times[rc.name]["wall"])
            figures.update(speedup=speedup, speedup_cpu=paired_ratio(times["dense"]["cpu"], times[rc.name]["cpu"]),
                           efficiency=speedup["median"] / figures["ideal_speedup"])
            row["routed"][rc.name] = figures
        rows.append(row)
        say(f"prefill {batch}x{length}: dense {row['time_s']['dense']['median']:.3f}s · " + " · ".join(
            f"{n} x{f['speedup']['median']:.2f} (ideal x{f['ideal_speedup']:.2f})" for n, f in row["routed"].items()))
    return rows


def decode_loop(hero, make_call: Callable[[], RoutingCall], prompts: torch.Tensor, n_new: int,
                on_done: Callable[[RoutingCall], None] | None = None) -> tuple[float, float]:
    """Greedy batched decoding with a DynamicCache from equal-length prompts (B, P), ``n_new`` steps.

    Times the decode steps only (the prefill is left out). Every row decodes ``n_new`` tokens."""
    from transformers import DynamicCache

    call = make_call()
    cache = DynamicCache(config=hero.model.config)
    with torch.no_grad():
        logits = hero.forward(prompts, None, call, cache=cache, use_cache=True, logits_to_keep=1)
        next_ids = logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)
        stop = _timer(hero.device)
        for _ in range(n_new):
            logits = hero.forward(next_ids, None, call, cache=cache, use_cache=True)
            next_ids = logits[:, -1].argmax(-1, keepdim=True)
        elapsed = stop()
    if on_done is not None:
        on_done(call)
    return elapsed


ROUTER_ONLY = "router only (τ = 0)"


def overhead_bound(ideal: float, overhead: float) -> float:
    """The speed-up the FLOP ideal leaves once the router's measured per-step overhead is added back:
    a routed step costs ``1 / ideal`` of a dense step in FLOPs plus ``overhead`` of one in latency."""
    return 1.0 / (1.0 / ideal + max(0.0, overhead))


def bench_decode(hero, routed: list[RoutedConfig], pool: torch.Tensor, cfg: BenchConfig,
                 say: Callable[[str], None]) -> list[dict[str, Any]]:
    rows = []
    for batch in cfg.decode_batches:
        prompts = batch_of(pool, batch, cfg.decode_prompt, offset=7).to(hero.device)
        fns = {"dense": lambda p=prompts: decode_loop(hero, lambda: _dense_call(hero), p, cfg.decode_tokens)}
        for rc in routed:
            fns[rc.name] = lambda rc=rc, p=prompts: decode_loop(hero, lambda: rc.call(record=False), p,
                                                                cfg.decode_tokens)
        if routed:  # the router and its bookkeeping with every FFN still run (tau = 0): its pure overhead
            every_ffn = dataclasses.replace(routed[0], tau=0.0)
            fns[ROUTER_ONLY] = lambda p=prompts, rc=every_ffn: decode_loop(hero, lambda: rc.call(record=False), p,
                                                                           cfg.decode_tokens)
        times = measure(fns, cfg.reps, cfg.warmup, hero.device)
        n = batch * cfg.decode_tokens
        row = {"batch": batch, "prompt_tokens": cfg.decode_prompt, "new_tokens": cfg.decode_tokens,
               "time_s": {k: stats(v["wall"]) for k, v in times.items()},
               "tokens_per_s": {k: stats([n / t for t in v["wall"]]) for k, v in times.items()}, "routed": {}}
        # The FLOP ideal charges the router its (tiny) FLOPs; at one token per step its cost is the latency
        # of about a hundred small operations per block instead. overhead = router-only / dense - 1, this run.
        overhead = (paired_ratio(times[ROUTER_ONLY]["wall"], times["dense"]["wall"])["median"] - 1.0
                    if routed else None)
        row["router_overhead"] = overhead
        for rc in routed:
            recorded: list[RoutingCall] = []
            decode_loop(hero, lambda rc=rc: rc.call(record=True), prompts, cfg.decode_tokens, on_done=recorded.append)
            steps = recorded[0].passes[1:]  # pass 0 is the prefill
            executed = np.concatenate([torch.stack([r.executed for r in p.records]).cpu().numpy() for p in steps], 1)
            positions = np.repeat(cfg.decode_prompt + np.arange(len(steps)), batch)
            figures = compute_figures(executed, positions, hero.profile)
            speedup = paired_ratio(times["dense"]["wall"], times[rc.name]["wall"])
            figures.update(speedup=speedup, speedup_cpu=paired_ratio(times["dense"]["cpu"], times[rc.name]["cpu"]),
                           efficiency=speedup["median"] / figures["ideal_speedup"],
                           weight_read_ideal=weight_read_ideal(executed, batch, hero.profile),
                           overhead_bound=overhead_bound(figures["ideal_speedup"], overhead))
            row["routed"][rc.name] = figures
        rows.append(row)
        say(f"decode batch {batch}: dense {row['tokens_per_s']['dense']['median']:.1f} tok/s · " + " · ".join(
            f"{nm} {row['tokens_per_s'][nm]['median']:.1f} tok/s (x{f['speedup']['median']:.2f}, "
            f"ideal x{f['ideal_speedup']:.2f})" for nm, f in row["routed"].items()))
    return rows


def bench_recording(hero, rc: RoutedConfig, pool: torch.Tensor, cfg: BenchConfig,
                    say: Callable[[str], None]) -> dict[str, Any]:
    batch, length = cfg.record_shape
    ids = batch_of(pool, batch, length, offset=13).to(hero.device)
    def run(record: bool):
        def fn():
            with torch.no_grad():
                hero.forward(ids, None, rc.call(record=record), use_cache=False)
        return fn

    def assemble():  # forward with recording, then build one RoutingTrace per row (what hero.trace does)
        call = rc.call(record=True)
        with torch.no_grad():
            hero.forward(ids, None, call, use_cache=False)
        for b in range(batch):
            hero._assemble(call, b, ids[b].tolist(), [])

    times = measure({"record_false": run(False), "record_true": run(True), "record_and_assemble": assemble},
                    cfg.reps, cfg.warmup, hero.device)
    overhead = paired_ratio(times["record_true"]["wall"], times["record_false"]["wall"])
    out = {"router": rc.name, "batch": batch, "tokens": length,
           **time_stats(times),
           "record_ratio": overhead,
           "record_ratio_cpu": paired_ratio(times["record_true"]["cpu"], times["record_false"]["cpu"]),
           "assemble_ratio": paired_ratio(times["record_and_assemble"]["wall"], times["record_false"]["wall"])}
    say(f"recording {batch}x{length}: record=True / record=False x{overhead['median']:.3f}, "
        f"with trace assembly x{out['assemble_ratio']['median']:.3f}")
    return out


def bench_overhead(hero, pool: torch.Tensor, cfg: BenchConfig, say: Callable[[str], None]) -> dict[str, Any]:
    from .inject import unwrapped

    batch, length = cfg.overhead_shape
    ids = batch_of(pool, batch, length, offset=29).to(hero.device)

    def bare():
        with unwrapped(hero.model), torch.no_grad():
            hero.model(input_ids=ids, use_cache=False)

    def no_call():
        with torch.no_grad():
            hero.model(input_ids=ids, use_cache=False)

    def dense():
        with torch.no_grad():
            hero.forward(ids, None, _dense_call(hero), use_cache=False)

    with torch.no_grad():
        with unwrapped(hero.model):
            reference = hero.model(input_ids=ids, use_cache=False).logits
        diff = float((hero.forward(ids, None, _dense_call(hero), use_cache=False) - reference).abs().max())
    del reference
    times = measure({"bare": bare, "wrapped_no_call": no_call, "dense_variant": dense}, cfg.reps, cfg.warmup,
                    hero.device)
    ratio = paired_ratio(times["dense_variant"]["wall"], times["bare"]["wall"])
    out = {"batch": batch, "tokens": length, **time_stats(times), "dense_over_bare": ratio,
           "dense_over_bare_cpu": paired_ratio(times["dense_variant"]["cpu"], times["bare"]["cpu"]),
           "no_call_over_bare": paired_ratio(times["wrapped_no_call"]["wall"], times["bare"]["wall"]),
           "max_abs_logit_diff": diff}
    say(f"overhead {batch}x{length}: dense variant / bare x{ratio['median']:.3f} (max |logit diff| {diff:.2e})")
    return out


def bench_training(hero, rc: RoutedConfig, pool: torch.Tensor, cfg: BenchConfig,
                   say: Callable[[str], None]) -> dict[str, Any]:
    """One routed training step as ``train.py`` takes it (forward, LM loss + alpha * usage, backward, clip,
    AdamW) on a *copy* of the router, vs a dense forward + backward to the input embeddings.

    Two gate gradients, as ``train.py --gate-gradient`` offers: ``straight_through`` (its default: both
    branches run on every token, no compute is skipped in training) and ``paper`` (the hard branch)."""
    from .train import usage_penalty

    batch, length = cfg.train_shape
    ids = batch_of(pool, batch, length, offset=41).to(hero.device)
    router = copy.deepcopy(rc.router).train()
    for p in router.parameters():
        p.requires_grad_(True)
    optimizer = torch.optim.AdamW(router.parameters(), lr=1e-4, weight_decay=0.01)
    embed = hero.model.get_input_embeddings()

    def lm_loss(logits):
        return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())

    def routed_step(straight_through: bool):
        def fn():
            call = rc.call(record=True, keep_gates=True, router=router, straight_through=straight_through)
            with torch.enable_grad():
                logits = hero.forward(ids, None, call, use_cache=False)
                loss = lm_loss(logits) + cfg.train_alpha * usage_penalty(call.passes[-1].gates)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(router.parameters(), 1.0)
                optimizer.step()
        return fn

    def dense_step():
        call = _dense_call(hero)
        with torch.enable_grad():
            inputs = embed(ids).detach().requires_grad_(True)
            with routing_call(call):
                logits = hero.model(inputs_embeds=inputs, use_cache=False).logits
            lm_loss(logits).backward()

    fns = {"dense": dense_step, "routed": routed_step(True), "routed_paper": routed_step(False)}
    times = measure(fns, cfg.reps, cfg.warmup, hero.device)
    ratio = paired_ratio(times["routed"]["wall"], times["dense"]["wall"])
    out = {"router": rc.name, "batch": batch, "tokens": length,
           **time_stats(times),
           "routed_over_dense": ratio,
           "routed_over_dense_cpu": paired_ratio(times["routed"]["cpu"], times["dense"]["cpu"]),
           "paper_over_dense": paired_ratio(times["routed_paper"]["wall"], times["dense"]["wall"]),
           "paper_over_dense_cpu": paired_ratio(times["routed_paper"]["cpu"], times["dense"]["cpu"]),
           "tokens_per_s": {k: stats([batch * length / t for t in v["wall"]]) for k, v in times.items()}}
    say(f"training {batch}x{length}: routed step / dense fwd+bwd x{ratio['median']:.3f} (straight-through), "
        f"x{out['paper_over_dense']['median']:.3f} (hard branch)")
    return out


# -- memory (subprocess per configuration) ------------------------------------------------------------
def _rss_bytes() -> int:
    import psutil  # a dependency of accelerate, which hero_core requires

    return int(psutil.Process().memory_info().rss)


def _rss_split() -> dict[str, int]:
    """Resident anonymous and file-backed memory (bytes), Linux only: {} elsewhere. Weights loaded from
    safetensors are memory-mapped, so they show up as *file* pages."""
    out = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(("RssAnon:", "RssFile:")):
                out[line.split(":")[0]] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return out


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (Linux >= 4.0: ``5`` to ``/proc/self/clear_refs``)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _peak_rss_bytes() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # since process start: includes imports
    return int(peak if sys.platform == "darwin" else peak * 1024)


def memory_probe(backbone: str | None, quantization: str | None, batch: int, length: int, threads: int,
                 device: str = "cpu") -> dict:
    """Run in a fresh process: load the backbone, run one forward, report resident memory (bytes).

    Everything loading needs is imported first (the model class, bitsandbytes), and the peak mark is
    reset, so the deltas are the backbone's weights and the forward's activations, not import costs."""
    torch.set_num_threads(threads)
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from .backbones import embedded_model_dir, load_backbone

    model_dir = embedded_model_dir() if backbone is None else Path(backbone)
    config = AutoConfig.from_pretrained(model_dir)
    AutoModelForCausalLM._model_mapping[type(config)]  # imports the modelling module
    AutoTokenizer.from_pretrained(model_dir)
    if quantization == "nf4":
        import bitsandbytes  # noqa: F401
        import transformers.integrations.bitsandbytes  # noqa: F401
    dev = torch.device(device)
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    base, base_split = _rss_bytes(), _rss_split()
    exact_peak = _reset_peak_rss()
    t0 = time.perf_counter()
    bb = load_backbone(backbone, quantization=quantization, device=device)
    load_s = time.perf_counter() - t0
    gc.collect()
    after_load, peak_load, load_split = _rss_bytes(), _peak_rss_bytes(), _rss_split()
    weights = sum(p.numel() * p.element_size() for p in bb.model.parameters())
    weights += sum(b.numel() * b.element_size() for b in bb.model.buffers())
    ids = torch.randint(0, bb.model.config.vocab_size, (batch, length), generator=torch.Generator().manual_seed(0))
    ids = ids.to(dev)
    with torch.no_grad():
        bb.model(input_ids=ids, use_cache=False)  # first forward (bitsandbytes may repack here)
        stop = _timer(dev)
        bb.model(input_ids=ids, use_cache=False)
        forward_s = stop()[0]
    extra = {"device_peak_bytes": int(torch.cuda.max_memory_allocated(dev))} if dev.type == "cuda" else {}
    split = _rss_split()
    for key, name in (("RssAnon", "anon"), ("RssFile", "file")):
        if key in split and key in base_split:
            extra[f"{name}_delta_load"] = load_split[key] - base_split[key]
            extra[f"{name}_delta_forward"] = split[key] - base_split[key]
    return {**extra, "quantization": quantization or "none", "baseline_rss": base, "rss_after_load": after_load,
            "loaded_delta": after_load - base, "peak_delta_load": peak_load - base,
            "peak_delta_forward": _peak_rss_bytes() - base, "weight_bytes": int(weights), "load_s": load_s,
            "forward_s": forward_s, "forward_shape": [batch, length], "peak_is_exact": exact_peak}


def _memory_probe_main() -> None:
    args = json.loads(sys.argv[1])
    print("HERO_BENCH_MEMORY " + json.dumps(memory_probe(**args)), flush=True)


def bench_memory(backbone_dir: str | None, cfg: BenchConfig, threads: int, say: Callable[[str], None],
                 device: str = "cpu") -> dict:
    out: dict[str, Any] = {"forward_shape": list(cfg.memory_shape), "configs": {}}
    have_bnb = importlib.util.find_spec("bitsandbytes") is not None
    for quant in (None, "nf4"):
        key = quant or "fp32"
        if quant == "nf4" and not have_bnb:
            out["configs"][key] = {"skipped": "bitsandbytes is not installed"}
            continue
        args = {"backbone": backbone_dir, "quantization": quant, "batch": cfg.memory_shape[0],
                "length": cfg.memory_shape[1], "threads": threads, "device": device}
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        code = "from hero_core.bench import _memory_probe_main; _memory_probe_main()"
        proc = subprocess.run([sys.executable, "-c", code, json.dumps(args)], capture_output=True, text=True,
                              env=env, timeout=1800)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("HERO_BENCH_MEMORY ")), None)
        if proc.returncode != 0 or line is None:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            out["configs"][key] = {"skipped": f"probe failed (exit {proc.returncode}): {' | '.join(tail)}"}
        else:
            out["configs"][key] = json.loads(line.split(" ", 1)[1])
    fp, nf = out["configs"].get("fp32", {}), out["configs"].get("nf4", {})
    if "peak_delta_forward" in fp and "peak_delta_forward" in nf:
        out["nf4_over_fp32_peak"] = nf["peak_delta_forward"] / fp["peak_delta_forward"]
        out["nf4_over_fp32_weights"] = nf["weight_bytes"] / fp["weight_bytes"]
    mib = lambda c: f"{c['peak_delta_forward'] / 2**20:.0f} MiB" if "peak_delta_forward" in c else c.get("skipped")  # noqa: E731
    say(f"memory: fp32 peak {mib(fp)} · nf4 peak {mib(nf)}")
    return out


# -- targets -----------------------------------------------------------------------------------------
def _target(key: str, value: float | None, router: str = "", note: str = "", shape: str = "") -> dict[str, Any]:
    text, threshold, direction = TARGETS[key]
    met = None if value is None or not math.isfinite(value) else (
        value >= threshold if direction == ">=" else value <= threshold)
    return {"key": key, "description": text.format(router=router, shape=shape), "router": router or None,
            "value": value,
            "threshold": threshold, "direction": direction, "met": met, "note": note}


def evaluate_targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    targets = []
    names = list(result.get("routers", {}))
    prefill = result.get("prefill") or []
    if prefill and names:
        exact = [r for r in prefill if (r["batch"], r["tokens"]) == TARGET_PREFILL_SHAPE]
        row = exact[0] if exact else max(prefill, key=lambda r: r["n_tokens"])
        want = "x".join(map(str, TARGET_PREFILL_SHAPE))
        note = "" if exact else f"the target is set at {want}, which this run did not measure; largest shape shown"
        router = "hero-40" if "hero-40" in names else names[-1]
        targets.append(_target("prefill_efficiency", row["routed"][router]["efficiency"], router, note,
                               shape=f"{row['batch']}x{row['tokens']}"))
    decode = [r for r in result.get("decode") or [] if r["batch"] == 1]
    for name in names if decode else []:
        targets.append(_target("decode_efficiency", decode[0]["routed"][name]["efficiency"], name))
    if result.get("recording"):
        targets.append(_target("recording_overhead", result["recording"]["record_ratio"]["median"] - 1.0,
                               result["recording"]["router"]))
    if result.get("overhead"):
        targets.append(_target("wrapper_overhead", result["overhead"]["dense_over_bare"]["median"] - 1.0))
    return targets


# -- driver ------------------------------------------------------------------------------------------
def _backbone_dir_for_probe(hero, backbone_arg: str | None, tmp: Path) -> str | None:
    """A directory the memory probe can load: the embedded model, the user's path, or a saved copy."""
    from .backbones import EMBEDDED_NAME
    from .inject import unwrapped

    if backbone_arg:
        return str(backbone_arg)
    if hero.backbone.name == EMBEDDED_NAME:
        return None
    with unwrapped(hero.model):  # e.g. the tiny test model: save it so a fresh process can load it
        hero.model.save_pretrained(tmp / "backbone")
    hero.tokenizer.save_pretrained(tmp / "backbone")
    return str(tmp / "backbone")


def resolve_threads(threads: int | None) -> int:
    if threads is None:
        env = os.environ.get("OMP_NUM_THREADS", "")
        threads = int(env) if env.isdigit() and int(env) > 0 else available_cores()
    if threads < 1:
        raise ValueError(f"threads must be positive, got {threads}")
    return threads


def run_benchmark(cfg: BenchConfig, hero=None, *, backbone: str | None = None, quantization: str | None = None,
                  device: str = "auto", say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every section of ``cfg`` and return the result as a JSON-ready dict.

    ``hero``: a :class:`~hero_core.model.HeroModel` to measure (e.g. ``tiny_hero()`` in tests); by default
    the backbone named by ``backbone`` (the embedded SmolLM2-135M) is loaded with a fresh router."""
    say = say or (lambda text: print(text, file=sys.stderr, flush=True))
    threads = resolve_threads(cfg.threads)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _run(cfg, hero, threads, backbone=backbone, quantization=quantization, device=device, say=say)
    finally:
        torch.set_num_threads(previous_threads)


def _run(cfg: BenchConfig, hero, threads: int, *, backbone, quantization, device, say) -> dict[str, Any]:
    load_start = load_average()
    started = time.time()
    if hero is None:
        from .backbones import load_backbone
        from .model import HeroModel, fresh_router

        bb = load_backbone(backbone, quantization=quantization, device=device)
        hero = HeroModel(bb, fresh_router(bb), "bench")
    cores = available_cores()
    if load_start and load_start[0] > max(0.5, cores - threads):
        say(f"warning: load average {load_start[0]} on {cores} cores before the benchmark: other processes "
            f"compete for the CPU, timings will be slow and noisy (process CPU time is recorded as well)")
    result: dict[str, Any] = {
        "schema": SCHEMA, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "config": _config_dict(cfg),
        "machine": machine_info(hero.device),
        "load": {"start": load_start, "sections": {}},
        "model": {"backbone": hero.backbone.name, "quantization": hero.backbone.quantization,
                  "n_layers": hero.profile.n_layers, "n_routed": hero.config.n_routed,
                  "profile": hero.profile.to_dict()},
    }
    pool = token_pool(hero.tokenizer, max(max(b * t for b, t in cfg.sizes), 8 * cfg.decode_prompt, 2048))
    # Synthetic routers are calibrated on the prompt text the bench times (random routers react strongly to
    # the kind of text, and their names promise a param skip); trained checkpoints are never recalibrated.
    calibration = batch_of(pool, 2, 256)
    routed = load_routed_configs(hero, list(cfg.checkpoints), calibration, cfg.seed, say)
    result["routers"] = {rc.name: rc.describe() for rc in routed}

    def section(name: str, fn: Callable[[], Any]) -> None:
        if name not in cfg.sections:
            return
        result["load"]["sections"][name] = load_average()
        t0 = time.perf_counter()
        result[name] = fn()
        result.setdefault("section_wall_s", {})[name] = round(time.perf_counter() - t0, 2)

    first = routed[0] if routed else None
    section("prefill", lambda: bench_prefill(hero, routed, pool, cfg, say))
    section("decode", lambda: bench_decode(hero, routed, pool, cfg, say))
    if first is not None:
        section("recording", lambda: bench_recording(hero, first, pool, cfg, say))
    section("overhead", lambda: bench_overhead(hero, pool, cfg, say))
    if first is not None:
        section("training", lambda: bench_training(hero, first, pool, cfg, say))
    if cfg.memory and "memory" in cfg.sections:
        with tempfile.TemporaryDirectory(prefix="hero-bench-") as tmp:
            probe_dir = _backbone_dir_for_probe(hero, backbone, Path(tmp))
            section("memory", lambda: bench_memory(probe_dir, cfg, threads, say, device=str(hero.device)))
    result["load"]["end"] = load_average()
    result["wall_s"] = round(time.time() - started, 2)
    result["targets"] = evaluate_targets(result)
    return result


def _config_dict(cfg: BenchConfig) -> dict[str, Any]:
    d = asdict(cfg)
    for key in ("sizes",):
        d[key] = [f"{b}x{t}" for b, t in d[key]]
    for key in ("record_shape", "overhead_shape", "train_shape", "memory_shape"):
        d[key] = f"{d[key][0]}x{d[key][1]}"
    d["sections"] = list(d["sections"])
    return d


# -- CLI ---------------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=Path("bench.json"), help="write the results here (JSON)")
    p.add_argument("--quick", action="store_true", help="small sizes and 3 reps: a smoke run of every section")
    p.add_argument("--sizes", default=None,
                   help="prefill shapes BATCHxTOKENS, comma-separated (default 4x128,4x512,1x2048)")
    p.add_argument("--reps", type=int, default=None, help="timed repetitions per configuration (default 5, quick 3)")
    p.add_argument("--warmup", type=int, default=None, help="untimed warm-up runs per configuration (default 1)")
    p.add_argument("--checkpoints", default="hero-25,hero-40",
                   help="routed configurations (bundled names or directories); a missing one is replaced by a "
                        "synthetic router calibrated to its name's param skip")
    p.add_argument("--decode-batches", default=None, help="comma-separated decode batch sizes (default 1,8)")
    p.add_argument("--decode-tokens", type=int, default=None, help="tokens decoded per row (default 32)")
    p.add_argument("--decode-prompt", type=int, default=None, help="prompt tokens before decoding (default 64)")
    p.add_argument("--train-shape", default=None, help="training step shape BATCHxTOKENS (default 4x128)")
    p.add_argument("--record-shape", default=None, help="recording-cost shape (default 4x512)")
    p.add_argument("--overhead-shape", default=None, help="wrapper-overhead shape (default 4x512)")
    p.add_argument("--sections", default=None, help="comma-separated subset of: " + ",".join(BenchConfig().sections))
    p.add_argument("--no-memory", action="store_true", help="skip the fp32 vs NF4 memory subprocesses")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads (default: $OMP_NUM_THREADS, else the available cores)")
    p.add_argument("--backbone", default=None, help="local HF model directory (default: embedded SmolLM2-135M)")
    p.add_argument("--quantization", choices=["nf4"], default=None, help="time the backbone in 4-bit NF4")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    p.add_argument("--seed", type=int, default=0)


def config_from_args(args) -> BenchConfig:
    overrides: dict[str, Any] = {}
    if args.sizes:
        overrides["sizes"] = [parse_shape(s) for s in args.sizes.split(",") if s.strip()]
    for name in ("reps", "warmup", "decode_tokens", "decode_prompt", "threads", "seed"):
        if getattr(args, name, None) is not None:
            overrides[name] = getattr(args, name)
    if args.decode_batches:
        overrides["decode_batches"] = [int(x) for x in args.decode_batches.split(",") if x.strip()]
    for name in ("train_shape", "record_shape", "overhead_shape"):
        if getattr(args, name, None):
            overrides[name] = parse_shape(getattr(args, name))
    overrides["checkpoints"] = [c.strip() for c in args.checkpoints.split(",") if c.strip()]
    if args.sections:
        overrides["sections"] = tuple(s.strip() for s in args.sections.split(",") if s.strip())
    if args.no_memory:
        overrides["memory"] = False
    return BenchConfig.quick_preset(**overrides) if args.quick else BenchConfig(**overrides)


def run_cli(args, hero=None) -> int:
    cfg = config_from_args(args)
    if os.environ.get("HERO_LENS_TINY") == "1" and hero is None:
        from .tiny import tiny_hero

        hero = tiny_hero()
    result = run_benchmark(cfg, hero, backbone=args.backbone, quantization=args.quantization, device=args.device)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    met = [t for t in result["targets"] if t["met"] is not None]
    print(f"bench written to {args.out} ({result['wall_s']:.0f} s; targets met {sum(t['met'] for t in met)}/"
          f"{len(met)}; load average {result['load']['start']} -> {result['load']['end']})")
    return 0
