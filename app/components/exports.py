"""Downloads: trace JSON, tidy CSV, and every figure as PNG, SVG or a standalone offline HTML page."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from functools import partial

import plotly.graph_objects as go
import streamlit as st

from hero_core import RoutingTrace
from hero_core.viz.figure_export import figure_image, figures_html
from hero_core.viz.figures import figure_html

from .charts import show_chart

_UNSAFE = re.compile(r"[^A-Za-z0-9.-]+")
MAX_NAME = 96


def slug(text: str, max_len: int = 32) -> str:
    """ASCII, lowercase, dash-separated; never empty."""
    ascii_text = unicodedata.normalize("NFKD", str(text)).encode("ascii", "ignore").decode("ascii")
    out = _UNSAFE.sub("-", ascii_text).strip("-.").lower()[:max_len].strip("-.")
    return out or "x"


def safe_filename(*parts: str, ext: str) -> str:
    """A file name safe on every OS: slugged parts joined by '_', bounded length, one extension."""
    stem = "_".join(slug(p) for p in parts if str(p).strip()) or "hero-lens"
    return f"{stem[:MAX_NAME]}.{slug(ext, 8)}"


def trace_json(trace: RoutingTrace) -> str:
    return json.dumps(trace.to_dict(), allow_nan=False)


def trace_csv(trace: RoutingTrace) -> str:
    return trace.to_frame().to_csv(index=False)


def show_figure(figures: dict[str, go.Figure], name: str, figure: go.Figure, *, key: str, where=st) -> None:
    """Draw ``figure`` (in ``where``: the page, or a column) and keep it under ``name`` for the page's
    :func:`export_panel`, so every figure a page shows can be exported."""
    figures[name] = figure
    show_chart(where, figure, key=key)


def export_panel(trace: RoutingTrace | None, figures: Mapping[str, go.Figure], *, key: str, context: str,
                 traces: Mapping[str, RoutingTrace] | None = None) -> None:
    """An expander with the trace (JSON, CSV), every run's trace in ``traces`` (Compare), and each figure as
    PNG, SVG (for papers) and offline HTML, plus all figures in one HTML page. Files are built only when
    clicked (deferred callables), so the panel costs nothing on a rerun."""
    with st.expander("Export: trace and figures"):
        cols = st.columns(3)
        if trace is not None:
            cols[0].download_button("Trace (JSON)", data=partial(trace_json, trace),
                                    file_name=safe_filename("hero-lens", context, "trace", ext="json"),
                                    mime="application/json", key=f"{key}_json", on_click="ignore")
            cols[1].download_button("Tidy table (CSV)", data=partial(trace_csv, trace),
                                    file_name=safe_filename("hero-lens", context, "trace", ext="csv"),
                                    mime="text/csv", key=f"{key}_csv", on_click="ignore")
        if traces:
            st.caption("Every run's trace (JSON; load them back on any page from the sidebar's Saved traces).")
            run_cols = st.columns(3)
            for i, (label, run_trace) in enumerate(traces.items()):
                run_cols[i % 3].download_button(
                    f"Trace (JSON) · {label}", data=partial(trace_json, run_trace),
                    file_name=safe_filename("hero-lens", context, label, "trace", ext="json"),
                    mime="application/json", key=f"{key}_run_json_{i}", on_click="ignore")
        if not figures:
            return
        st.caption("Figures: PNG and SVG for papers (rendered on click, a few seconds each), or standalone HTML "
                   "(plotly.js inlined: opens offline). The bundle holds every figure with plotly.js once.")
        st.download_button("All figures (one HTML page)", data=partial(figures_html, figures, f"HeRo Lens · {context}"),
                           file_name=safe_filename("hero-lens", context, "figures", ext="html"), mime="text/html",
                           key=f"{key}_bundle", on_click="ignore")
        # keyed by position, not by name: slugs of long run labels cut to the same prefix ("flips hero-10-r4 …")
        for i, (name, fig) in enumerate(figures.items()):
            row = st.columns([3, 1, 1, 1], vertical_alignment="center")
            row[0].markdown(name)
            row[1].download_button(
                name, data=partial(figure_html, fig, f"HeRo Lens · {name}"),
                file_name=safe_filename("hero-lens", context, name, ext="html"), mime="text/html",
                key=f"{key}_fig_{i}", on_click="ignore", help="standalone HTML")
            for col, fmt, mime in ((row[2], "png", "image/png"), (row[3], "svg", "image/svg+xml")):
                col.download_button(fmt.upper(), data=partial(figure_image, fig, fmt),
                                    file_name=safe_filename("hero-lens", context, name, ext=fmt), mime=mime,
                                    key=f"{key}_fig_{i}_{fmt}", on_click="ignore")
