"""Generate: routed decoding, each new token shaded by the FFNs spent to produce it, next to dense."""

import streamlit as st
from components import settings as app_settings
from components.exports import export_panel
from components.generation import first_difference, generate
from components.runtime import load_model
from components.widgets import prompt_input, show_metrics, show_notices, windowed

from hero_core import RoutingTrace
from hero_core.figures import (
    compute_legend_html,
    executed_counts,
    skip_heatmap,
    token_compute_html,
    token_label,
    token_quality_bars,
)

P = "generate"
RESULT = f"{P}_result"  # last result, kept across reruns

st.title("Generate")
st.caption("Each new token is shaded by how many FFNs the model ran to produce it (the routing of the token "
           "before it). The dense model's continuation of the same prompt is shown beside it.")
settings = app_settings.current()
prompt, chat = prompt_input(P, label="Prompt to continue")
cols = st.columns(4)
max_new = cols[0].slider("New tokens", 1, 256, 40, key=f"{P}_max_new")
sampled = cols[1].radio("Decoding", ["greedy", "sampled"], horizontal=True, key=f"{P}_decoding") == "sampled"
temperature = cols[2].slider("Temperature", 0.05, 2.0, 0.8, 0.05, key=f"{P}_temperature", disabled=not sampled)
top_p = cols[3].slider("Top-p", 0.05, 1.0, 0.95, 0.05, key=f"{P}_top_p", disabled=not sampled)
cols = st.columns(4)
seed = cols[0].number_input("Seed", 0, 2**31 - 1, 0, key=f"{P}_seed", disabled=not sampled)
with_dense = cols[1].toggle("Dense beside", True, key=f"{P}_dense")
variant = settings.variant if settings.variant != "dense" else "hero"
if settings.variant == "dense":
    st.info("The sidebar variant is dense; the routed side uses hero so there is something to compare.")
params = {"prompt": prompt, "chat": chat, "max_new": max_new, "sampled": sampled, "temperature": temperature,
          "top_p": top_p, "seed": int(seed), "variant": variant, "tau": settings.tau, "model": settings.model}
go_clicked = cols[2].button("Generate", type="primary", key=f"{P}_go")

left, right = st.columns(2)
left.markdown(f"**Routed ({variant}, τ = {settings.tau:g})**")
routed_box = left.empty()
if with_dense:
    right.markdown("**Dense**")
dense_box = right.empty()

if go_clicked:
    hero = load_model(settings.model)
    common = {"chat_template": chat, "max_new_tokens": int(max_new), "do_sample": sampled,
              "temperature": float(temperature), "top_p": float(top_p), "seed": int(seed) if sampled else None}
    routed = generate(hero, prompt, variant=variant, tau=settings.tau, render=routed_box.html, **common)
    dense = generate(hero, prompt, variant="dense", tau=settings.tau, render=dense_box.html, **common) \
        if with_dense else None
    st.session_state[RESULT] = {"params": params, "routed": routed, "dense": dense}

result = st.session_state.get(RESULT)
if result is None:
    routed_box.caption("Press Generate.")
    st.stop()
if result["params"] != params:
    st.caption("Settings changed since this result: press Generate to refresh it.")
R = len(result["routed"]["trace"]["routed_layers"])
routed_box.html(token_compute_html(result["routed"]["pieces"], result["routed"]["counts"], R)
                + compute_legend_html(R))
if result["dense"] is not None and with_dense:
    dense_box.html(token_compute_html(result["dense"]["pieces"], result["dense"]["counts"], R))

trace = RoutingTrace.from_dict(result["routed"]["trace"])
if result["dense"] is not None:
    start = trace.n_prompt_tokens or 0
    routed_new = result["routed"]["trace"]["token_ids"][start:]
    dense_new = result["dense"]["trace"]["token_ids"][start:]
    split = first_difference(routed_new, dense_new)
    if split is None:
        st.success(f"Routed and dense agree on all {min(len(routed_new), len(dense_new))} generated tokens compared.")
    else:
        st.warning(f"Routed and dense part at generated token {split + 1}: routed wrote "
                   f"“{token_label(trace.tokens[start + split], 24)}” where dense wrote "
                   f"“{token_label(result['dense']['trace']['tokens'][start + split], 24)}”.")
st.subheader("Routing over prompt + generated tokens")
show_notices(trace)
show_metrics(trace)
window = windowed(trace, prefix=P)  # a long prompt + continuation: a token window and an overview strip
figures = {"skip map": skip_heatmap(trace, title="Skip map over prompt + generated tokens", window=window)}
st.plotly_chart(figures["skip map"], key=f"{P}_map")
if trace.quality is not None:
    figures["quality per token"] = token_quality_bars(trace, window)
    st.plotly_chart(figures["quality per token"], key=f"{P}_quality")
figures["ffns per token"] = executed_counts(trace, window)
st.plotly_chart(figures["ffns per token"], key=f"{P}_counts")
export_panel(trace, figures, key=f"{P}_export", context=f"{P}-{trace.variant}")
