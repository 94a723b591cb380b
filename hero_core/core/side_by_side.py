"""Two independent forward passes at once, on a CPU with a core to spare.

``trace(…, quality=True)`` runs the routed model and the dense model on the same tokens. With torch on one
intra-op thread per process (the app's default on a small machine, where more threads spin-wait on each other),
the second core sits idle while the passes run one after the other; running the dense pass on a second Python
thread (torch releases the GIL inside its operators) takes the two passes in about the time of one and a half
(bf16, 130 tokens, 1 thread each: 0.37 s against 0.63 s).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch

A = TypeVar("A")
B = TypeVar("B")


def spare_core(device: torch.device) -> bool:
    """Whether a second pass can run beside the first without oversubscribing the CPU: a CPU device, torch's
    intra-op threads at most half the cores, and no autocast region (a new thread would not inherit it)."""
    if device.type != "cpu" or torch.is_autocast_enabled("cpu"):
        return False
    return 2 * torch.get_num_threads() <= (os.cpu_count() or 1)


def side_by_side(first: Callable[[], A], second: Callable[[], B], *, together: bool) -> tuple[A, B]:
    """``(first(), second())``, both under ``torch.no_grad``; with ``together`` the second runs on its own thread
    meanwhile (grad mode is per thread, so it is set there too). An exception in either is raised here."""

    def without_grad(fn: Callable[[], B]) -> B:
        with torch.no_grad():
            return fn()

    if not together:
        return without_grad(first), without_grad(second)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hero-lens-second-pass") as pool:
        pending = pool.submit(without_grad, second)
        return without_grad(first), pending.result()
