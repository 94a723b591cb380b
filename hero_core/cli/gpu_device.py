"""What both GPU checks (:mod:`hero_core.cli.gpu_check`, :mod:`hero_core.cli.own_model_check`) time and measure a device
with: the prompt they route, a synchronise that waits for CUDA work, timed repetitions, the peak memory and the
device's name for the report."""

from __future__ import annotations

import platform
import time

import torch

PROMPT = "The history of the printing press begins in the fifteenth century, when movable type made books cheaper."


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device: torch.device, reps: int) -> list[float]:
    fn()  # warm-up
    times = []
    for _ in range(reps):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return times


def peak_gib(device: torch.device) -> float | None:
    """Peak allocated device memory since the last reset, GiB (None on CPU)."""
    if device.type != "cuda":
        return None
    return torch.cuda.max_memory_allocated(device) / 2**30


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def device_info(device: torch.device) -> str:
    """The device's name for the report: the GPU's, or the CPU's as the platform reports it."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor()
