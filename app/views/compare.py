"""Compare runs: the same prompt under several variants, checkpoints or precisions, side by side."""

import streamlit as st
from components import saved as saved_traces
from components import settings as app_settings
from components.compare import RUN_COLUMNS, build_runs, routed_runs, run_table
from components.comparison_figures import draw_same_token_comparison
from components.exports import export_panel, show_figure
from components.runtime import get_qualities
from components.verdict import pairs_for, render_verdict
from components.widgets import BIND, prompt_input, show_net_cost, show_notices, shown_window

from hero_core.eval.frontier import measured as measured_results
from hero_core.viz.figures import compute_bars, layer_skip_bars, quality_lines

P = "compare"

st.title("Compare runs")
st.caption("Runs of the same prompt on synchronised axes: where decisions flip, which layers diverge, and what "
           "each run costs in quality (against the dense model) and compute.")
settings = app_settings.current()
if saved_traces.active() is not None:  # uploaded traces compare without any model
    saved_traces.render_comparison(P)
    st.stop()
prompt, chat = prompt_input(P)
runs = build_runs(settings, prompt, chat, prefix=P)
if not runs:
    st.info("Choose at least one run (up to six).")
    st.stop()

matched = st.toggle("Match compute", value=True, key=f"{P}_match", bind=BIND,
                    help="Run every other run at the τ that gives the first run's param skip on this prompt, so "
                         "quality is compared at equal compute. Off: each run at its own τ.")
runs, traces = routed_runs(runs, matched=matched)
if matched:
    st.caption(f"Compute matched to **{runs[0].label}** ({traces[0].param_skip:.1%} param skip): the τ column shows "
               "where each run had to set its threshold; the closest reachable skip can differ slightly.")
labels = [run.label for run in runs]
show_notices(traces[0])
reference = runs[0].model  # quality is measured against the dense model of the first run's backbone
qualities = get_qualities(runs, reference, traces)
st.markdown("**This prompt** (one prompt: a small sample, and its metrics may point different ways)")
st.caption("One prompt and the held-out set below can disagree: a prompt is a hundred-odd tokens of one kind of text, "
           "the held-out set hundreds of texts per domain with intervals. Read the prompt for *where* decisions "
           "differ, and the held-out set (and the seeds) for *which router is better*.")
st.dataframe(run_table(traces, qualities, labels, [run.kind for run in runs]), hide_index=True,
             column_config=RUN_COLUMNS, key=f"{P}_runs")
for run, trace in zip(runs, traces, strict=True):
    show_net_cost(trace.summary()["flop_share_saved"], f"this prompt under {run.label}")
pairs = pairs_for([r.checkpoint_name for r in runs], [r.variant for r in runs], [r.trained for r in runs])
render_verdict(pairs, measured_results.load(), what=" vs ".join(labels))

figures = draw_same_token_comparison(traces, labels, key=P)
show_figure(figures, "layer skip rates", layer_skip_bars(traces, labels), key=f"{P}_layers")
show_figure(figures, "quality",
            quality_lines(qualities, labels, traces[0].tokens, traces, window=shown_window(traces[0], P)),
            key=f"{P}_quality")
show_figure(figures, "compute", compute_bars(traces, labels), key=f"{P}_compute")
export_panel(traces[0], figures, key=f"{P}_export", context=f"{P}-" + "-vs-".join(labels),
             traces=dict(zip(labels, traces, strict=True)))
