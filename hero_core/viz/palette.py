"""Colours and provenance shared by every figure, so that one colour means one thing everywhere.

* Runs are coloured from the Okabe-Ito palette (distinguishable under the common colour-vision deficiencies),
  by their position in a comparison: run k has :func:`run_colour` (k) in every subplot of every figure.
* Signed quantities (attributions) use a blue/orange diverging pair, never red/green.
* No figure paints its own background: the plotly template (Streamlit's theme in the app, light or dark)
  decides, so the few fixed colours below are chosen to read on both.
"""

from __future__ import annotations

from collections.abc import Sequence

from hero_core.words.labels import plotly_text

# Okabe & Ito (2008), black left out (it vanishes on a dark theme), yellow last (it vanishes on a light one).
RUN_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
DENSE_COLOUR = "#888888"  # the dense reference: mid grey reads on white and on dark backgrounds
POSITIVE = "#2166AC"  # attribution towards executing the FFN (PuOr/RdBu blue end)
NEGATIVE = "#E08214"  # attribution towards skipping it (PuOr orange end)
POSITIVE_RGB = "33,102,172"
NEGATIVE_RGB = "224,130,20"
EXECUTED_COLOUR = "#0072B2"  # a decision that runs the FFN
SKIPPED_COLOUR = "#E69F00"  # a decision that skips it
LOCAL_COLOUR = "#56B4E9"  # the local logit b
HISTORY_COLOUR = "#CC79A7"  # the history logit a
MARK_COLOUR = "#D55E00"  # selections, thresholds and boundaries drawn over data
GATE_SCALE = "Viridis"  # g in [0, 1]: perceptually uniform, colour-blind safe
COMPUTE_SCALE = "YlOrRd"  # FFNs executed per token: pale = little compute, dark red = dense
DIVERGING_SCALE = "RdBu"  # signed differences (memory map against its mean): blue above, red below
FLIP_COLOURS = ("#DDDDDD", "#7F7F7F", "#0072B2", "#E69F00")  # both skipped, both executed, only A, only B


def run_colour(index: int) -> str:
    """The colour of the run at position ``index`` of a comparison (cycles after seven runs)."""
    return RUN_COLOURS[index % len(RUN_COLOURS)]


def provenance(trace) -> str:
    """Checkpoint, variant, tau and param skip of a run: what an exported figure must keep."""
    return (f"{plotly_text(trace.checkpoint)} · {plotly_text(trace.variant)} · τ = {trace.tau:.3g} · "
            f"param skip {trace.param_skip:.1%}")


def titled(text: str, traces: Sequence, labels: Sequence[str] | None = None) -> dict:
    """A layout title: ``text`` on the first line, each run's provenance under it (small)."""
    if not traces:  # a figure drawn without its runs (e.g. quality dicts alone) has no provenance to add
        return {"text": text}
    if labels is None or len(traces) == 1:
        runs = [provenance(t) for t in traces]
    else:
        runs = [f"{plotly_text(label)}: {provenance(t)}" for t, label in zip(traces, labels, strict=True)]
    # One line per run: on one line, three runs' provenance ran past the figure's right edge. A figure of several
    # runs leaves room for the extra lines with title_room().
    if len(runs) == 1:
        return {"text": f"{text}<br><sup>{runs[0]}</sup>"}
    # from the top down (a centred title would grow into the plot as lines are added)
    return {"text": text + "".join(f"<br><sup>{run}</sup>" for run in runs), "yref": "container", "y": 1,
            "yanchor": "top", "pad": {"t": 22}}


def title_room(traces: Sequence, top: int) -> int:
    """The top margin (px) for a figure whose title is :func:`titled` over ``traces``: ``top`` for one run, plus a
    line for each further run."""
    return top + 22 * max(0, len(traces) - 1)  # a <sup> line is ~22 px tall
