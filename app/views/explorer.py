"""Route explorer: which FFN each token runs or skips, with what gate, and what it costs."""

import time

import streamlit as st
from components import settings as app_settings
from components import widgets
from components.columns import number_columns
from components.exports import export_panel, show_figure
from components.link_view import write_to_url
from components.positions import show_position_skip
from components.prefetch import prefetch_tau_steps
from components.rerun_timing import timed_fragment
from components.runtime import RunSpec
from components.saved import trace_for

from hero_core.analysis.token_table import token_summary
from hero_core.viz.decision_figures import decision_split
from hero_core.viz.figures import executed_counts, layer_skip_bars, token_quality_bars
from hero_core.words.labels import token_label

TOKEN_COLUMNS = {"token_index": "#", **number_columns({
    "ffn_executed": ("FFNs run",), "mean_gate": ("mean g", "%.3f"), "min_margin": ("smallest margin to τ", "%+.4f"),
    "nll": ("NLL", "%.3f"), "dense_nll": ("NLL dense", "%.3f"), "delta_nll": ("NLL vs dense", "%+.3f"),
})}

P = "explorer"


@st.fragment
@timed_fragment(P)
def map_and_selection(trace, window):
    """The skip map and the selected cell's numbers: a click on the map reruns only these (nothing else on this page
    depends on the selected cell, and the map itself keeps its figure: widgets.skip_map_in_window)."""
    token, block = widgets.current_cell(trace)
    shown = widgets.skip_map_in_window(trace, prefix=P, selected=(token, block), window=window)
    split = decision_split(trace, token, block)
    verdict = "executed" if split["executed"] else "skipped"
    st.markdown(
        f"**Selected:** token {token} “`{token_label(trace.tokens[token], 24)}`” at layer L{split['layer']}: "
        f"g = {split['gate']:.4f} (a = {split['history_logit']:+.3f}, b = {split['local_logit']:+.3f}, "
        f"margin to τ {split['margin']:+.4f}) → FFN **{verdict}** (filled orange on the map). Click any cell to "
        "select it.")
    write_to_url(app_settings.current())  # a click reruns only this: the link keeps the selected cell
    return shown


started = time.perf_counter()

st.title("Route explorer")
with st.container(border=True):  # the start: what the map is, how to route a prompt, where the tour is
    st.markdown("**The map below** has one column per token of the prompt and one row per layer of the model: a "
                "filled square means the token ran that layer's feed-forward block (FFN), a hollow crossed one that "
                "its router skipped it and a small adapter stood in.  \n"
                "**Route your own prompt:** type or paste it in the box and press **Route this prompt**.  \n"
                "**New to dynamic depth?** The guided tour shows gates, skips and the router's depth memory step by "
                "step.")
    st.page_link("views/learn.py", label="Take the guided tour →", icon=":material/school:")
settings = app_settings.current()
prompt, chat = widgets.prompt_input(P)
run = RunSpec.from_settings(settings, prompt, chat)
trace = trace_for(run)
widgets.show_notices(trace)
widgets.show_metrics(trace)
by_position = show_position_skip(trace, key=f"{P}_positions")  # token 0's share; long prompts fade

figures = {"skip map": map_and_selection(trace, widgets.windowed(trace, prefix=P)), **by_position}
window = widgets.shown_window(trace, P)  # a long prompt's charts along the tokens share the skip map's window
if trace.quality is not None:
    show_figure(figures, "quality per token", token_quality_bars(trace, window), key=f"{P}_quality")
links = st.columns(3)
links[0].page_link("views/memory.py", label="Its memory →", icon=":material/memory:")
links[1].page_link("views/why.py", label="Why this decision? →", icon=":material/help:")

st.subheader("Tokens coloured by compute")
widgets.show_token_compute(trace)
show_figure(figures, "ffns per token", executed_counts(trace, window), key=f"{P}_counts")
st.subheader("Per-token table")
st.caption("Click a column header to sort: the tokens that ran the most FFNs, the decisions nearest τ (smallest "
           "margin, negative = skipped), the tokens the routing cost most against dense.")
token_table = token_summary(trace)[["token_index", "token", "ffn_executed", "mean_gate", "min_margin", "nll",
                                    "dense_nll", "delta_nll"]]
token_table["token"] = [token_label(t, 24) for t in token_table["token"]]  # spaces drawn as in the maps (␣)
st.dataframe(token_table, hide_index=True, key=f"{P}_tokens", column_config=TOKEN_COLUMNS)
show_figure(figures, "layer skip rates", layer_skip_bars([trace], [trace.variant]), key=f"{P}_layers")
export_panel(trace, figures, key=f"{P}_export", context=f"{P}-{trace.variant}")
st.caption(f"Server time for this page: {time.perf_counter() - started:.2f} s "
           f"({trace.n_tokens} tokens × {trace.n_routed} routed layers; repeated runs come from the cache).")
prefetch_tau_steps(run)  # the page is drawn: its τ neighbours are traced while the person reads it
