"""The run one τ step either side of the page just drawn, traced in the background while the person looks.

A τ step (the sidebar slider's arrow keys, or a short drag) re-routes the whole prompt: a skip changes the input of
every later layer, so nothing of the drawn trace carries over, and the page waited for a fresh trace (0.7 s of server
time for 200 tokens on two cores). Once a page that routes the sidebar's run has been drawn, a background job
(components.background) traces the same run a slider step below and above into the cache every page reads; the step
then finds its trace there. Each visitor's newest request replaces their older one, waiting or running: whoever typed
a new prompt does not wait behind the steps of the prompt they left. A step taken while its neighbour is still being
traced does not wait for the job either: the page traces it itself and the job is cancelled. A drag further than one
step computes its trace as before.
"""

from __future__ import annotations

from dataclasses import replace

from streamlit.runtime.scriptrunner import get_script_run_ctx

from . import saved
from .background import BACKGROUND, PREFETCH, Job, enabled
from .runtime import RunSpec, get_trace
from .settings import TAU_SLIDER, TAU_STEP


def tau_neighbours(run: RunSpec) -> list[RunSpec]:
    """``run`` one slider step above and one below its tau (inside the slider's range), as the slider gives them:
    the tau rounded to the step's two decimals."""
    taus = (round(run.tau + TAU_STEP, 2), round(run.tau - TAU_STEP, 2))
    return [replace(run, tau=tau) for tau in taus if TAU_SLIDER[0] <= tau <= TAU_SLIDER[1] and tau != run.tau]


def prefetch_tau_steps(run: RunSpec) -> Job | None:
    """Trace ``run`` one τ step either side in the background (not with ``$HERO_LENS_WARMUP=0``, the test suite's
    many short-lived apps; not while a saved trace is shown, which loads no model; routed variants only: dense has no
    τ). Returns the job."""
    if run.variant == "dense" or not enabled() or saved.active() is not None:
        return None
    neighbours = tau_neighbours(run)

    def trace_them() -> None:
        for neighbour in neighbours:
            get_trace(neighbour, page=False)  # a cached run returns at once

    ctx = get_script_run_ctx()
    return BACKGROUND.submit(trace_them, name=f"τ {run.tau:g} ± {TAU_STEP:g}", priority=PREFETCH,
                             group=("prefetch", ctx.session_id if ctx else None))
