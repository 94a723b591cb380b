"""Independent forward passes at once, on a CPU with cores to spare.

``trace(…, quality=True)`` runs the routed model and the dense model on the same tokens. With torch on one
intra-op thread per process (the app's default on a small machine, where more threads spin-wait on each other),
the second core sits idle while the passes run one after the other; running the dense pass on a second Python
thread (torch releases the GIL inside its operators) takes the two passes in about the time of one and a half
(bf16, 130 tokens, 1 thread each: 0.37 s against 0.63 s). Compare's runs after its first (each one's tau search
and trace) are independent the same way: :func:`each_side_by_side` spreads them over the cores.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch

A = TypeVar("A")
B = TypeVar("B")


def passes_at_once(device: torch.device) -> int:
    """How many passes can run at once without oversubscribing the CPU: the cores over torch's intra-op threads on a
    CPU device outside an autocast region (a new thread would not inherit it); 1 elsewhere."""
    if device.type != "cpu" or torch.is_autocast_enabled("cpu"):
        return 1
    return max(1, (os.cpu_count() or 1) // torch.get_num_threads())


def spare_core(device: torch.device) -> bool:
    """Whether a second pass can run beside the first (:func:`passes_at_once` is at least 2)."""
    return passes_at_once(device) >= 2


def side_by_side(first: Callable[[], A], second: Callable[[], B], *, together: bool) -> tuple[A, B]:
    """``(first(), second())``, both under ``torch.no_grad``; with ``together`` the second runs on its own thread
    meanwhile (grad mode is per thread, so it is set there too). An exception in either is raised here."""
    if not together:
        return _without_grad(first), _without_grad(second)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hero-lens-second-pass") as pool:
        pending = pool.submit(_without_grad, second)
        return _without_grad(first), pending.result()


def each_side_by_side(fn: Callable[[A], B], items: Sequence[A], *, at_once: int) -> list[B]:
    """``[fn(x) for x in items]`` in order, up to ``at_once`` of them running together on threads of their own
    (each under ``torch.no_grad``). An exception in any is raised here."""
    if at_once <= 1 or len(items) <= 1:
        return [_without_grad(lambda x=x: fn(x)) for x in items]
    with ThreadPoolExecutor(max_workers=min(at_once, len(items)), thread_name_prefix="hero-lens-pass") as pool:
        return list(pool.map(lambda x: _without_grad(lambda: fn(x)), items))


def _without_grad(fn: Callable[[], B]) -> B:
    with torch.no_grad():  # grad mode is per thread
        return fn()
