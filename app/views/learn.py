"""Learn: a guided tour of dynamic depth and HeRo's depth memory, on live runs of the current model."""


import streamlit as st
from components import settings as app_settings
from components.charts import show_chart
from components.exports import export_panel
from components.runtime import get_sweep, get_trace, load_model
from components.tour import TAU_GRID, TEACHING_PROMPT, local_at_equal_compute, tour_run
from components.verdict import render_baselines, render_seeds_answer
from components.widgets import BIND, SHARED_PROMPT, token_picker

from hero_core.analysis.spans import first_token_words
from hero_core.eval.frontier import measured as measured_results
from hero_core.viz.decision_figures import tau_curve
from hero_core.viz.figures import flip_map, skip_heatmap
from hero_core.viz.memory_figures import memory_fill
from hero_core.viz.memory_words import describe_memory, describe_read, read_at, tour_plan
from hero_core.viz.tau_words import tau_sweep_words
from hero_core.words.labels import token_label
from hero_core.words.ratio_text import ratio_text

P = "learn"
PAPER_DOMAINS = ("reasoning", "code")  # where the paper finds the history matters most

st.title("Learn: dynamic depth and a router with memory")
settings = app_settings.current()
hero = load_model(settings.model)
if hero.checkpoint_name == "untrained":
    st.warning("These routers are untrained, so their gates sit near 1 and almost every FFN runs. The tour still "
               "works — move τ above the gates to see skipping — but it is far more telling with a trained "
               "checkpoint (hero-10, hero-25, hero-40).")
source = st.radio("Example text", ["a short example", "the prompt from the other pages"], horizontal=True,
                  key=f"{P}_source", bind=BIND)
prompt = TEACHING_PROMPT if source == "a short example" else st.session_state.get(SHARED_PROMPT, TEACHING_PROMPT)
# The tour runs what the checkpoint was trained as; a lesson whose part it never trained is left out, with why.
plan = tour_plan(hero.config.variant, settings.variant, hero.checkpoint_name)
if plan.variant_note:
    st.info(plan.variant_note)
variant = plan.variant
measured = measured_results.load()  # this project's own results, shipped beside the bundled checkpoints
figures = {}

st.header("1 · Not every token needs every layer")
st.markdown("A dense transformer runs all of its blocks' feed-forward networks (FFNs) for every token. Most of a "
            "block's parameters sit in its FFN, so skipping it saves most of that block's compute. HeRo puts a "
            "**router** in front of each routed block's FFN. For each token it computes a gate")
st.latex(r"g_j = \sigma(a_j + b_j)\qquad\text{FFN runs if } g_j \ge \tau,\ \text{else a tiny adapter}")
st.markdown("where **b** (local logit) looks at the token's current hidden state and **a** (history logit) looks "
            "at the path the token has taken through the blocks so far. Below, each square is one "
            "(token, layer), coloured by g; a white cross means the FFN was skipped.")
base = get_trace(tour_run(settings, prompt, variant))
figures["skip map"] = skip_heatmap(base)
show_chart(st, figures["skip map"], key=f"{P}_map")
s = base.summary()
router_share = base.profile.router_params * base.n_routed / base.profile.total_params
st.markdown(f"This run executes **{s['ffn_executed_per_token']:.1f} of {base.n_routed}** FFNs per token on "
            f"average: **{s['param_skip']:.1%}** of the model's parameters sit idle for a typical token (the "
            f"paper's *param skip*). The router is not free: it runs at every routed block for every token, "
            f"**{router_share:.1%}** of the model's parameters, and each skipped FFN runs a small adapter instead. "
            f"Counted net, this run saves **{s['flop_share_saved']:.1%}** of the dense model's FLOPs"
            + (" — nothing: here routing costs more than running every FFN." if s["flop_share_saved"] <= 0 else "."))
sink = first_token_words(base)  # on a short text token 0 alone lifts the average: said where it does
if sink:
    st.markdown(sink)

st.header("2 · The threshold trades compute for quality")
tau = st.slider("τ", *app_settings.LEARN_TAU_SLIDER, float(settings.tau), app_settings.LEARN_TAU_STEP, key=f"{P}_tau",
                bind=BIND,
                help="Each value re-runs the model: a decision at one block changes the hidden state the next "
                     "block sees.")
sweep = get_sweep(tour_run(settings, prompt, variant), TAU_GRID)
at_tau = get_trace(tour_run(settings, prompt, variant, tau=float(tau)))
source_note = f"text: “{token_label(prompt, 40)}” · {app_settings.PRECISIONS[settings.model.precision]}"
ffn_swept = [t.summary()["ffn_executed_per_token"] for t in sweep]
# the trade has two sides: the quality each run paid (perplexity ratio to dense on the same text) beside its compute
ratio_swept = [(t.quality_summary() or {}).get("perplexity_ratio", float("nan")) for t in sweep]
figures["threshold sweep"] = tau_curve(TAU_GRID, ffn_swept, base.n_routed, current=float(tau), trace=at_tau,
                                       note=source_note, perplexity_ratio=ratio_swept)
show_chart(st, figures["threshold sweep"], key=f"{P}_sweep")
# what this curve does, said from the curve (it need not fall at every step on one short text)
st.markdown(f"At τ = {tau:g}: **{at_tau.summary()['ffn_executed_per_token']:.1f}** FFNs per token. "
            f"{tau_sweep_words(TAU_GRID, ffn_swept, base.n_routed, ratio_swept)} Training (with a penalty on FFN "
            "use) moves the gates so that the skipped FFNs are the ones that matter least.")
render_baselines(measured, hero.profile)

st.header("3 · The depth memory fills up")
st.markdown("HeRo's history head reads a **memory over depth**. At every routed block the token writes a key and a "
            "value describing its state there; before writing, it reads what the earlier blocks wrote, weighted "
            "by how well its current query matches their keys and faded by the forgetting factors ρ:")
if hero.config.memory_kernel == "softmax":
    st.latex(r"c_j = \sum_{i<j} \alpha_{j,i}\, v_i,\qquad \alpha_{j,i} = \operatorname{softmax}_i\Big(s\, q_j"
             r"\cdot k_i + \sum_{m=i+1}^{j-1}\log\rho_m\Big)")
else:
    st.latex(r"c_j = \sum_{i<j} \alpha_{j,i}\, v_i,\qquad \alpha_{j,i} \propto "
             r"\Big(\prod_{m=i+1}^{j-1}\rho_m\Big)\,\phi(q_j)\cdot\phi(k_i)")
st.markdown("The memory belongs to one token and lives for one forward pass: nothing crosses tokens.")
if not plan.memory:
    st.warning(plan.memory_note)
else:
    st.markdown("Pick a token and slide through depth to watch its memory fill, one row per block.")
    cols = st.columns(2)
    with cols[0]:
        token = token_picker(base, prefix=P)
    depth = cols[1].slider("Depth (routed blocks so far)", 1, base.n_routed, max(1, base.n_routed // 2),
                           key=f"{P}_depth", bind=BIND)
    figures["memory filling"] = memory_fill(base, token, depth)
    show_chart(st, figures["memory filling"], key=f"{P}_fill")
    where = f"At L{base.routed_layers[depth - 1]}, token “{token_label(base.tokens[token], 24)}”"
    gate = (f"Its gate there: g = {base.gate[depth - 1, token]:.3f} → FFN "
            f"{'executed' if base.executed[depth - 1, token] else 'skipped'}.")
    # every claim about the read comes from the weights through hero_core.viz.memory_words' stated thresholds
    read = read_at(base, token, depth - 1)
    st.markdown(f"**{where}.** {describe_read(read, base.routed_layers)} {gate}")
    st.markdown(f"**Over this whole text.** {describe_memory(base)}")
    held_out = measured_results.memory_entropy_of(measured, hero.checkpoint_name)
    if held_out is None:
        st.caption(f"No held-out measurement of {hero.checkpoint_name}'s reads is available (only the bundled "
                   "checkpoints are measured, by `make results`).")
    else:
        st.caption(f"Measured on held-out chat, code and reasoning text, {hero.checkpoint_name}'s reads average a "
                   f"normalised entropy of {held_out:.3f} (1 = uniform); docs/results.md.")

st.header("4 · Switch the history off")
st.markdown("The `no_history` variant keeps the local head only (a = 0): the same router without its memory of the "
            "path. Comparing the two shows which decisions the history changes.")
if not plan.history:
    st.warning(plan.history_note)
else:
    history_on = st.toggle("History on", True, key=f"{P}_history", bind=BIND)
    local = local_at_equal_compute(settings, prompt, base)
    st.caption(f"Compared at equal compute: `no_history` runs at τ = {local.tau:.3g}, where its param skip "
               f"({local.param_skip:.1%}) is the closest it reaches to {variant}'s {base.param_skip:.1%} at τ = "
               f"{base.tau:.3g}. At one shared τ it would skip a different share, and the decisions would differ "
               "mostly by how many FFNs each runs.")
    shown = base if history_on else local
    figures["skip map (history toggle)"] = skip_heatmap(shown, title=f"Skip map · {shown.variant}")
    show_chart(st, figures["skip map (history toggle)"], key=f"{P}_toggle_map")
    figures["history flips"] = flip_map(base, local, (variant, "no_history"))
    show_chart(st, figures["history flips"], key=f"{P}_flips")
    flips = int((base.executed != local.executed).sum())
    if flips == 0:
        st.markdown(f"Turning the history off flips **none** of the {base.executed.size} decisions on this text: "
                    "here the history changes no decision.")
    else:
        st.markdown(f"Turning the history off flips **{flips}** of {base.executed.size} decisions "
                    f"({flips / base.executed.size:.0%}) on this text.")
    st.markdown("**The paper's claim** (HeRo, on Llama-3.1-8B): dropping the history costs accuracy most on "
                "multi-step reasoning and code, where a token's path through depth says most about what it still "
                "needs.")
    focus = measured_results.history_in_domains(measured, PAPER_DOMAINS)
    st.markdown(f"**Measured on this backbone** (this project's held-out evaluation, not the paper's). "
                f"{measured_results.history_words(measured)}" + (f" {focus}" if focus else ""))
    render_seeds_answer(st)  # the question over several training runs, not one pair of checkpoints
    rows = (measured or {}).get("history_vs_local") or []
    if measured and measured.get("backbone") and measured["backbone"] != hero.backbone.name:
        st.caption(f"That measurement is of {measured['backbone']}; the loaded backbone, {hero.backbone.name}, is not "
                   "covered by it.")
    if rows:
        with st.expander("The measured comparisons"):
            st.dataframe([{"hero": r["hero"], "local": r["local"], "domain": r["domain"],
                           "param skip %": round(100 * r["param_skip"], 1),
                           "hero ppl ratio [95 % CI]": ratio_text(r, "hero_"),
                           "local ppl ratio [95 % CI]": ratio_text(r, "local_"),
                           "verdict": r["verdict"]} for r in rows], hide_index=True)
            st.caption("Perplexity ratio to the dense model (lower is better; below 1 is the sharpened-target "
                       "artefact the glossary explains) at the param skip the hero checkpoint realises at its own "
                       "τ; the local curve is interpolated there. From docs/results.json, via "
                       "hero_core/checkpoints/measured.json (`python -m hero_core.eval.frontier.measured`).")

st.header("5 · Ask why")
st.markdown("Every decision splits exactly into its local and history parts, and can be traced back to the input "
            "tokens that moved it.")
st.page_link("views/why.py", label="Open “Why this decision?” →", icon=":material/help:")
export_panel(base, figures, key=f"{P}_export", context=P)
