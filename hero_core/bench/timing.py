"""Timing and machine facts: interleaved repetitions (:func:`measure`), their statistics and paired
ratios, the thread count and load average, and what the machine is."""

from __future__ import annotations

import gc
import importlib.metadata
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hero_core.backbones.threads import usable_cores


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


def paired_ratios(times: dict[str, dict[str, list[float]]], name: str, numerator: str, denominator: str, *,
                  cpu: bool = True) -> dict[str, dict[str, Any]]:
    """``name``: the wall-time :func:`paired_ratio` of two configurations :func:`measure` timed, and ``name_cpu``
    the same of their CPU time (unless ``cpu`` is False): the figures a bench section reports."""
    ratios = {name: paired_ratio(times[numerator]["wall"], times[denominator]["wall"])}
    if cpu:
        ratios[f"{name}_cpu"] = paired_ratio(times[numerator]["cpu"], times[denominator]["cpu"])
    return ratios


# -- machine -----------------------------------------------------------------------------------------
def proc_lines(path: str, prefix: str | tuple[str, ...]) -> list[str]:
    """The lines of a /proc file that start with ``prefix`` (one, or a tuple of them); none where the file cannot
    be read (not on Linux)."""
    try:
        text = Path(path).read_text()
    except OSError:
        return []
    return [line for line in text.splitlines() if line.startswith(prefix)]


def _cpu_model() -> str:
    found = proc_lines("/proc/cpuinfo", "model name")
    return found[0].split(":", 1)[1].strip() if found else platform.processor() or platform.machine()


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def available_cores() -> int:
    """The cores this process can use: affinity mask and cgroup quota (hero_core.backbones.threads)."""
    return usable_cores()


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


def start_timer(device: torch.device) -> Callable[[], tuple[float, float]]:
    _sync(device)
    w0, c0 = time.perf_counter(), time.process_time()

    def stop() -> tuple[float, float]:
        _sync(device)
        return time.perf_counter() - w0, time.process_time() - c0
    return stop


def resolve_threads(threads: int | None) -> int:
    if threads is None:
        env = os.environ.get("OMP_NUM_THREADS", "")
        threads = int(env) if env.isdigit() and int(env) > 0 else available_cores()
    if threads < 1:
        raise ValueError(f"threads must be positive, got {threads}")
    return threads
