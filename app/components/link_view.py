"""Shareable views: the sidebar's checkpoint, variant, τ and precision, the prompt and the selected cell live in
the URL.

Opening a copied URL restores the view: :func:`restore_from_url` seeds the widgets once per session from the
query parameters (values it cannot use are reported, not applied); :func:`write_to_url` keeps the address bar in
step as the user works. The page itself is the URL's path (``/memory``, ``/why`` …). A prompt too long for the
address bar travels by id (:mod:`components.link_prompt`).

Each page's own controls (Compare's preset, the Memory mode, every Generate setting …) are Streamlit widgets bound
to the URL (``bind="query-params"``, their key is the parameter's name): Streamlit restores them on load, writes
them as they change, and leaves a parameter out while its widget shows its default. Their values are checked first
(:mod:`components.link_params`): a value no control can use is reported, like the sidebar's.
"""

from __future__ import annotations

import streamlit as st

from hero_core.method.config import INFERENCE_VARIANTS
from hero_core.method.model import DEFAULT_CHECKPOINT as BUNDLED_DEFAULT

from . import sidebar_keys
from .link_params import link_problems
from .link_prompt import prompt_from_link, prompt_params
from .settings import (
    DEFAULT_CHOICE,
    PRECISIONS,
    TAU_SLIDER,
    ModelSpec,
    Settings,
    checkpoint_defaults,
    checkpoint_options,
    tiny_mode,
)
from .widgets import SHARED_CELL, SHARED_CHAT, SHARED_PROMPT

RESTORED = "url_restored"
URL_CHAT = "chat"  # ?chat=1: the pages' shared chat-template toggle is on


def _number(text: str, kind=float):
    try:
        return kind(text)
    except (TypeError, ValueError):
        return None


def _choose(param: str, allowed, widget_key: str, problems: list[str]) -> None:
    """Set a sidebar choice from the URL parameter ``param`` when it is one of ``allowed``; else report it."""
    value = st.query_params.get(param)
    if not value:
        return
    if value in allowed:
        st.session_state[widget_key] = value
    else:
        problems.append(f"unknown {param} {value!r} (one of {', '.join(allowed)})")


def restore_from_url() -> list[str]:
    """Seed the sidebar and the selected cell from the query parameters, once per session; returns problems."""
    if st.session_state.get(RESTORED):
        return []
    st.session_state[RESTORED] = True
    params, problems = st.query_params, []
    _restore_prompt(params, problems)
    problems.extend(link_problems())
    if not any(k in params for k in ("checkpoint", "variant", "tau", "token", "block", "precision")):
        return problems
    _choose("precision", PRECISIONS, sidebar_keys.PRECISION, problems)
    _restore_checkpoint(params, problems)
    _choose("variant", INFERENCE_VARIANTS, sidebar_keys.VARIANT, problems)
    if "tau" in params:
        _restore_tau(params.get("tau"), problems)
    _restore_cell(params, problems)
    return problems


def _restore_prompt(params, problems: list[str]) -> None:
    """The pages' shared prompt (as text or by id) and chat toggle."""
    prompt, problem = prompt_from_link(params)
    if prompt is not None:
        st.session_state[SHARED_PROMPT] = prompt
    if problem is not None:
        problems.append(problem)
    if params.get(URL_CHAT) == "1":
        st.session_state[SHARED_CHAT] = True


def _restore_checkpoint(params, problems: list[str]) -> None:
    """The sidebar's checkpoint (one not bundled here is reported and the default used), with its own tau and
    variant, which the link's own then replace."""
    checkpoint = params.get("checkpoint") or DEFAULT_CHOICE
    if checkpoint == BUNDLED_DEFAULT:  # the default by its own name: the same model
        checkpoint = DEFAULT_CHOICE
    if checkpoint not in checkpoint_options(tiny_mode()):
        problems.append(f"checkpoint {checkpoint!r} is not bundled here")
        checkpoint = DEFAULT_CHOICE
    st.session_state[sidebar_keys.CHECKPOINT] = checkpoint
    # the sidebar resets tau and variant when the checkpoint changes: start from this checkpoint's own, then the URL's
    st.session_state[sidebar_keys.TAU_ORIGIN] = ("", checkpoint)
    tau, variant = checkpoint_defaults(checkpoint, "", tiny_mode())
    st.session_state[sidebar_keys.TAU], st.session_state[sidebar_keys.VARIANT] = tau, variant


def _restore_tau(text: str | None, problems: list[str]) -> None:
    tau = _number(text)
    lo, hi = TAU_SLIDER
    if tau is not None and lo <= tau <= hi:
        st.session_state[sidebar_keys.TAU] = round(tau, 2)  # the slider's step, TAU_STEP
    else:
        problems.append(f"tau must be a number between {lo:g} and {hi:g}, got {text!r}")


def _restore_cell(params, problems: list[str]) -> None:
    """The selected cell, which needs both a token and a block from 0."""
    token, block = _number(params.get("token"), int), _number(params.get("block"), int)
    if token is not None and block is not None and token >= 0 and block >= 0:
        # clamped to the trace that first uses it (which says so when it had to)
        st.session_state[SHARED_CELL] = {"token": token, "block": block, "from_link": True}
        return
    for name, value in (("token", token), ("block", block)):
        if name not in params:
            continue
        if value is None or value < 0:
            problems.append(f"{name} must be a whole number from 0, got {params.get(name)!r}")
        else:  # a cell needs both: a good half without a good partner is dropped too, and said so
            problems.append(f"{name} {value} is dropped: a selected cell needs both a token and a block")


def write_to_url(settings: Settings) -> None:
    """Put the current view into the address bar (only what differs from what is there)."""
    wanted = {"checkpoint": settings.model.checkpoint or DEFAULT_CHOICE, "variant": settings.variant,
              "tau": f"{settings.tau:g}"}
    if settings.model.precision != ModelSpec().precision:  # the default stays out of the address bar
        wanted["precision"] = settings.model.precision
    elif "precision" in st.query_params:
        del st.query_params["precision"]
    prompt = st.session_state.get(SHARED_PROMPT)
    if isinstance(prompt, str):  # the link names the prompt shown, as text or by id, or none (never an older one)
        for key, value in prompt_params(prompt).items():
            if value is not None:
                wanted[key] = value
            elif key in st.query_params:
                del st.query_params[key]
    if st.session_state.get(SHARED_CHAT):
        wanted[URL_CHAT] = "1"
    elif URL_CHAT in st.query_params:
        del st.query_params[URL_CHAT]
    cell = st.session_state.get(SHARED_CELL)
    if isinstance(cell, dict) and {"token", "block"} <= set(cell):
        wanted["token"], wanted["block"] = str(cell["token"]), str(cell["block"])
    for key, value in wanted.items():
        if st.query_params.get(key) != value:
            st.query_params[key] = value
