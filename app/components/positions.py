"""Skip by absolute position beside a page's skip figures: token 0's share and how routing changes along a prompt.

Why: one prompt-level param skip hid both position effects (issue 23, item 6): token 0 lifts a short prompt's
figure, and past the 128-token blocks the routers were trained on a long prompt's tokens skip fewer FFNs."""

from __future__ import annotations

import streamlit as st

from hero_core import RoutingTrace
from hero_core.viz.prompt_positions import MIN_TOKENS, TRAINED_SPAN, position_bars, position_table, position_words

from .charts import show_chart


def show_position_skip(trace: RoutingTrace, *, key: str) -> dict:
    """An expander with the bins' chart and what they show, open when the prompt runs past the trained span.
    Returns {title: figure} for the page's export panel (empty under MIN_TOKENS tokens)."""
    if trace.n_tokens < MIN_TOKENS or trace.variant == "dense":
        return {}
    table = position_table(trace)
    figure = position_bars(table, trace)
    with st.expander(f"Skip by absolute position ({trace.n_tokens} tokens)", expanded=trace.n_tokens > TRAINED_SPAN):
        show_chart(st, figure, key=key)
        st.markdown(position_words(table, trace.n_routed))
    return {"skip by position": figure}
