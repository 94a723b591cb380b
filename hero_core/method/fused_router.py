"""The router's decode step as one compiled call (``fused_step.cpp``), and the choice of decode path.

At one token per step a routed block's ~35 small tensor operations cost their fixed per-call latency, not
their arithmetic: issued from Python they made the router +26-33 % of a dense decode step on a 2-core CPU
(docs/experiments/default-decode). The C++ function issues the same ATen operations in the same order, so
its decisions equal the packed Python path's (tests/test_fast_router.py), without the interpreter between them.

It is compiled on first use with torch's C++ extension builder (g++ and ninja) and cached on disk
(``TORCH_EXTENSIONS_DIR``, by default ~/.cache/torch_extensions): ~1 minute cold, well under a second warm;
``make install`` builds it once. Which path decode steps take is chosen here, once per process, and logged:

* ``HERO_DECODE_PATH=fused`` (default): the compiled step; if it cannot be built, the packed Python path,
  with a warning that says why (never silently);
* ``HERO_DECODE_PATH=packed``: the packed Python path (:func:`hero_core.method.packed_router.decide_packed`);
* ``HERO_DECODE_PATH=module``: the module path every step (the reference, as in training).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import platform
import threading
import time
from pathlib import Path
from types import ModuleType

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("fused_step.cpp")
DECODE_PATHS = ("fused", "packed", "module")
ENV = "HERO_DECODE_PATH"
_build_lock = threading.Lock()  # one compile per process, however many app sessions ask at once


def requested_path() -> str:
    """The decode path the environment asks for (``HERO_DECODE_PATH``, default ``fused``)."""
    path = os.environ.get(ENV, "fused").strip().lower()
    if path not in DECODE_PATHS:
        raise ValueError(f"{ENV}={path!r}: choose one of {', '.join(DECODE_PATHS)}")
    return path


@functools.cache
def _compiled() -> tuple[ModuleType | None, str]:
    """(the compiled module or None, why not): built once per process, cached on disk across processes."""
    try:
        from torch.utils.cpp_extension import load

        started = time.perf_counter()
        name, flags = build_target()
        module = load(name=name, sources=[str(SOURCE)], extra_cflags=flags, verbose=False)
        log.info("fused router step ready in %.1f s", time.perf_counter() - started)
        return module, ""
    except Exception as err:  # no compiler, no ninja, no headers: say so, and decode on the Python path
        return None, f"{type(err).__name__}: {str(err).strip().splitlines()[-1] if str(err).strip() else ''}"


def build_target() -> tuple[str, list[str]]:
    """The extension's name and compiler flags. On x86-64 Linux the step is built for this CPU's instruction set
    (``-march=native``: its loops vectorise to AVX2 / AVX-512 with FMA, 1.7x faster measured here), and the name
    carries a digest of the CPU's feature flags, so a build cached on disk is never loaded by a CPU that lacks
    them; elsewhere a portable -O3 build."""
    if platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64"):
        try:
            flags_line = next(line for line in Path("/proc/cpuinfo").read_text().splitlines()
                              if line.startswith("flags"))
        except (OSError, StopIteration):
            flags_line = ""
        if flags_line:
            digest = hashlib.sha256(" ".join(sorted(flags_line.split(":", 1)[1].split())).encode()).hexdigest()
            return f"hero_fused_step_{digest[:10]}", ["-O3", "-march=native"]
    return "hero_fused_step", ["-O3"]


def fused_extension() -> ModuleType | None:
    """The compiled step, or None when it cannot be built (the reason is logged as a warning, once)."""
    with _build_lock:
        module, why = _compiled()
    if module is None:
        _warn_once(why)
    return module


@functools.cache
def _warn_once(why: str) -> None:
    log.warning("the fused router step could not be built (%s); decode steps take the packed Python path, "
                "which is slower but computes the same decisions", why)


def decode_path() -> str:
    """The path decode steps take in this process: what was asked for, or ``packed`` where the fused step
    cannot be built. Logged once."""
    asked = requested_path()
    path = "packed" if asked == "fused" and fused_extension() is None else asked
    _log_choice(asked, path)
    return path


@functools.cache
def _log_choice(asked: str, path: str) -> None:
    log.info("router decode path: %s (asked: %s, %s)", path, asked, ENV)


def warm_up() -> str:
    """Build (or load from the disk cache) the fused step now; returns the decode path. ``make install`` calls it
    so the first decode step of the app or the tests does not wait for the compiler."""
    return decode_path()
