"""Saved traces back in: trace JSON files uploaded in the sidebar, drawn by the pages with no model run.

Only JSON is read (``json.loads`` then :meth:`RoutingTrace.from_dict`, which checks every field's shape):
nothing is ever unpickled, so a file cannot run code. A file that is not a trace gets a message naming the
file and what is wrong with it. The uploads live in this session's state only.
"""

from __future__ import annotations

import hashlib
import json

import streamlit as st

from hero_core import RoutingTrace
from hero_core.method.trace import TraceFormatError
from hero_core.viz.figures import (
    compute_bars,
    layer_skip_bars,
    skip_heatmap,
)

from .comparison_figures import draw_same_token_comparison
from .exports import export_panel, show_figure

LIVE = "live model"
SOURCE_KEY = "saved_source"
FILES_KEY = "saved_files"
KNOWN_KEY = "saved_known"  # names seen last run: a name not among them is a new upload
ACTIVE = "saved_active"  # the chosen trace's name this run (None: the live model)
MAX_TRACE_MB = 200
MAX_COMPARED = 4


@st.cache_data(show_spinner=False, max_entries=32)
def parse_trace(data: bytes, name: str) -> RoutingTrace:
    """A trace from an uploaded file's bytes; TraceFormatError (a ValueError) says what is wrong."""
    if len(data) > MAX_TRACE_MB * 2**20:
        raise TraceFormatError(f"{name} is {len(data) / 2**20:.0f} MB; traces larger than {MAX_TRACE_MB} MB are "
                               "not loaded")
    try:
        payload = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise TraceFormatError(f"{name} is not a JSON file ({err}); upload a trace exported by HeRo Lens "
                               "(Export → Trace (JSON)) or saved with RoutingTrace.save") from None
    return RoutingTrace.from_dict(payload)


def _load_all() -> tuple[dict[str, RoutingTrace], list[str]]:
    """The valid uploaded traces by (unique) file name in upload order, and a message per bad file."""
    out: dict[str, RoutingTrace] = {}
    problems = []
    for f in st.session_state.get(FILES_KEY) or []:
        name, k = f.name, 2
        while name in out:
            name, k = f"{f.name} ({k})", k + 1
        try:
            out[name] = parse_trace(f.getvalue(), f.name)
        except ValueError as err:
            problems.append(f"{f.name} could not be loaded: {err}")
    return out, problems


def uploaded() -> dict[str, RoutingTrace]:
    return _load_all()[0]


def render_sidebar() -> RoutingTrace | None:
    """The uploader and the choice of what the pages draw; returns the chosen saved trace (None: live model)."""
    with st.sidebar.expander("Saved traces", expanded=bool(st.session_state.get(FILES_KEY))):
        st.file_uploader("Trace JSON files", type=["json"], accept_multiple_files=True, key=FILES_KEY,
                         help="Traces exported by this app (Export → Trace (JSON)) or RoutingTrace.save. "
                              "JSON only: nothing in a file is executed.")
        traces, problems = _load_all()
        for problem in problems:
            st.error(problem)
        options = [LIVE, *traces]
        known = st.session_state.get(KNOWN_KEY, [])
        new = [name for name in traces if name not in known]
        st.session_state[KNOWN_KEY] = list(traces)
        if new:
            st.session_state[SOURCE_KEY] = new[-1]  # a new upload is drawn at once
        elif st.session_state.get(SOURCE_KEY) not in options:
            st.session_state[SOURCE_KEY] = LIVE
        choice = st.radio("Pages draw", options, key=SOURCE_KEY,
                          help="A saved trace is drawn as it was recorded: the prompt box and the routing "
                               "settings do not change it.")
    st.session_state[ACTIVE] = None if choice == LIVE else choice
    return traces.get(choice)


def active() -> RoutingTrace | None:
    """The saved trace the pages draw this run, or None for the live model."""
    name = st.session_state.get(ACTIVE)
    return uploaded().get(name) if name else None


def banner(trace: RoutingTrace) -> None:
    st.info(f"Drawing the saved trace **{st.session_state.get(ACTIVE)}** ({trace.checkpoint} · {trace.variant} · "
            f"τ = {trace.tau:g} · {trace.n_tokens} tokens, {trace.backbone}): no model runs, and the prompt box and "
            "routing settings do not change it. Choose “live model” under Saved traces to route again.")


def trace_for(run) -> RoutingTrace:
    """The trace a page draws: the chosen saved one, else ``run`` routed by the live model."""
    from .runtime import get_trace

    saved = active()
    if saved is None:
        return get_trace(run)
    banner(saved)
    return saved


def same_tokens(traces: list[RoutingTrace]) -> bool:
    first = traces[0]
    return all(t.token_ids == first.token_ids and t.routed_layers == first.routed_layers for t in traces[1:])


def render_comparison(prefix: str) -> None:
    """Compare uploaded traces: of the same tokens as Compare compares runs (flip maps, per-layer divergence,
    skip rates, compute); of different tokens side by side."""
    traces = uploaded()
    names = st.multiselect("Saved traces to compare", list(traces), default=list(traces)[:MAX_COMPARED],
                           key=f"{prefix}_saved_pick_{hashlib.sha1(repr(list(traces)).encode()).hexdigest()[:8]}",
                           max_selections=MAX_COMPARED)  # a new set of uploads gets a fresh choice (all of them)
    if len(names) < 2:
        st.info("Upload (sidebar → Saved traces) and choose at least two traces to compare.")
        return
    chosen = [traces[n] for n in names]
    labels = [f"{n} · {t.variant}" for n, t in zip(names, chosen, strict=True)]
    figures = {}
    if same_tokens(chosen):
        st.caption("Same tokens and routed layers: compared decision by decision.")
        rows = [{"trace": label, "checkpoint": t.checkpoint, "variant": t.variant, "τ": t.tau,
                 "param skip %": 100 * t.param_skip, "FFNs / token": t.summary()["ffn_executed_per_token"],
                 "perplexity ratio": (t.quality_summary() or {}).get("perplexity_ratio"),
                 "flips vs first %": 100 * float((t.executed != chosen[0].executed).mean())}
                for label, t in zip(labels, chosen, strict=True)]
        st.dataframe(rows, hide_index=True)
        figures.update(draw_same_token_comparison(chosen, labels, key=f"{prefix}_saved"))
    else:
        st.caption("These traces route different tokens (or layers), so they are shown side by side; decision-by-"
                   "decision comparison needs traces of the same prompt on the same backbone.")
        cols = st.columns(len(chosen))
        for i, (col, label, t) in enumerate(zip(cols, labels, chosen, strict=True)):
            show_figure(figures, f"skip map {label}", skip_heatmap(t, title=f"{label} · {t.n_tokens} tokens"),
                        key=f"{prefix}_saved_side_{i}", where=col)
            col.metric("Param skip", f"{t.param_skip:.1%}")
    if all(t.routed_layers == chosen[0].routed_layers for t in chosen):
        show_figure(figures, "layer skip rates", layer_skip_bars(chosen, labels), key=f"{prefix}_saved_layers")
    show_figure(figures, "compute", compute_bars(chosen, labels), key=f"{prefix}_saved_compute")
    export_panel(None, figures, key=f"{prefix}_saved_export", context=f"{prefix}-saved",
                 traces=dict(zip(labels, chosen, strict=True)))
