"""The server's own clock for the latency benchmark: every rerun of the app's script timed, optionally profiled.

Off unless the server is started with ``HERO_LENS_TIMINGS=FILE`` (one JSON line per rerun: the page, when it
started, its wall and CPU seconds) and, for a Python profile of each rerun, ``HERO_LENS_PROFILE=DIR`` (one
``.prof`` file per rerun, named by its number and page; read them with ``python -m pstats``). The benchmark
(scripts/app_latency.py) sets both; a server started by ``make run`` writes nothing.
"""

from __future__ import annotations

import cProfile
import functools
import itertools
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

TIMINGS_ENV = "HERO_LENS_TIMINGS"
PROFILE_ENV = "HERO_LENS_PROFILE"
_WRITE = threading.Lock()  # sessions rerun in threads of their own; one line at a time
_NUMBER = itertools.count(1)
_IN_RERUN = threading.local()  # set while a whole rerun is timed on this (the session's script) thread


@contextmanager
def timed_rerun() -> Iterator[dict]:
    """Time the enclosed rerun; the caller names the page in the yielded dict (``record["page"]``) once known."""
    log_path, profile_dir = os.environ.get(TIMINGS_ENV), os.environ.get(PROFILE_ENV)
    record: dict = {"page": "?"}
    if not log_path and not profile_dir:
        yield record
        return
    profiler = cProfile.Profile() if profile_dir else None  # profiles this thread: this session's rerun
    started, cpu_started = time.time(), time.thread_time()
    if profiler:
        profiler.enable()
    _IN_RERUN.on = True
    try:
        yield record
    finally:
        _IN_RERUN.on = False
        if profiler:
            profiler.disable()
        record.update(started=round(started, 3), wall_s=round(time.time() - started, 4),
                      cpu_s=round(time.thread_time() - cpu_started, 4), number=next(_NUMBER))
        with _WRITE:
            if profiler:
                Path(profile_dir).mkdir(parents=True, exist_ok=True)
                profiler.dump_stats(Path(profile_dir) / f"{record['number']:04d}-{record['page']}.prof")
            if log_path:
                with open(log_path, "a", encoding="utf-8") as out:
                    out.write(json.dumps(record) + "\n")


def timed_fragment(page: str) -> Callable[[Callable], Callable]:
    """Decorate a page's fragment (under ``st.fragment``) so its own reruns are timed like the script's, as
    ``"<page> (fragment)"``; called inside a whole rerun, it is part of that rerun's time."""

    def decorate(fragment: Callable) -> Callable:
        @functools.wraps(fragment)
        def run(*args, **kwargs):
            if getattr(_IN_RERUN, "on", False):
                return fragment(*args, **kwargs)
            with timed_rerun() as record:
                record["page"] = f"{page} (fragment)"
                return fragment(*args, **kwargs)
        return run
    return decorate
