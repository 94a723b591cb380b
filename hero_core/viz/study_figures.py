"""The figures of a study (``python -m hero_core study``): the arm differences with their paired intervals, and the
operating points of every run beside the references at the same skip. The app's Study page draws them; the study
command exports them as PNG beside ``study.md``.
"""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from hero_core.eval.study.report import interval, measure_name
from hero_core.viz.frontier_figure import REFERENCE_STYLE
from hero_core.viz.palette import DENSE_COLOUR, run_colour
from hero_core.words.reference_labels import REFERENCE_LABELS

REFERENCE_SYMBOLS = {"static": "square-open", "random": "diamond-open", "oracle": "star-open"}
FIGURE_FILES = {"differences": "figures/differences.png", "frontier": "figures/frontier.png"}


def differences_chart(summary: dict) -> go.Figure:
    """One panel per measure: each arm difference (first arm minus the other) with its 95 % interval and 0 marked;
    an interval across 0 is not separable."""
    measures, names = summary["measures"], list(summary["differences"])
    fig = make_subplots(rows=1, cols=len(measures), horizontal_spacing=0.08)
    for col, m in enumerate(measures, start=1):
        cells = [summary["differences"][n][m] for n in names]
        fig.add_trace(go.Scatter(
            x=[c["difference"] for c in cells], y=names, mode="markers", showlegend=False,
            marker={"color": run_colour(0), "size": 8},
            error_x={"type": "data", "symmetric": False, "array": [c["high"] - c["difference"] for c in cells],
                     "arrayminus": [c["difference"] - c["low"] for c in cells]},
            hovertext=[f"{n}: {interval(m, c)} {c['verdict']}" for n, c in zip(names, cells, strict=True)],
            hoverinfo="text"), row=1, col=col)
        fig.add_vline(x=0, line={"dash": "dot", "color": DENSE_COLOUR}, row=1, col=col)
        fig.update_xaxes(title_text=f"{measure_name(m)}: difference", row=1, col=col)
        fig.update_yaxes(showticklabels=col == 1, row=1, col=col)
    fig.update_layout(height=150 + 45 * len(names), margin={"l": 10, "r": 10, "t": 20, "b": 60})
    return fig


def study_frontier_chart(report: dict) -> go.Figure:
    """One panel per domain: perplexity ratio to dense against param skip on the held-out texts, a point per run
    (coloured by arm) and each arm's references at the same skip (mean over its seeds, the run's own adapters);
    the oracle is not deployable."""
    domains, summary = report["domains"], report["summary"]
    # each domain on its own scale: chat sits below dense, code well above it
    fig = make_subplots(rows=1, cols=len(domains), subplot_titles=domains, horizontal_spacing=0.06)
    for col, domain in enumerate(domains, start=1):
        for index, (arm, row) in enumerate(summary["arms"].items()):
            runs = [report["measurements"][name]["ppl"]["domains"][domain] for name in row["runs"]]
            fig.add_trace(go.Scatter(
                x=[100 * r["param_skip"] for r in runs], y=row[f"ppl:{domain}"]["per_seed"], mode="markers",
                name=arm, legendgroup=arm, showlegend=col == 1, marker={"color": run_colour(index), "size": 9},
                text=row["runs"], hovertemplate="%{text}<br>param skip %{x:.1f} %<br>ppl ratio %{y:.3f}"
                                                f"<extra>{domain}</extra>"), row=1, col=col)
        for ref, per_arm in (report.get("references") or {}).items():
            for index, (arm, cells) in enumerate(per_arm.items()):
                cell = cells[domain]
                label = f"{REFERENCE_LABELS[ref]}, {arm}'s adapters"
                fig.add_trace(go.Scatter(
                    x=[100 * cell["param_skip"]], y=[cell["ppl_ratio"]], mode="markers", name=label,
                    legendgroup=label, showlegend=col == 1,
                    marker={"symbol": REFERENCE_SYMBOLS[ref], "size": 10, "color": run_colour(index),
                            "line": {"color": REFERENCE_STYLE[ref][0], "width": 2}},
                    hovertemplate=f"{label} (mean of {cell['seeds']} seed(s))<br>param skip %{{x:.1f}} %<br>"
                                  f"ppl ratio %{{y:.3f}}<extra>{domain}</extra>"), row=1, col=col)
        fig.add_hline(y=1.0, line={"color": DENSE_COLOUR, "width": 1}, row=1, col=col)
        fig.add_vline(x=100 * report["target_skip"], line={"dash": "dot", "width": 1}, row=1, col=col)
        fig.update_xaxes(title_text="param skip % (held-out)", row=1, col=col)
    fig.update_yaxes(type="log")
    fig.update_yaxes(title_text="perplexity ratio to dense (log)", row=1, col=1)
    fig.update_layout(height=430, legend={"orientation": "h", "y": -0.25}, margin={"t": 40, "b": 40})
    return fig


def write_study_figures(report: dict, out: Path) -> dict[str, str]:
    """The study's figures as PNG under ``out`` (paths relative to it); {} when the report has no comparison yet.
    Raises :class:`hero_core.viz.figure_export.ExportError` where no renderer is installed."""
    from hero_core.viz.figure_export import figure_image

    if "summary" not in report:
        return {}
    figures = {"differences": differences_chart(report["summary"]), "frontier": study_frontier_chart(report)}
    for name, fig in figures.items():
        path = out / FIGURE_FILES[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        if not fig.layout.width:
            fig.update_layout(width=1100)
        path.write_bytes(figure_image(fig, scale=1.5))
    return {name: FIGURE_FILES[name] for name in figures}
