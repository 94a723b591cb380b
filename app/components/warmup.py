"""Compare's and Learn's opening views, computed in the background once the server has its model.

A newcomer's first look at Compare (the default checkpoint beside its local twin, at matched compute, on the default
prompt) cost 3.7 s of server time: the twin's router loaded, its tau matched on the prompt (several forward passes),
both runs traced. None of it depends on the visitor, so the server computes it once, right after it has served its
first page, as background jobs (components.background: after the visitors' own work, never holding a key a visitor
waits for); the page then finds every piece in the caches under the very keys it asks for (the runs are built by the
same function, :func:`components.compare.checkpoint_runs`). A page opened before the warm-up ends computes what it
lacks itself, at its own priority, and the job computing that piece is cancelled; a failed warm-up is logged and
changes nothing. The tour (Learn: its text routed, swept over tau, and its local twin matched, 3.2 s) is warmed the
same way, after Compare.
"""

from __future__ import annotations

import streamlit as st

from hero_core.viz.memory_words import tour_plan

from .background import BACKGROUND, WARM_UP, Job, enabled
from .compare import checkpoint_runs, default_checkpoints, routed_runs
from .runtime import cached_model, get_sweep, get_trace
from .settings import ModelSpec, Settings
from .tour import TAU_GRID, TEACHING_PROMPT, local_at_equal_compute, tour_run
from .widgets import DEFAULT_EXAMPLE, EXAMPLES


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


def warm_defaults(settings: Settings) -> list[Job] | None:
    """Queue the warm-up once per server and model (with the settings the model was first seen with: a later tau
    or variant in the sidebar queues nothing); the real model only (the tiny test model compares no checkpoints).
    Returns its jobs."""
    if settings.model.tiny or not enabled():
        return None
    return _start(settings.model, settings)


@st.cache_resource(show_spinner=False)
def _start(model: ModelSpec, _settings: Settings) -> list[Job]:  # "_": not part of the cache key
    return [BACKGROUND.submit(lambda: compare_defaults(_settings), name="Compare's opening view", priority=WARM_UP),
            BACKGROUND.submit(lambda: learn_defaults(_settings), name="Learn's opening view", priority=WARM_UP)]
