"""How many cores this process may use, torch's thread count, and how many passes may run at once: one policy.

``os.cpu_count()`` counts the machine's cores, not this process's: a CPU affinity mask (``taskset``, a container's
cpuset) or a cgroup CPU quota (``docker run --cpus 2``, a Kubernetes limit) leaves fewer, and threads sized to the
machine then oversubscribe what is left. :func:`usable_cores` reads both: the affinity mask
(``os.sched_getaffinity``) and the quota, cgroup v2 (``cpu.max``: ``"200000 100000"`` is two cores, ``"max ..."``
none) or v1 (``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``, ``-1`` none), rounded up to whole cores.

Every module that sets torch's intra-op threads does it here (:func:`set_threads`, or :func:`threads_for_a_while`
to restore them after), so the count is set by one rule: an explicit count where the caller has one (a training
lane, ``--threads``), else :func:`serving_threads` (``$HERO_LENS_THREADS``, else half the usable cores: on a small
shared machine two threads on two busy cores wait on each other).

Passes side by side (``hero_core.method.side_by_side``) take their extra threads from one process-wide budget,
:data:`PASSES`: at most :func:`passes_at_once` passes run together, whatever nests inside what (Compare's runs side
by side, each scored against dense on a second thread), and a background job runs its passes one after another
(:func:`one_pass_at_a_time`).
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import torch

log = logging.getLogger(__name__)
THREADS_ENV = "HERO_LENS_THREADS"
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")  # this process's cgroup paths
_SERIAL: ContextVar[bool] = ContextVar("hero_one_pass_at_a_time", default=False)


def affinity_cores() -> int:
    """The cores this process may be scheduled on (its affinity mask; the machine's count where there is none)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def _own_cgroup(proc_cgroup: Path) -> tuple[str, dict[str, str]]:
    """This process's cgroup v2 path and its v1 paths by controller, from /proc/self/cgroup ("" where unknown)."""
    v2, v1 = "", {}
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return v2, v1
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2 = parts[2]
        for controller in parts[1].split(","):
            v1[controller] = parts[2]
    return v2, v1


def _quota_v2(text: str) -> float | None:
    quota, _, period = text.strip().partition(" ")
    if quota == "max" or not quota:
        return None
    return int(quota) / int(period or 100000)


def _quota_v1(folder: Path) -> float | None:
    try:
        quota = int((folder / "cpu.cfs_quota_us").read_text())
        period = int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota <= 0 or period <= 0 else quota / period


def cgroup_cpu_limit(root: Path | None = None, proc_cgroup: Path | None = None) -> float | None:
    """The CPU quota of this process's cgroup in cores (1.5 = one and a half), or None where there is none.

    Looks in the process's own cgroup folder and in the root (inside a container the root is the container's own),
    for cgroup v2's ``cpu.max`` and v1's ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (under ``cpu/`` or
    ``cpu,cpuacct/``); the smallest quota found wins. A file that cannot be read or parsed counts as no quota.
    (``root`` and ``proc_cgroup`` default to :data:`CGROUP_ROOT` and :data:`PROC_CGROUP`.)"""
    root = CGROUP_ROOT if root is None else root
    v2, v1 = _own_cgroup(PROC_CGROUP if proc_cgroup is None else proc_cgroup)
    limits = []
    for folder in dict.fromkeys([root / v2.lstrip("/"), root]):
        try:
            limits.append(_quota_v2((folder / "cpu.max").read_text()))
        except (OSError, ValueError):
            pass
    for name in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        base = root / name
        for folder in dict.fromkeys([base / v1.get("cpu", "").lstrip("/"), base]):
            limits.append(_quota_v1(folder))
    found = [x for x in limits if x is not None]
    return min(found) if found else None


def usable_cores(root: Path | None = None, proc_cgroup: Path | None = None) -> int:
    """Cores this process can use: its affinity mask, capped by its cgroup's CPU quota (rounded up, at least 1)."""
    cores = affinity_cores()
    quota = cgroup_cpu_limit(root, proc_cgroup)
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota - 1e-9)))
    return cores


def serving_threads() -> int:
    """Torch's intra-op threads for a process serving pages: ``$HERO_LENS_THREADS``, else half the usable cores
    (at least 1). On a small shared machine fewer threads than cores is much faster: with 2 threads on 2 busy cores
    the threads wait on each other (a 130-token page measured 6 s with 2 threads, 0.7 s with 1)."""
    raw = os.environ.get(THREADS_ENV)
    if raw is None:
        return max(1, usable_cores() // 2)
    try:
        threads = int(raw)
    except ValueError:
        threads = 0
    if threads < 1:
        raise ValueError(f"{THREADS_ENV} must be a positive integer, got {raw!r}")
    return threads


def set_threads(threads: int) -> int:
    """Torch's intra-op threads, process-wide: the one place they are set. Returns the count."""
    threads = int(threads)
    if threads < 1:
        raise ValueError(f"torch threads must be at least 1, got {threads}")
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
        log.info("torch intra-op threads: %d", threads)
    return threads


@contextmanager
def threads_for_a_while(threads: int) -> Iterator[int]:
    """:func:`set_threads` for the enclosed block, then the count before it again."""
    before = torch.get_num_threads()
    set_threads(threads)
    try:
        yield threads
    finally:
        set_threads(before)


def passes_at_once(device: torch.device) -> int:
    """How many passes can run at once without oversubscribing the CPU: the usable cores over torch's intra-op
    threads on a CPU device outside an autocast region (a new thread would not inherit it); 1 elsewhere."""
    if device.type != "cpu" or torch.is_autocast_enabled("cpu"):
        return 1
    return max(1, usable_cores() // torch.get_num_threads())


class PassBudget:
    """The extra threads running passes beside their callers, process-wide: at most ``passes_at_once - 1`` at a
    time. A caller asks for some and gets what is free now (never waits): nested side-by-side calls then run their
    inner passes on their own thread once the cores are taken."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.taken = 0

    @contextmanager
    def extra(self, wanted: int, device: torch.device) -> Iterator[int]:
        """Up to ``wanted`` extra threads for the enclosed block (0 inside :func:`one_pass_at_a_time`)."""
        with self._lock:
            free = 0 if _SERIAL.get() else passes_at_once(device) - 1 - self.taken
            granted = max(0, min(wanted, free))
            self.taken += granted
        try:
            yield granted
        finally:
            with self._lock:
                self.taken -= granted


PASSES = PassBudget()


@contextmanager
def one_pass_at_a_time() -> Iterator[None]:
    """In the enclosed block (and the context it hands to threads), every side-by-side call runs its passes one
    after another on the calling thread: background work never takes a core a visitor's pass could use."""
    token = _SERIAL.set(True)
    try:
        yield
    finally:
        _SERIAL.reset(token)
