"""Downloads: trace JSON, tidy CSV and every figure as a standalone offline HTML page."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from functools import partial

import plotly.graph_objects as go
import streamlit as st

from hero_core import RoutingTrace
from hero_core.figures import figure_html

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


def export_panel(trace: RoutingTrace | None, figures: Mapping[str, go.Figure], *, key: str, context: str) -> None:
    """An expander with the trace (JSON, CSV) and each figure (offline HTML). Files are built only when
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
        st.caption("Figures as standalone HTML (plotly.js inlined: opens offline).")
        fig_cols = st.columns(3)
        for i, (name, fig) in enumerate(figures.items()):
            fig_cols[i % 3].download_button(
                name, data=partial(figure_html, fig, f"HeRo Lens · {name}"),
                file_name=safe_filename("hero-lens", context, name, ext="html"), mime="text/html",
                key=f"{key}_fig_{slug(name)}", on_click="ignore")
