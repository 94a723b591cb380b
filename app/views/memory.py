"""Memory view: one token's depth memory — what each routed block read from the blocks before it."""

import math

import streamlit as st
from components import settings as app_settings
from components.charts import show_chart
from components.exports import export_panel, show_figure
from components.prefetch import prefetch_tau_steps
from components.runtime import RunSpec
from components.saved import trace_for
from components.widgets import BIND, clickable_skip_map, current_cell, prompt_input, show_notices, token_picker

from hero_core import RoutingTrace
from hero_core.method.config import VARIANTS
from hero_core.viz.figures import trajectories
from hero_core.viz.memory_figures import (
    COLOUR_FLOOR_TEXT,
    MEMORY_MODE_LABELS,
    MEMORY_MODES,
    forgetting_bars,
    mean_memory_map,
    memory_map,
)
from hero_core.viz.memory_words import (
    NEAR_UNIFORM,
    describe_forgetting,
    describe_memory,
    describe_read,
    read_at,
    summarise,
)
from hero_core.words.labels import token_label

P = "memory"
MEMORY_VARIANTS = tuple(v for v, spec in VARIANTS.items() if spec.memory_read)  # variants that read a memory
ENTROPY_HELP = ("Normalised entropy of a read: its entropy over the earlier blocks ÷ log(number of earlier blocks). "
                "1 = uniform (every earlier block weighed equally), 0 = one block only. Averaged over the reads "
                "from the third routed block on (the second reads its one earlier block with weight 1: no choice). "
                f"At {NEAR_UNIFORM:g} or above a read is called close to uniform.")


def _entropy(value: float) -> str:
    """A metric's text: NaN (no read with a choice: fewer than three routed blocks) shows as a dash."""
    return "—" if math.isnan(value) else f"{value:.3f}"


def show_read_summary(trace: RoutingTrace, token: int, block: int) -> None:
    """The selectivity of the reads as numbers, then in words: whichever checkpoint is loaded, the page says
    whether its map carries information or is the uniform triangle 1/(j-1) with noise."""
    mine, prompt, selected = summarise(trace, token), summarise(trace), read_at(trace, token, block)
    layer = f"L{trace.routed_layers[block]}"
    cols = st.columns(4)
    cols[0].metric("This token: read entropy", _entropy(mine.mean_entropy), help=ENTROPY_HELP)
    cols[1].metric("Whole prompt: read entropy", _entropy(prompt.mean_entropy), help=ENTROPY_HELP)
    cols[2].metric("Prompt reads close to uniform",
                   "—" if math.isnan(prompt.near_uniform_share) else f"{prompt.near_uniform_share:.0%}",
                   help=f"Share of this prompt's reads (tokens × blocks with a choice) whose normalised entropy is "
                        f"at least {NEAR_UNIFORM:g}.")
    cols[3].metric(f"Selected read ({layer})", _entropy(selected.normalised_entropy),
                   help="The read at the selected block (outlined in the maps). " + ENTROPY_HELP)
    st.markdown(f"**This token.** {describe_memory(trace, token)}")
    st.markdown(f"**At {layer}** (the selected block). {describe_read(selected, trace.routed_layers)}")
    st.caption(f"Memory kernel: {trace.memory_kernel or 'not recorded in this trace'} · read: {trace.memory_read}.")


st.title("Memory view")
st.caption("At routed block j a token reads its depth memory: c_j = Σ_{i<j} α_{j,i} v_i, a weighted average of "
           "what the earlier blocks wrote, each write decayed by the forgetting factors ρ of the blocks after it.")
settings = app_settings.current()
prompt, chat = prompt_input(P)
run = RunSpec.from_settings(settings, prompt, chat)
trace = trace_for(run)
show_notices(trace)
if trace.variant not in MEMORY_VARIANTS:
    st.info(f"The **{trace.variant}** variant does not read a depth memory, so its maps are empty. "
            f"Choose hero, no_aux or no_pos in the sidebar.")

with st.expander("Skip map (click a cell to pick its token)", expanded=False):
    figures = {"skip map": clickable_skip_map(trace, prefix=P)}
cols = st.columns([2, 3])
with cols[0]:
    token = token_picker(trace, prefix=P)
# Reads sit within a few % of uniform, so raw weights make every map look alike: offer contrasts against the
# uniform read and against this prompt's mean map.
mode = cols[1].radio("Show", MEMORY_MODES, format_func=MEMORY_MODE_LABELS.get, horizontal=True, key=f"{P}_mode",
                     bind=BIND,
                     help="weights: α itself · ratio to uniform: α ÷ 1/(j−1), 1 = no preference · difference from "
                          "the mean: α minus the prompt's mean map. The colour scale leaves out row 2, which reads "
                          f"its one earlier block with weight 1. {COLOUR_FLOOR_TEXT}")
block = current_cell(trace)[1]  # the selected cell's block, outlined in both maps
if trace.variant in MEMORY_VARIANTS:
    show_read_summary(trace, token, block)
figures["memory map"] = memory_map(trace, token, mode=mode, selected_block=block)
figures["mean memory map"] = mean_memory_map(trace, mode="weights" if mode == "difference" else mode,
                                             selected_block=block)
left, right = st.columns(2)
show_chart(left, figures["memory map"], key=f"{P}_token_map")
show_chart(right, figures["mean memory map"], key=f"{P}_mean_map")
floor = f" {COLOUR_FLOOR_TEXT}" if mode != "weights" else ""
st.caption(f"Row j of a map is the read at block j: how much of each earlier block's value the token "
           f"“{token_label(trace.tokens[token], 24)}” drew on (rows sum to 1 from block 2 on). A uniform read gives "
           f"each of the j − 1 earlier blocks 1/(j − 1), which draws the same triangle for every token.{floor}")

show_figure(figures, "trajectories", trajectories(trace, token), key=f"{P}_trajectories")
show_figure(figures, "forgetting factors", forgetting_bars(trace), key=f"{P}_forgetting")
st.markdown(describe_forgetting(trace.forgetting, trace.forgetting_init, trace.routed_layers))
export_panel(trace, figures, key=f"{P}_export", context=f"{P}-token{token}")
prefetch_tau_steps(run)  # the page is drawn: its τ neighbours are traced while the person reads it
