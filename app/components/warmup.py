"""Compare's and Learn's opening views, computed in the background once the server has its model.

A newcomer's first look at Compare (the default checkpoint beside its local twin, at matched compute, on the default
prompt) cost 3.7 s of server time: the twin's router loaded, its tau matched on the prompt (several forward passes),
both runs traced. None of it depends on the visitor, so the server computes it once, on a thread of its own, right
after it has served its first page; the page then finds every piece in the caches under the very keys it asks for
(the runs are built by the same function, :func:`components.compare.checkpoint_runs`). A page opened before the
warm-up ends computes what it lacks itself, as before; a failed warm-up is logged and changes nothing. The tour
(Learn: its text routed, swept over tau, and its local twin matched, 3.2 s) is warmed the same way, after Compare.
"""

from __future__ import annotations

import logging
import os
import threading

import streamlit as st

from hero_core.viz.memory_words import tour_plan

from .compare import checkpoint_runs, default_checkpoints, routed_runs
from .runtime import cached_model, get_sweep, get_trace
from .settings import ModelSpec, Settings
from .tour import TAU_GRID, TEACHING_PROMPT, local_at_equal_compute, tour_run
from .widgets import DEFAULT_EXAMPLE, EXAMPLES

log = logging.getLogger(__name__)
WARMUP_ENV = "HERO_LENS_WARMUP"  # "0": no warm-up (the test suite, whose processes run many apps one after another)


def compare_defaults(settings: Settings) -> None:
    """Route Compare's default pair on the default prompt, the twin at matched compute (fills the caches)."""
    names = default_checkpoints()
    if len(names) < 2:
        return
    routed_runs(checkpoint_runs(settings, EXAMPLES[DEFAULT_EXAMPLE], False, names), matched=True, page=False)


def learn_defaults(settings: Settings) -> None:
    """Route the tour's default text as the tour does: as trained, over the tau grid, and its local twin."""
    hero = cached_model(settings.model)
    plan = tour_plan(hero.config.variant, settings.variant, hero.checkpoint_name)
    base = get_trace(tour_run(settings, TEACHING_PROMPT, plan.variant), page=False)
    get_sweep(tour_run(settings, TEACHING_PROMPT, plan.variant), TAU_GRID, page=False)
    if plan.history:
        local_at_equal_compute(settings, TEACHING_PROMPT, base, page=False)


def lowest_priority() -> None:
    """This thread (and the threads it starts) at the lowest CPU priority, where the OS allows it (Linux: niceness
    is per thread): the warm-up then takes only the CPU that the visitor's browser and pages leave idle."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):  # not Linux, or not permitted: the warm-up runs at normal priority
        pass


def _warm(settings: Settings) -> None:
    lowest_priority()
    try:
        compare_defaults(settings)
        learn_defaults(settings)
        log.info("warm-up done: Compare's default pair and the tour's runs are cached")
    except Exception:  # noqa: BLE001 - the pages compute what they need themselves
        log.exception("warm-up failed; the pages compute their defaults when opened")


@st.cache_resource(show_spinner=False)
def _start(model: ModelSpec, _settings: Settings) -> threading.Thread:  # "_": not part of the cache key
    thread = threading.Thread(target=_warm, args=(_settings,), name="hero-lens-warm-up", daemon=True)
    thread.start()
    return thread


def warm_defaults(settings: Settings) -> threading.Thread | None:
    """Start the warm-up once per server and model (with the settings the model was first seen with: a later tau
    or variant in the sidebar starts nothing); the real model only (the tiny test model compares no checkpoints).
    Returns its thread."""
    if settings.model.tiny or os.environ.get(WARMUP_ENV) == "0":
        return None
    return _start(settings.model, settings)
