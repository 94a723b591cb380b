"""The guided tour's runs (Learn): one short text routed as trained, swept over tau, and without its history at
equal compute. The page draws them; the server's warm-up (components/warmup.py) computes them for the default text
before anyone opens the tour, through these same functions, so the page finds them under the keys it asks for."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from hero_core import RoutingTrace

from .runtime import RunSpec, equal_compute_tau, get_trace
from .settings import Settings

TEACHING_PROMPT = "The cat sat on the mat. Then the cat saw a bird, and the bird flew away."
TAU_GRID = tuple(round(t, 2) for t in np.linspace(0.1, 0.9, 9))
TOUR_TOKENS = 96  # the tour's texts are short: a longer shared prompt is cut here


def tour_run(settings: Settings, prompt: str, variant: str, **changes) -> RunSpec:
    """The tour's run of ``prompt`` as ``variant`` (no chat template, at most TOUR_TOKENS tokens)."""
    return RunSpec.from_settings(settings, prompt, False, variant=variant, max_tokens=TOUR_TOKENS, **changes)


def local_at_equal_compute(settings: Settings, prompt: str, base: RoutingTrace, *, page: bool = True) -> RoutingTrace:
    """The same router without its history (no_history) at the tau where it skips what ``base`` skips: at one shared
    tau no_history skips far less, and the flips between them would mostly be its extra FFNs."""
    local_run = tour_run(settings, prompt, "no_history")
    return get_trace(replace(local_run, tau=equal_compute_tau(local_run, base.param_skip, page=page)), page=page)
