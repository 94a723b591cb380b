"""Independent forward passes at once, on a CPU with cores to spare.

``trace(…, quality=True)`` runs the routed model and the dense model on the same tokens. With torch on one
intra-op thread per process (the app's default on a small machine, where more threads spin-wait on each other),
the second core sits idle while the passes run one after the other; running the dense pass on a second Python
thread (torch releases the GIL inside its operators) takes the two passes in about the time of one and a half
(bf16, 130 tokens, 1 thread each: 0.37 s against 0.63 s). Compare's runs after its first (each one's tau search
and trace) are independent the same way: :func:`each_side_by_side` spreads them over the cores.

The extra threads come from one process-wide budget (``hero_core.backbones.threads.PASSES``, sized to the usable
cores: affinity and cgroup quota, not the machine's count): Compare's runs side by side, each one's trace asking
for a second thread of its own, still run at most as many passes as there are cores. Each thread runs in a copy
of its caller's context (context variables, e.g. ``one_pass_at_a_time``, reach it).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

import torch

from hero_core.backbones.threads import PASSES, passes_at_once

A = TypeVar("A")
B = TypeVar("B")
__all__ = ["each_side_by_side", "passes_at_once", "side_by_side", "spare_core"]
CPU = torch.device("cpu")


def spare_core(device: torch.device) -> bool:
    """Whether a second pass can run beside the first (:func:`passes_at_once` is at least 2)."""
    return passes_at_once(device) >= 2


def side_by_side(first: Callable[[], A], second: Callable[[], B], *, together: bool,
                 device: torch.device = CPU) -> tuple[A, B]:
    """``(first(), second())``, both under ``torch.no_grad``; with ``together`` the second runs on its own thread
    meanwhile where the budget has a core free (grad mode is per thread, so it is set there too). An exception in
    either is raised here."""
    with PASSES.extra(1 if together else 0, device) as extra:
        if not extra:
            return _without_grad(first), _without_grad(second)
        box = _Box(second)
        thread = threading.Thread(target=contextvars.copy_context().run, args=(box.run,),
                                  name="hero-second-pass", daemon=True)
        thread.start()
        try:
            head = _without_grad(first)
        finally:
            thread.join()
        return head, box.result()


def each_side_by_side(fn: Callable[[A], B], items: Sequence[A], *, at_once: int,
                      device: torch.device = CPU) -> list[B]:
    """``[fn(x) for x in items]`` in order, up to ``at_once`` of them running together (this thread and extra
    threads the budget grants, each under ``torch.no_grad``). An exception in any is raised here."""
    items = list(items)
    with PASSES.extra(min(at_once, len(items)) - 1, device) as extra:
        if not extra:
            return [_without_grad(lambda x=x: fn(x)) for x in items]
        results: list = [None] * len(items)
        errors: list[BaseException] = []
        cursor = iter(range(len(items)))
        lock = threading.Lock()

        def work() -> None:
            while not errors:
                with lock:
                    i = next(cursor, None)
                if i is None:
                    return
                try:
                    results[i] = _without_grad(lambda i=i: fn(items[i]))
                except BaseException as err:  # noqa: BLE001 - raised on the caller's thread below
                    errors.append(err)

        threads = [threading.Thread(target=contextvars.copy_context().run, args=(work,), name="hero-pass",
                                    daemon=True) for _ in range(extra)]
        for thread in threads:
            thread.start()
        try:
            work()
        finally:
            for thread in threads:
                thread.join()
        if errors:
            raise errors[0]
        return results


class _Box:
    """A call's result or exception, run on another thread."""

    def __init__(self, fn: Callable[[], B]) -> None:
        self.fn, self.value, self.error = fn, None, None

    def run(self) -> None:
        try:
            self.value = _without_grad(self.fn)
        except BaseException as err:  # noqa: BLE001 - raised by result()
            self.error = err

    def result(self):
        if self.error is not None:
            raise self.error
        return self.value


def _without_grad(fn: Callable[[], B]) -> B:
    with torch.no_grad():  # grad mode is per thread
        return fn()
