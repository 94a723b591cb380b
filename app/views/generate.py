"""Generate: routed decoding, each new token shaded by the FFNs spent to produce it, next to dense.

The figures that matter are the answer's (the generated tokens), with the prompt's beside them: with the chat
template on, the prompt is mostly the template's system turn. Every control lives in the URL."""

import streamlit as st
from components import settings as app_settings
from components.charts import show_chart
from components.exports import export_panel, show_figure
from components.generation import agreement, generate, span_table
from components.positions import show_position_skip
from components.runtime import load_model
from components.widgets import (
    BIND,
    QUESTION_EXAMPLE,
    prompt_input,
    show_compute_metrics,
    show_net_cost,
    show_notices,
    windowed,
)

from hero_core import RoutingTrace
from hero_core.analysis.spans import answer_and_prompt, span_figures
from hero_core.viz.figures import (
    compute_legend_html,
    executed_counts,
    skip_heatmap,
    token_compute_html,
    token_quality_bars,
)

P = "generate"
RESULT = f"{P}_result"  # last result, kept across reruns

st.title("Generate")
st.caption("Each new token is shaded by how many FFNs the model ran to produce it (the routing of the token "
           "before it). The dense model's continuation of the same prompt is shown beside it.")
settings = app_settings.current()
hero = load_model(settings.model)
# A chat model answers a question inside its chat template; without it, it often just ends the turn.
has_template = bool(getattr(hero.tokenizer, "chat_template", None))
prompt, chat = prompt_input(P, label="Prompt to continue", chat_default=has_template,
                            instead_of_default=QUESTION_EXAMPLE, route_button=False)
cols = st.columns(4)
max_new = cols[0].slider("New tokens", 1, 256, 40, key=f"{P}_max_new", bind=BIND)
sampled = cols[1].radio("Decoding", ["greedy", "sampled"], horizontal=True, key=f"{P}_decoding",
                        bind=BIND) == "sampled"
temperature = cols[2].slider("Temperature", 0.05, 2.0, 0.8, 0.05, key=f"{P}_temperature", disabled=not sampled,
                             bind=BIND)
top_p = cols[3].slider("Top-p", 0.05, 1.0, 0.95, 0.05, key=f"{P}_top_p", disabled=not sampled, bind=BIND)
cols = st.columns(4)
seed = cols[0].number_input("Seed", 0, 2**31 - 1, 0, key=f"{P}_seed", disabled=not sampled, bind=BIND)
with_dense = cols[1].toggle("Dense beside", True, key=f"{P}_dense", bind=BIND)
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
    common = {"chat_template": chat, "max_new_tokens": int(max_new), "do_sample": sampled,
              "temperature": float(temperature), "top_p": float(top_p), "seed": int(seed) if sampled else None}
    # the text streams into the boxes as it comes; the spinner says what is still running (~1 s a token here)
    with st.spinner(f"Generating up to {int(max_new)} routed tokens, then scoring them against dense …"):
        routed = generate(hero, prompt, variant=variant, tau=settings.tau, render=routed_box.html, **common)
    with st.spinner("Generating the dense model's answer beside it …"):
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
    kind, sentence = agreement(result["routed"], result["dense"])
    {"same": st.success, "differ": st.info, "empty": st.warning}[kind](sentence)
    if kind == "empty" and not result["params"]["chat"] and has_template:
        st.markdown("This is a chat model: it answers a question inside its chat template. Switch **Chat template** "
                    "on and press Generate.")
show_notices(trace)

answer, prompt_figures = answer_and_prompt(trace)
st.subheader("The answer's routing")
if answer is None:
    st.info("No generated token went through the model, so the answer has no routing to show: the only new token "
            "(the last one is never fed back) ended the generation. The prompt's figures are below.")
else:
    show_compute_metrics(
        param_skip=answer.param_skip, net_param_skip=answer.net_param_skip,
        flop_share_saved=answer.flop_share_saved, ffn_per_token=answer.ffn_executed_per_token,
        n_routed=trace.n_routed, n_tokens=answer.n_tokens, tokens_label="Answer tokens",
        param_skip_help="Over the generated tokens the model processed (every one but the last, which is never fed "
                        "back); the prompt's figure is in the table below.")
    show_net_cost(answer.flop_share_saved, "this answer")
spans = {"answer (generated)": answer,
         "prompt" + (" (chat template included)" if result["params"]["chat"] else ""): prompt_figures,
         "all tokens": span_figures(trace, 0)}
st.dataframe(span_table(spans), hide_index=True, key=f"{P}_spans")
# the answer is the routed model's own choice of tokens: scored on them, it is favoured over dense by construction
st.caption("Quality is the routed model's next-token prediction against dense on the same tokens (teacher-forced): "
           "for the answer, the predictions of its tokens. The routed model chose those tokens itself, which favours "
           "it: a ratio under 1 on the answer does not mean it answers better than dense; the two texts above say "
           "that. One generation is a small sample.")
by_position = show_position_skip(trace, key=f"{P}_positions")  # over prompt + answer, by absolute position

st.subheader("Routing over prompt + generated tokens")
window = windowed(trace, prefix=P)  # a long prompt + continuation: a token window and an overview strip
figures = {"skip map": skip_heatmap(trace, title="Skip map over prompt + generated tokens", window=window),
           **by_position}
show_chart(st, figures["skip map"], key=f"{P}_map")
if trace.quality is not None:
    show_figure(figures, "quality per token", token_quality_bars(trace, window), key=f"{P}_quality")
show_figure(figures, "ffns per token", executed_counts(trace, window), key=f"{P}_counts")
export_panel(trace, figures, key=f"{P}_export", context=f"{P}-{trace.variant}")
