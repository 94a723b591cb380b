"""Why this decision? The exact split of one gate into local and history logits, and which input
tokens moved it (token ablation by default; integrated gradients where they pass their completeness check)."""

from types import MappingProxyType

import streamlit as st
from components import settings as app_settings
from components.charts import show_chart
from components.exports import export_panel, show_figure
from components.prefetch import prefetch_tau_steps
from components.runtime import RunSpec, cached_attribution, get_attribution
from components.saved import trace_for
from components.widgets import (
    BIND,
    DEFAULT_WINDOW,
    block_picker,
    clickable_skip_map,
    prompt_input,
    show_notices,
    token_picker,
)

from hero_core.analysis.attribution import BASELINES
from hero_core.viz.axes import MAX_WINDOW
from hero_core.viz.decision_figures import attribution_bars, attribution_html, decision_bars, decision_split
from hero_core.words.labels import token_label

P = "why"
# Token ablation first, the default: it always gives an exact answer (~4 s), where integrated gradients failed their
# completeness check on 7 of 7 decisions tried on the trained checkpoints (blocks L3-L29).
METHOD_LABELS = MappingProxyType({"ablation": "token ablation",
                                  "auto": "auto (gradients if they pass)",
                                  "integrated_gradients": "integrated gradients"})
METHOD_NAMES = MappingProxyType({"ablation": "token ablation", "integrated_gradients": "integrated gradients"})
IG_FAILED = "integrated gradients failed on this decision"  # the library's notice, which the page says once itself
AUTO_ATTRIBUTE_TOKENS = 24  # a decision this early in the prompt is attributed at once (about a second here)

st.title("Why this decision?")
st.caption("The gate is g = σ(a + b): b is the local head's view of the token's current hidden state, a the history "
           "head's view of its path through depth (router state + memory read). The FFN runs when a + b ≥ logit(τ).")
settings = app_settings.current()
if settings.variant == "dense":
    st.info("The dense variant runs no router: choose a routed variant in the sidebar.")
    st.stop()
prompt, chat = prompt_input(P)
run = RunSpec.from_settings(settings, prompt, chat)
trace = trace_for(run)
show_notices(trace)

with st.expander("Skip map (click a cell to pick it)", expanded=False):
    figures = {"skip map": clickable_skip_map(trace, prefix=P)}
cols = st.columns(2)
with cols[0]:
    token = token_picker(trace, prefix=P)
with cols[1]:
    block = block_picker(trace, prefix=P)

split = decision_split(trace, token, block)
st.subheader(f"The decision: token {token} “{token_label(trace.tokens[token], 24)}” at L{split['layer']}")
m = st.columns(5)
m[0].metric("local logit b", f"{split['local_logit']:+.3f}")
m[1].metric("history logit a", f"{split['history_logit']:+.3f}")
m[2].metric("a + b", f"{split['gate_logit']:+.3f}", help=f"logit(τ) = {split['tau_logit']:+.3f}")
m[3].metric("gate g", f"{split['gate']:.4f}", f"{split['margin']:+.4f} vs τ", delta_color="off", delta_arrow="off")
m[4].metric("FFN", "executed" if split["executed"] else "skipped")
show_figure(figures, "decision", decision_bars(split, trace), key=f"{P}_decision")
if trace.variant == "no_history":
    st.caption("no_history: a = 0, the local head decides alone.")
elif split["history_flips"]:
    st.success(f"History decides here: the local logit alone would have "
               f"{'run' if split['local_only_executed'] else 'skipped'} the FFN; a = {split['history_logit']:+.3f} "
               f"flips it.")
else:
    st.caption("History does not flip this decision: b alone is on the same side of logit(τ).")


def use_ablation() -> None:
    st.session_state[f"{P}_method"] = "ablation"


def show_attribution(attribution) -> None:
    """The attribution's bars and tokens, or, where integrated gradients failed their check, why not."""
    ig_failed = attribution.method == "integrated_gradients" and not attribution.passed
    for notice in attribution.notices:
        if not (ig_failed and notice.startswith(IG_FAILED)):  # said once, below, with the exact split
            st.info(notice)
    title = (f"{METHOD_NAMES[attribution.method]}: contribution of each token to a + b "
             f"at token {token}, L{split['layer']}")
    total = float(attribution.scores.sum())
    change = attribution.gate_logit - attribution.baseline_logit
    n_attributed = len(attribution.tokens)  # tokens 0..token: a long prompt shows the window leading to the decision
    window = (n_attributed - DEFAULT_WINDOW, n_attributed - 1) if n_attributed > MAX_WINDOW else None
    figures["attribution"] = attribution_bars(attribution.tokens, attribution.scores, title=title, trace=trace,
                                              window=window)
    if ig_failed:
        # Scores that miss their own completeness check explain nothing: say so once, keep them out of sight (a
        # warning, not an error: the page works, the method does not fit this decision).
        st.warning(f"Integrated gradients failed on this decision: Σ attributions = {total:+.4f} against a change "
                   f"of {change:+.4f} (gap {attribution.delta:+.4f}, over 5 %) after {len(attribution.tries)} tries: a "
                   f"routed block below flips its hard decision on the path, a jump gradients cannot see. The exact "
                   f"split above is the answer: b = {split['local_logit']:+.3f}, a = {split['history_logit']:+.3f}. "
                   "Token ablation measures each token's effect directly.")
        st.button("Use token ablation", key=f"{P}_use_ablation", on_click=use_ablation)
        with st.expander("The failed attribution, for the record"):
            show_chart(st, figures["attribution"], key=f"{P}_attribution")
            st.dataframe(attribution.tries, hide_index=True)
    else:
        show_chart(st, figures["attribution"], key=f"{P}_attribution")
        st.html(attribution_html(attribution.tokens, attribution.scores))
    if attribution.method == "integrated_gradients" and attribution.passed:
        st.markdown(f"Completeness: Σ attributions = {total:+.4f}; a + b at the input minus at the "
                    f"{attribution.baseline} baseline = {change:+.4f}; gap {attribution.delta:+.4f} (under 5 %, at "
                    f"{attribution.n_steps} steps).")
    elif attribution.method != "integrated_gradients":
        st.markdown(f"Token ablation: each bar is a + b minus a + b with that token's embedding replaced by the "
                    f"{attribution.baseline} baseline (sum {total:+.4f}; all tokens replaced: {change:+.4f}).")


st.subheader("Which input tokens moved a + b?")
cols = st.columns(3)
method = cols[0].radio("Method", list(METHOD_LABELS), format_func=METHOD_LABELS.get, key=f"{P}_method", bind=BIND,
                       help="Token ablation: a + b minus a + b with one token replaced by the baseline, exact and "
                            "gradient-free. Integrated gradients split the change along a path from the baseline; they "
                            "must pass a completeness check (Σ attributions within 5 % of the change), which fails "
                            "when a routed block below flips its hard decision on the path.")
n_steps = cols[1].slider("Integration steps (start)", 8, 128, 16, 8, key=f"{P}_steps", bind=BIND,
                         disabled=method == "ablation",
                         help="Where integrated gradients start: the steps double (up to 256), then the other "
                              "baseline is tried, until Σ attributions matches the change to within 5 %.")
baseline = cols[2].selectbox("Baseline", BASELINES, key=f"{P}_baseline", bind=BIND,
                             help="What a token is replaced by: the pad token's embedding, or zeros.")
chosen = {"method": method, "n_steps": n_steps, "baseline": baseline}
attribution = cached_attribution(run, token, block, **chosen)
# Attributing re-runs the prompt up to this block once per token before it (or per integration step): quadratic in
# the prompt. A short one runs at once; a longer one waits for the button, so nothing above is held up behind it.
runs_at_once = token + 1 <= AUTO_ATTRIBUTE_TOKENS
button_slot = st.empty()  # the button goes once its result is drawn
if attribution is None and (runs_at_once or button_slot.button("Attribute this decision", key=f"{P}_attribute",
                                                               type="primary", icon=":material/play_arrow:")):
    attribution = get_attribution(run, token, block, **chosen)
    button_slot.empty()
if attribution is None:
    st.caption(f"Attributing re-runs the model on the {token + 1} tokens up to token {token}, once per token "
               f"({METHOD_LABELS[method]}), up to L{split['layer']}: seconds on a short prompt, about a minute on "
               "200 tokens on a 2-core CPU. A progress bar follows it; the result stays for this session.")
else:
    show_attribution(attribution)
export_panel(trace, figures, key=f"{P}_export", context=f"{P}-token{token}-L{split['layer']}")
prefetch_tau_steps(run)  # the page is drawn: its τ neighbours are traced while the person reads it
