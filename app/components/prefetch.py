"""The run one τ step either side of the page just drawn, traced in the background while the person looks.

A τ step (the sidebar slider's arrow keys, or a short drag) re-routes the whole prompt: a skip changes the input of
every later layer, so nothing of the drawn trace carries over, and the page waited for a fresh trace (0.7 s of server
time for 200 tokens on two cores). Once a page that routes the sidebar's run has been drawn, one thread of the server
traces the same run a slider step below and above, at the lowest CPU priority, into the cache every page reads; the
step then finds its trace there. Only the newest request is kept: whoever typed a new prompt does not wait behind the
steps of the prompt they left. A drag further than one step computes its trace as before.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import replace

import streamlit as st

from . import saved
from .runtime import RunSpec, get_trace
from .settings import TAU_SLIDER, TAU_STEP, ModelSpec
from .warmup import WARMUP_ENV, lowest_priority

log = logging.getLogger(__name__)


def tau_neighbours(run: RunSpec) -> list[RunSpec]:
    """``run`` one slider step above and one below its tau (inside the slider's range), as the slider gives them:
    the tau rounded to the step's two decimals."""
    taus = (round(run.tau + TAU_STEP, 2), round(run.tau - TAU_STEP, 2))
    return [replace(run, tau=tau) for tau in taus if TAU_SLIDER[0] <= tau <= TAU_SLIDER[1] and tau != run.tau]


class Prefetcher:
    """One background thread that traces the runs it was last asked for (older requests are dropped)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wanted: list[RunSpec] = []
        self._busy = False  # a run taken off the list is being traced
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._work, name="hero-lens-prefetch", daemon=True)
        self._thread.start()

    def want(self, runs: list[RunSpec]) -> None:
        with self._lock:
            self._wanted = list(runs)
        self._wake.set()

    def idle(self) -> bool:
        """Whether every run asked for is traced (or failed)."""
        with self._lock:
            return not self._wanted and not self._busy

    def _next(self) -> RunSpec | None:
        with self._lock:
            self._busy = bool(self._wanted)
            return self._wanted.pop(0) if self._wanted else None

    def _work(self) -> None:
        lowest_priority()
        while True:
            self._wake.wait()
            self._wake.clear()
            while (run := self._next()) is not None:
                try:
                    get_trace(run, page=False)  # a cached run returns at once
                except Exception:  # noqa: BLE001 - the page computes the step itself
                    log.exception("prefetching τ = %s failed", run.tau)


@st.cache_resource(show_spinner=False)
def prefetcher_of(model: ModelSpec) -> Prefetcher:
    """The one prefetching thread of ``model`` (canonical spec) in this server."""
    return Prefetcher()


def prefetch_tau_steps(run: RunSpec) -> Prefetcher | None:
    """Trace ``run`` one τ step either side in the background (not with ``$HERO_LENS_WARMUP=0``, the test suite's
    many short-lived apps; not while a saved trace is shown, which loads no model; routed variants only: dense has no
    τ). Returns the prefetcher."""
    if run.variant == "dense" or os.environ.get(WARMUP_ENV) == "0" or saved.active() is not None:
        return None
    prefetcher = prefetcher_of(run.model.canonical())
    prefetcher.want(tau_neighbours(run))
    return prefetcher
