"""Memory view: one token's depth memory — what each routed block read from the blocks before it."""

import streamlit as st
from components import settings as app_settings
from components.exports import export_panel
from components.runtime import RunSpec
from components.saved import trace_for
from components.widgets import clickable_skip_map, current_cell, prompt_input, show_notices, token_picker

from hero_core.config import VARIANTS
from hero_core.figures import forgetting_bars, mean_memory_map, memory_map, token_label, trajectories
from hero_core.memory_figures import MEMORY_MODE_LABELS, MEMORY_MODES

P = "memory"
MEMORY_VARIANTS = tuple(v for v, spec in VARIANTS.items() if spec.memory_read)  # variants that read a memory

st.title("Memory view")
st.caption("At routed block j a token reads its depth memory: c_j = Σ_{i<j} α_{j,i} v_i, a weighted average of "
           "what the earlier blocks wrote, each write decayed by the forgetting factors ρ of the blocks after it.")
settings = app_settings.current()
prompt, chat = prompt_input(P)
trace = trace_for(RunSpec.from_settings(settings, prompt, chat))
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
                     help="weights: α itself · ratio to uniform: α ÷ 1/(j−1), 1 = no preference · difference from "
                          "the mean: α minus the prompt's mean map. The colour scale leaves out row 2, which reads "
                          "its one earlier block with weight 1.")
block = current_cell(trace)[1]  # the selected cell's block, outlined in both maps
figures["memory map"] = memory_map(trace, token, mode=mode, selected_block=block)
figures["mean memory map"] = mean_memory_map(trace, mode="weights" if mode == "difference" else mode,
                                             selected_block=block)
left, right = st.columns(2)
left.plotly_chart(figures["memory map"], key=f"{P}_token_map")
right.plotly_chart(figures["mean memory map"], key=f"{P}_mean_map")
st.caption(f"Row j of a map is the read at block j: how much of each earlier block's value the token "
           f"“{token_label(trace.tokens[token], 24)}” drew on (rows sum to 1 from block 2 on).")

figures["trajectories"] = trajectories(trace, token)
st.plotly_chart(figures["trajectories"], key=f"{P}_trajectories")
figures["forgetting factors"] = forgetting_bars(trace)
st.plotly_chart(figures["forgetting factors"], key=f"{P}_forgetting")
export_panel(trace, figures, key=f"{P}_export", context=f"{P}-token{token}")
