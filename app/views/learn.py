"""Learn: a guided tour of dynamic depth and HeRo's depth memory, on live runs of the current model."""

from dataclasses import replace

import numpy as np
import streamlit as st
from components import settings as app_settings
from components.exports import export_panel
from components.runtime import RunSpec, get_trace, load_model, matched_tau
from components.widgets import SHARED_PROMPT, token_picker

from hero_core.config import VARIANTS
from hero_core.figures import flip_map, memory_fill, memory_reads, skip_heatmap, tau_curve, token_label

P = "learn"
TEACHING_PROMPT = "The cat sat on the mat. Then the cat saw a bird, and the bird flew away."
TAU_GRID = tuple(round(t, 2) for t in np.linspace(0.1, 0.9, 9))

st.title("Learn: dynamic depth and a router with memory")
settings = app_settings.current()
hero = load_model(settings.model)
if hero.checkpoint_name == "untrained":
    st.warning("These routers are untrained, so their gates sit near 1 and almost every FFN runs. The tour still "
               "works — move τ above the gates to see skipping — but it is far more telling with a trained "
               "checkpoint (hero-10, hero-25, hero-40).")
source = st.radio("Example text", ["a short example", "the prompt from the other pages"], horizontal=True,
                  key=f"{P}_source")
prompt = TEACHING_PROMPT if source == "a short example" else st.session_state.get(SHARED_PROMPT, TEACHING_PROMPT)
MEMORY_VARIANTS = tuple(v for v, spec in VARIANTS.items() if spec.memory_read)
variant = settings.variant if settings.variant in MEMORY_VARIANTS else "hero"
figures = {}

st.header("1 · Not every token needs every layer")
st.markdown("A dense transformer runs all of its blocks' feed-forward networks (FFNs) for every token. Most of a "
            "block's parameters sit in its FFN, so skipping it saves most of that block's compute. HeRo puts a "
            "small **router** in front of each routed block's FFN. For each token it computes a gate")
st.latex(r"g_j = \sigma(a_j + b_j)\qquad\text{FFN runs if } g_j \ge \tau,\ \text{else a tiny adapter}")
st.markdown("where **b** (local logit) looks at the token's current hidden state and **a** (history logit) looks "
            "at the path the token has taken through the blocks so far. Below, each square is one "
            "(token, layer), coloured by g; a white cross means the FFN was skipped.")
base = get_trace(RunSpec.from_settings(settings, prompt, False, variant=variant, max_tokens=96))
figures["skip map"] = skip_heatmap(base)
st.plotly_chart(figures["skip map"], key=f"{P}_map")
s = base.summary()
st.markdown(f"This run executes **{s['ffn_executed_per_token']:.1f} of {base.n_routed}** FFNs per token on "
            f"average: **{s['param_skip']:.1%}** of the model's parameters sit idle for a typical token.")

st.header("2 · The threshold trades compute for quality")
tau = st.slider("τ", 0.05, 0.95, float(settings.tau), 0.05, key=f"{P}_tau",
                help="Each value re-runs the model: a decision at one block changes the hidden state the next "
                     "block sees.")
sweep = [get_trace(RunSpec.from_settings(settings, prompt, False, variant=variant, tau=t, max_tokens=96))
         for t in TAU_GRID]
at_tau = get_trace(RunSpec.from_settings(settings, prompt, False, variant=variant, tau=float(tau), max_tokens=96))
source_note = f"text: “{token_label(prompt, 40)}” · {app_settings.PRECISIONS[settings.model.precision]}"
figures["threshold sweep"] = tau_curve(TAU_GRID, [t.summary()["ffn_executed_per_token"] for t in sweep],
                                       base.n_routed, current=float(tau), trace=at_tau, note=source_note)
st.plotly_chart(figures["threshold sweep"], key=f"{P}_sweep")
st.markdown(f"At τ = {tau:g}: **{at_tau.summary()['ffn_executed_per_token']:.1f}** FFNs per token. A higher τ skips "
            "more; training (with a penalty on FFN use) moves the gates so the skipped FFNs are the ones that "
            "matter least.")

st.header("3 · The depth memory fills up")
st.markdown("HeRo's history head reads a **memory over depth**. At every routed block the token writes a key and a "
            "value describing its state there; before writing, it reads what the earlier blocks wrote, weighted "
            "by how well its current query matches their keys and faded by the forgetting factors ρ:")
st.latex(r"c_j = \sum_{i<j} \alpha_{j,i}\, v_i,\qquad \alpha_{j,i} \propto "
         r"\Big(\prod_{m=i+1}^{j-1}\rho_m\Big)\,\phi(q_j)\cdot\phi(k_i)")
st.markdown("The memory belongs to one token and lives for one forward pass: nothing crosses tokens. Pick a token "
            "and slide through depth to watch its memory fill, one row per block.")
cols = st.columns(2)
with cols[0]:
    token = token_picker(base, prefix=P)
depth = cols[1].slider("Depth (routed blocks so far)", 1, base.n_routed, max(1, base.n_routed // 2),
                       key=f"{P}_depth")
figures["memory filling"] = memory_fill(base, token, depth)
st.plotly_chart(figures["memory filling"], key=f"{P}_fill")
reads = memory_reads(base, token, depth)
where = f"At L{base.routed_layers[depth - 1]}, token “{token_label(base.tokens[token], 24)}”"
gate = (f"Its gate there: g = {base.gate[depth - 1, token]:.3f} → FFN "
        f"{'executed' if base.executed[depth - 1, token] else 'skipped'}.")
if depth == 1:
    st.markdown("At the first routed block the memory is empty: the history head has only the token's state.")
elif reads["n_read"] == 1:
    st.markdown(f"{where} can read one block only, so it reads it with weight 1. {gate}")
elif reads["even"]:  # "reads mostly from L13 (8 %)" would be false when 8 % is the uniform share
    largest = reads["top"][0]
    st.markdown(f"{where} reads about evenly from all {reads['n_read']} earlier blocks: the largest read, "
                f"L{largest['layer']} ({largest['weight']:.1%}), is no more than uniform (1/{reads['n_read']} = "
                f"{reads['uniform']:.1%}, ×{largest['ratio']:.2f}). {gate}")
else:
    listed = ", ".join(f"L{r['layer']} ({r['weight']:.0%}, {r['ratio']:.1f}× uniform)" for r in reads["preferred"])
    st.markdown(f"{where} reads mostly from {listed}; a uniform read would give each of the {reads['n_read']} "
                f"earlier blocks {reads['uniform']:.1%}. {gate}")

st.header("4 · Switch the history off")
st.markdown("The `no_history` variant keeps the local head only (a = 0): the same router without its memory of the "
            "path. Comparing the two shows which decisions the history changes.")
history_on = st.toggle("History on", True, key=f"{P}_history")
# at equal compute: at one shared tau no_history skips far less, and the flips below would mostly be its extra FFNs
local_run = RunSpec.from_settings(settings, prompt, False, variant="no_history", max_tokens=96)
local = get_trace(replace(local_run, tau=matched_tau(local_run, base.param_skip)))
st.caption(f"Compared at equal compute: `no_history` runs at τ = {local.tau:.3g}, where its param skip "
           f"({local.param_skip:.1%}) is the closest it reaches to {variant}'s {base.param_skip:.1%} at τ = "
           f"{base.tau:.3g}. At one shared τ it would skip a different share, and the decisions would differ mostly "
           "by how many FFNs each runs.")
shown = base if history_on else local
figures["skip map (history toggle)"] = skip_heatmap(shown, title=f"Skip map · {shown.variant}")
st.plotly_chart(figures["skip map (history toggle)"], key=f"{P}_toggle_map")
figures["history flips"] = flip_map(base, local, (variant, "no_history"))
st.plotly_chart(figures["history flips"], key=f"{P}_flips")
flips = int((base.executed != local.executed).sum())
st.markdown(f"Turning the history off flips **{flips}** of {base.executed.size} decisions. In the paper, dropping "
            "the history costs accuracy most on multi-step reasoning and code, where a token's path through depth "
            "says most about what it still needs.")

st.header("5 · Ask why")
st.markdown("Every decision splits exactly into its local and history parts, and can be traced back to the input "
            "tokens that moved it.")
st.page_link("views/why.py", label="Open “Why this decision?” →", icon=":material/help:")
export_panel(base, figures, key=f"{P}_export", context=P)
