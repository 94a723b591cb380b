"""Study: a folder written by ``python -m hero_core study`` (the bundled one by default): every arm x seed, the arm
differences with their paired intervals, each run's training health, and links that open a run elsewhere."""

from pathlib import Path
from urllib.parse import urlencode

import pandas as pd
import streamlit as st
from components.charts import show_chart

from hero_core.eval.study import StudyError
from hero_core.eval.study.bundled import STORE
from hero_core.eval.study.report import measure_name, read_report
from hero_core.method.checkpoint import bundled_names, seed_names
from hero_core.viz.study_figures import differences_chart, study_frontier_chart

P = "study"


@st.cache_data(show_spinner=False, max_entries=8)
def study_figures(folder: str, written: float) -> tuple:
    """The study's two figures, built once per report file (``written``: its modification time, so a study that is
    measured further is drawn anew): the bundled frontier took 0.2 s to build, on every rerun before."""
    report = read_report(folder)
    return differences_chart(report["summary"]), study_frontier_chart(report)



st.title("Study: does history help?")
st.caption("One study is every arm trained over several seeds and measured at one matched param skip "
           "(`python -m hero_core study`, `make study` for the bundled one). An arm difference is read with its "
           "interval: resampling the seeds and, paired, the same texts for every run.")
folder = st.text_input("Study folder", value=str(STORE), key=f"{P}_folder",
                       help="The --out folder of `python -m hero_core study`; by default the bundled study of the "
                            "memory question (docs/seeds).")
try:
    report = read_report(folder)
except StudyError as err:
    st.warning(str(err))
    st.stop()

summary, spec = report["summary"], report["spec"]
differences, frontier = study_figures(folder, (Path(folder).expanduser() / "study.json").stat().st_mtime)
st.markdown(f"**{report['title']}** · {report['plan']['backbone']} · arms {', '.join(summary['arms'])} · "
            f"{spec['seeds']} seed(s) each · matched at {report['target_skip']:.0%} param skip · {report['date']}")
for sentence in report.get("verdicts", {}).values():
    st.markdown(f"**{sentence}**")
if report.get("answer"):
    st.markdown(report["answer"])
for note in report.get("notes", {}).values():
    st.caption(note)
if report.get("missing"):
    st.info(f"Not measured yet: {', '.join(report['missing'])}.")

measures = summary["measures"]
st.subheader("Every seed")
rows = []
for arm, row in summary["arms"].items():
    for i, name in enumerate(row["runs"]):
        run = report["runs"][name]
        rows.append({"arm": arm, "seed": run["seed"], "run": name, "τ": run["tau"], "param skip": run["param_skip"],
                     **{measure_name(m): row[m]["per_seed"][i] for m in measures}})
st.dataframe(pd.DataFrame(rows), hide_index=True, key=f"{P}_seeds")
st.dataframe(pd.DataFrame([{"arm": arm, "seeds": len(row["runs"]),
                            **{measure_name(m): f"{row[m]['mean']:.3f} ± {row[m]['sd']:.3f}" for m in measures}}
                           for arm, row in summary["arms"].items()]), hide_index=True, key=f"{P}_arms")

st.subheader("Differences between arms")
st.caption("Mean over seeds of the first arm minus the second, with its 95 % interval. Perplexity: left of 0 = the "
           "first arm is better; accuracy: right of 0. An interval across 0 is not separable.")
show_chart(st, differences, key=f"{P}_differences")

st.subheader("Every run and the references at the same skip")
if report.get("references"):
    st.caption("Perplexity ratio to dense against the param skip each run realised on the held-out texts (its tau "
               "was matched on the calibration split). References run on each arm's own adapters, mean over its "
               "seeds; the oracle needs the dense output it would save, so it is not deployable.")
else:
    st.caption("No references at the same skip in this study (run it without --no-references to measure them); "
               "the runs alone are drawn.")
show_chart(st, frontier, key=f"{P}_frontier")

st.subheader("Each run: training health and links")
bundled = set(bundled_names()) | set(seed_names())
first_arm = next(iter(summary["arms"]))
for arm, row in summary["arms"].items():
    for name in row["runs"]:
        run = report["runs"][name]
        line = f"**{name}** ({arm}, seed {run['seed']}): {run['health_line']}"
        if run["checkpoint"] in bundled:
            # the same seed of the first arm beside this run, so Compare opens on the study's own comparison
            twin = next((n for n in summary["arms"][first_arm]["runs"] if report["runs"][n]["seed"] == run["seed"]),
                        None)
            pair = [run["checkpoint"]] + ([report["runs"][twin]["checkpoint"]] if twin and arm != first_arm else [])
            explorer = urlencode({"checkpoint": run["checkpoint"]})
            compare = urlencode({"compare_preset": "Checkpoints", "compare_checkpoints": pair}, doseq=True)
            line += f" · [Route explorer](explorer?{explorer}) · [Compare](compare?{compare})"
        else:
            line += (f" · trained into `{run['checkpoint']}` (relative to the study folder): choose your own "
                     "checkpoint in the sidebar and type that folder to open it")
        st.markdown(line)
