"""A study's report: every number as ``study.json`` and the page ``study.md`` (every seed, each arm's mean and
spread, the paired differences with their verdicts, the references at the same skip, each run's training
health), and the sentences that answer the question.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import numpy as np

from hero_core.eval.study.measures import with_reference_names
from hero_core.eval.study.stats import ItemMeans, Retained, TaskRetain, TextSums, summarise
from hero_core.words.reference_labels import REFERENCE_LABELS

FORMAT_VERSION = 1


def measure_name(measure: str) -> str:
    kind, _, detail = measure.partition(":")
    if kind == "ppl":
        return f"{detail} ppl ratio"
    return {"mc:accuracy": "MC accuracy %", "mc:retained": "MC retained %",
            "bigbench:retain": "BIG-bench Retain %", "answers:kept": "answers kept %"}.get(measure, measure)


def units_of(measured: dict, dense: dict) -> dict:
    """One run's measurements as bootstrap units, {measure: unit}; ``dense``: the dense grades per graded kind."""
    units = {f"ppl:{d}": TextSums.from_json(v) for d, v in measured["ppl"]["domains"].items()}
    if measured.get("mc") is not None and dense.get("mc") is not None:
        grades = np.asarray(measured["mc"]["grades"], dtype=float)
        units["mc:accuracy"] = ItemMeans(grades)
        units["mc:retained"] = Retained(grades, np.asarray(dense["mc"], dtype=float))
    if measured.get("answers") is not None and dense.get("answers") is not None:
        units["answers:kept"] = Retained(np.asarray(measured["answers"]["grades"], dtype=float),
                                         np.asarray(dense["answers"], dtype=float))
    if measured.get("bigbench") is not None and dense.get("bigbench") is not None:
        tasks = sorted(dense["bigbench"])
        units["bigbench:retain"] = TaskRetain([np.asarray(measured["bigbench"]["grades"][t], dtype=float)
                                               for t in tasks],
                                              [np.asarray(dense["bigbench"][t], dtype=float) for t in tasks])
    return units


def build_report(spec, plan: dict, jobs: list, measured: dict[str, dict], dense: dict, notes: dict[str, str], *,
                 n_boot: int | None = None) -> dict:
    """The report of the runs measured so far (``measured``: run name -> {"ppl", "refs", "mc", "health"})."""
    arms = {arm: [j.name for j in jobs if j.arm == arm and j.name in measured] for arm in spec.arms}
    arms = {arm: names for arm, names in arms.items() if names}
    units = {name: units_of(m, dense) for name, m in measured.items()}
    domains = list(next(iter(measured.values()))["ppl"]["domains"]) if measured else []
    measures = [f"ppl:{d}" for d in domains] + ["mc:accuracy", "mc:retained", "bigbench:retain", "answers:kept"]
    runs = {job.name: _run_row(job, measured.get(job.name), units.get(job.name)) for job in jobs}
    report = {"format_version": FORMAT_VERSION, "kind": "study", "title": spec.title,
              "date": datetime.date.today().isoformat(), "spec": spec.record(), "plan": plan,
              "target_skip": spec.skip, "limit": spec.limit, "max_tokens": spec.max_tokens, "domains": domains,
              "arms": arms, "runs": runs, "measurements": measured, "dense_grades": dense, "notes": notes,
              "missing": [j.name for j in jobs if j.name not in measured]}
    if len(arms) >= 2 and list(arms)[0] == spec.arms[0]:
        report |= _comparison(arms, units, measures, measured, n_boot)
    return report


def _run_row(job, m: dict | None, units: dict | None) -> dict:
    """One run of the plan in the report: who it is, and where measured, its tau, skips, health and every measure's
    point value (``units``: its bootstrap units)."""
    from hero_core.method.checkpoint import health_line

    row = {"arm": job.arm, "seed": job.seed, "checkpoint": job.checkpoint, "given": job.given,
           "measured": m is not None}
    if m is None:
        return row
    domains = m["ppl"]["domains"].values()
    return row | {"tau": m["ppl"]["tau"], "calibration_skip": m["ppl"]["calibration_skip"],
                  "param_skip": float(np.mean([v["param_skip"] for v in domains])),
                  # measurements stored before net savings were kept have none: NaN, said as "—"
                  "net_saved": float(np.mean([v.get("net_saved", np.nan) for v in domains])),
                  "health": m.get("health"), "health_line": health_line(m.get("health")),
                  "measures": {k: float(u.point()) for k, u in units.items()}}


def _comparison(arms: dict[str, list[str]], units: dict, measures: list[str], measured: dict,
                n_boot: int | None) -> dict:
    """The arms compared: the summary over seeds with its paired differences, the references, the verdicts."""
    kwargs = {} if n_boot is None else {"n_boot": n_boot}
    summary = summarise(arms, units, measures, **kwargs)
    return {"summary": summary, "references": reference_summary(arms, measured),
            "verdicts": {name: verdict_sentence(name, row, summary) for name, row in summary["differences"].items()}}


def reference_summary(arms: dict[str, list[str]], measured: dict) -> dict:
    """Per reference, arm and domain: the mean over the arm's seeds of its perplexity ratio and param skip (each
    reference runs with that run's adapters)."""
    out: dict = {}
    for arm, names in arms.items():
        refs = [measured[n]["refs"] for n in names if measured[n].get("refs")]
        for ref_set in refs[:1]:
            for ref, per_domain in ref_set["references"].items():
                for domain in per_domain:
                    cells = [r["references"][ref][domain] for r in refs]
                    out.setdefault(ref, {}).setdefault(arm, {})[domain] = {
                        "ppl_ratio": float(np.mean([TextSums.from_json(c).point() for c in cells])),
                        "param_skip": float(np.mean([c["param_skip"] for c in cells])), "seeds": len(cells)}
    return out


def _signed(measure: str, x: float) -> str:
    return f"{x:+.3f}" if measure.startswith("ppl:") else f"{x:+.1f}"


def _value(measure: str, x: float) -> str:
    if x != x:  # NaN: a spread over one seed
        return "–"
    return f"{x:.3f}" if measure.startswith("ppl:") else f"{x:.1f}"


def interval(measure: str, cell: dict) -> str:
    return f"{_signed(measure, cell['difference'])} [{_signed(measure, cell['low'])}, {_signed(measure, cell['high'])}]"


def verdict_sentence(comparison: str, row: dict, summary: dict) -> str:
    """"not separable", or which arm is ahead on what and by how much, with the number of seeds behind it."""
    first, second = comparison.split(" - ")
    seeds = f"{len(summary['arms'][first]['runs'])} and {len(summary['arms'][second]['runs'])} seeds"
    ahead = [f"{first if cell['verdict'] == 'first ahead' else second} is ahead on {measure_name(m)} by "
             f"{abs(cell['difference']):.3g} (difference {interval(m, cell)})"
             for m, cell in row.items() if cell["verdict"] != "not separable"]
    if not ahead:
        return f"{first} vs {second}: not separable on any measure ({seeds})."
    rest = "; not separable on the rest" if len(ahead) < len(row) else ""
    return f"{first} vs {second}: " + "; ".join(ahead) + f"{rest} ({seeds})."


def render_markdown(report: dict, *, folder: str = "") -> str:
    """study.md: the setup, every seed, each arm over its seeds, the differences and verdicts, the references at
    the same skip, each run's training health; the figures the report names (``report["figures"]``, paths relative
    to the study folder; ``folder``: that folder relative to where the page is written)."""
    lines = _setup_lines(report)
    summary = report.get("summary")
    if summary is None:
        return "\n".join(lines + ["Not enough measured runs for a comparison yet (the first arm and one other).", ""])
    measures = summary["measures"]
    heads = " | ".join(measure_name(m) for m in measures)
    lines += _seed_lines(report, measures, heads) + _arm_lines(summary, measures, heads)
    lines += _difference_lines(report, measures, heads)
    figures = report.get("figures") or {}
    if "differences" in figures:
        lines += [f"![The arm differences with their 95 % intervals]({folder}{figures['differences']})", ""]
    if report.get("answer"):
        lines += [report["answer"], ""]
    lines += _reference_lines(report)
    if "frontier" in figures:
        lines += [f"![Every run and the references at the same skip, per domain]({folder}{figures['frontier']})", ""]
    if report.get("figures_note"):
        lines += [report["figures_note"], ""]
    health = [f"- {name}: {run['health_line']}" for name, run in report["runs"].items() if run["measured"]]
    lines += ["## Training health of each run", "", *health, ""]
    return "\n".join(lines)


def _setup_lines(report: dict) -> list[str]:
    """The page's title, what was trained and measured how, the notes, and the runs not measured yet."""
    spec, lines = report["spec"], [f"# {report['title']}", ""]
    lines += [f"Generated by `python -m hero_core study` ({report['date']}) on {report['plan']['backbone']} "
              f"({report['plan']['data']}). Arms {', '.join(spec['arms'])}, {spec['seeds']} training seed(s) each, "
              f"{spec['steps']} steps to {spec['skip']:.0%} param skip; every run measured at the tau that gives "
              + (f"**{spec['skip']:.0%} param skip**" if spec.get("match", "param") == "param" else
                 f"**{spec['net_saving']:.0%} of a dense token's FLOPs saved net** of its router and adapters "
                 "(matched net compute; the references at the same net saving, charged their adapters only)")
              + " on its calibration blocks (train split). Perplexity ratio "
              f"(routed / dense, lower is better) on {spec['limit']} held-out texts per domain (at most "
              f"{spec['max_tokens']} tokens each).", ""]
    lines += [f"- {note}" for note in report["notes"].values()] + [""]
    if report["missing"]:
        lines += [f"Not measured yet: {', '.join(report['missing'])}.", ""]
    return lines


def _seed_lines(report: dict, measures: list[str], heads: str) -> list[str]:
    """The table of every seed: its tau, what it saves, and each measure."""
    lines = ["## Every seed", "",
             f"| arm | run | seed | tau | FLOPs saved net | param skip (held-out text) | {heads} |",
             "|---|---|---|---|---|---|" + "---|" * len(measures)]
    for arm, row in report["summary"]["arms"].items():
        for i, name in enumerate(row["runs"]):
            run = report["runs"][name]
            cells = " | ".join(_value(m, row[m]["per_seed"][i]) for m in measures)
            net = run.get("net_saved", float("nan"))
            net_cell = "—" if net != net else f"{net:.1%}"
            lines.append(f"| {arm} | {name} | {run['seed']} | {run['tau']:.3f} | {net_cell} | "
                         f"{run['param_skip']:.1%} | {cells} |")
    return lines


def _arm_lines(summary: dict, measures: list[str], heads: str) -> list[str]:
    """The table of each arm over its seeds: mean ± sd [min, max] per measure."""
    lines = ["", "## Each arm over its seeds (mean ± sd [min, max])", "", f"| arm | seeds | {heads} |",
             "|---|---|" + "---|" * len(measures)]
    for arm, row in summary["arms"].items():
        cells = " | ".join(f"{_value(m, row[m]['mean'])} ± {_value(m, row[m]['sd'])} [{_value(m, row[m]['min'])}, "
                           f"{_value(m, row[m]['max'])}]" for m in measures)
        lines.append(f"| {arm} | {len(row['runs'])} | {cells} |")
    return lines


def _difference_lines(report: dict, measures: list[str], heads: str) -> list[str]:
    """The paired differences between arms, how they are read, and the verdicts."""
    lines = ["", "## Differences between arms", "",
             "Mean over seeds of the first arm minus the second, with a 95 % interval from a paired hierarchical "
             "bootstrap: per replicate each arm's seeds are drawn with replacement and one draw of the texts (or "
             "items) is shared by every run, so both arms are read on the same texts. Beside it (t), a Welch "
             "t-interval over the seed means, which keeps its coverage with 3 seeds where the bootstrap over seeds "
             "reads narrower than the seed spread supports (coverage 0.97 against 0.83 in a simulation with a known "
             "difference, stats.seed_interval_coverage); a verdict needs both clear of zero, and *n* is the seeds "
             "per arm a difference of the size seen would need. Perplexity: negative = the first arm is better; "
             "accuracy: positive = the first arm is better.", "",
             f"| comparison | {heads} |", "|---|" + "---|" * len(measures)]
    for name, row in report["summary"]["differences"].items():
        cells = " | ".join(f"{interval(m, row[m])}{_t_words(row[m])} {row[m]['verdict']}" for m in measures)
        lines.append(f"| {name} | {cells} |")
    return lines + ["", *[f"**{v}**" for v in report["verdicts"].values()], ""]


def _t_words(cell: dict) -> str:
    """The t-interval over seed means and the seeds a difference this size needs (stored before they existed: none)."""
    low, high = cell.get("t_low", float("nan")), cell.get("t_high", float("nan"))
    if low != low:
        return ""
    needed = cell.get("seeds_needed")
    return f"; t [{low:+.3f}, {high:+.3f}]" + (f", n ≈ {needed}" if needed else "")


def _reference_lines(report: dict) -> list[str]:
    refs = report.get("references") or {}
    if not refs:
        return []
    lines = ["## References at the same skip", "",
             "Each with the run's own adapters, mean over the arm's seeds: perplexity ratio (param skip on the "
             "held-out text). The oracle is not deployable (it runs both branches to choose).", "",
             "| reference | arm | " + " | ".join(report["domains"]) + " |",
             "|---|---|" + "---|" * len(report["domains"])]
    for ref, per_arm in refs.items():
        for arm, cells in per_arm.items():
            lines.append(f"| {REFERENCE_LABELS[ref]} | {arm} | " + " | ".join(
                f"{cells[d]['ppl_ratio']:.3f} ({cells[d]['param_skip']:.1%})" for d in report["domains"]) + " |")
    return lines + [""]


def read_report(folder: str | Path) -> dict:
    """A study folder's report, or :class:`StudyError` saying plainly what is wrong with the folder: missing, a study
    not measured yet (its spec is there, the report not), a file that is not a study's report, or a report with no
    comparison yet."""
    from hero_core.eval.study.spec import SPEC_FILE, StudyError

    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise StudyError(f"{folder} is not a folder on this machine")
    path = folder / "study.json"
    if not path.is_file():
        if (folder / SPEC_FILE).is_file():
            raise StudyError(f"{folder} holds a study that has not written its report yet (training or measuring is "
                             "unfinished): run the same `python -m hero_core study` command again to continue it")
        raise StudyError(f"{folder} holds no study (no study.json): point at the --out folder of "
                         "`python -m hero_core study`")
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise StudyError(f"{path} cannot be read as a study report ({err})") from err
    if not isinstance(report, dict) or report.get("kind") != "study":
        raise StudyError(f"{path} is not a study report (written by `python -m hero_core study`)")
    if "summary" not in report:
        missing = ", ".join(report.get("missing", [])) or "most runs"
        raise StudyError(f"{folder}: the study is half-finished; not measured yet: {missing}. Run the same command "
                         "again to continue it")
    # a report written before the references took the frontier's names (docs/seeds/study.json) reads under today's
    report = with_reference_names(report)
    if "measurements" in report:
        report["measurements"] = {name: run | {"refs": with_reference_names(run["refs"])} if run.get("refs") else run
                                  for name, run in report["measurements"].items()}
    return report
