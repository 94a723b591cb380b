"""Render docs/bigbench.md (tables) and docs/figures/bigbench_retain_vs_skip.png from docs/bigbench.json, and the
README's headline block (Retain and answers kept beside param skip) from docs/bigbench.json and docs/answers.json.

Every number comes from the JSON written by ``scripts/make_results.py`` and ``python -m hero_core eval --answers``;
the paper's figures are quoted in their own, labelled table and plotted with their own markers. A missing result
file leaves the page as it is and makes the headline say "not measured" (hero_core.eval.suites.headline).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hero_core.eval.answers.figure import plot_answers_kept
from hero_core.eval.suites.headline import headline_lines, load_json
from hero_core.eval.twins import is_headline
from hero_core.files import say_wrote
from hero_core.reports.pages import add_path_arguments, save_figure, table_row
from hero_core.reports.readme_headline import write_readme_headline
from hero_core.words.reference_labels import PAPER_BUDGETS

ROOT = Path(__file__).resolve().parents[2]
MEASURED = ROOT / "hero_core" / "checkpoints" / "measured.json"

# The paper's Llama-3.1-8B-Instruct results (7 lm-eval-harness tasks), quoted from the paper (arXiv 2609.08189).
PAPER = [
    ("HeRo (paper, Llama-3.1-8B)", PAPER_BUDGETS[0], 100.24),  # Retain % at the paper's two budgets
    ("HeRo (paper, Llama-3.1-8B)", PAPER_BUDGETS[1], 97.01),
    ("SkipGPT-RT (paper, Llama-3.1-8B)", 25.5, 94.14),
    ("SkipGPT-RT (paper, Llama-3.1-8B)", 40.2, 81.15),
]


def _rows(result: dict) -> dict[tuple[str, str], dict]:
    return {(r["method"], r["suite"]): r for r in result["summary"]}


def _fmt(value, digits: int = 1, pct: bool = False) -> str:
    if value is None:
        return "–"
    return f"{100 * value:.{digits}f}" if pct else f"{value:.{digits}f}"


def _retain_ci(result: dict, method: str) -> str:
    fig = (result.get("retain") or {}).get(method)
    if fig is None or fig.get("retain") is None:
        return "–"
    return f"{fig['retain']:.1f} [{_fmt(fig['low'])}, {_fmt(fig['high'])}]"


def comparison_table(result: dict, methods: list[str]) -> list[str]:
    rows = _rows(result)
    suites = result["config"]["suites"]
    head = ["method", "param skip %", "net skip %", "FLOPs saved %", "FFNs run / token"]
    head += ["Retain (main + HumanEval) % [95 % CI]"] if result.get("retain") else []
    head += [f"{s} Retain %" for s in ("main", "extended", "reasoning") if s in suites]
    domains = sorted({s.split(":")[1] for (_, s) in rows if s.startswith("domain:")})
    head += [f"{d}: ppl ratio / top-1 / KL" for d in domains]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in methods:
        main = rows.get((m, "main")) or next((r for (mm, _), r in rows.items() if mm == m), None)
        if main is None:
            continue
        cells = [m, _fmt(main.get("param_skip"), 2, True), _fmt(main.get("net_param_skip"), 2, True),
                 _fmt(main.get("flop_share_saved"), 2, True), _fmt(main.get("ffn_executed_per_token"), 1)]
        cells += [_retain_ci(result, m)] if result.get("retain") else []
        for s in ("main", "extended", "reasoning"):
            if s in suites:
                cells.append(_fmt((rows.get((m, s)) or {}).get("retain"), 1))
        for d in domains:
            r = rows.get((m, f"domain:{d}"))
            cells.append("–" if r is None else
                         f"{r['score'] / rows[('dense', f'domain:{d}')]['score']:.2f} / "
                         f"{_fmt(r.get('top1_agreement'), 0, True)} % / {_fmt(r.get('kl_from_dense'), 2)}")
        lines.append(table_row(*cells))
    return lines


def task_table(result: dict, methods: list[str], suite: str = "main") -> list[str]:
    res = result["results"]
    tasks = list(res["dense"][suite]["tasks"])
    lines = ["| method | " + " | ".join(tasks) + " |", "|---|" + "---|" * len(tasks)]
    for m in methods:
        if suite not in res.get(m, {}):
            continue
        accs = [res[m][suite]["tasks"][t]["accuracy"] for t in tasks]
        lines.append(f"| {m} | " + " | ".join(f"{100 * a:.1f}" for a in accs) + " |")
    return lines


def plot(result: dict, methods: list[str], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = _rows(result)
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for m in methods:
        r = rows.get((m, "main"))
        if r is None or r.get("retain") is None:
            continue
        ax.scatter(100 * r["param_skip"], r["retain"], s=40)
        ax.annotate(m, (100 * r["param_skip"], r["retain"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    for label, skip, ret in PAPER:
        ax.scatter(skip, ret, marker="x", color="grey")
        ax.annotate(label, (skip, ret), fontsize=6, color="grey", xytext=(3, -9), textcoords="offset points")
    ax.set_xlabel("param skip % (paper definition)")
    ax.set_ylabel("main-suite Retain %")
    ax.set_title("Retain vs param skip — ours (SmolLM2-135M, BIG-bench main suite) and the paper's (grey x)")
    ax.title.set_fontsize(8)
    ax.grid(alpha=0.3)
    save_figure(fig, out, dpi=130)


def humaneval_table(result: dict) -> list[str]:
    """HumanEval pass@1 of the methods that ran it (greedy, subprocess-executed), with Retain vs dense."""
    rows = [r for r in result["summary"] if r["suite"] == "humaneval"]
    if not rows:
        return []
    code = result["config"].get("humaneval", {})
    limit = code.get("limit")
    out = ["", f"## Code: HumanEval pass@1 (greedy decoding, first {limit} problems, completions executed in a "
               "subprocess with a timeout)", ""]
    out += [f"Routed runs left out: {code['skipped']}.", ""] if code.get("skipped") else []
    out += ["| method | solved | pass@1 % | Retain % | param skip % while generating |", "|---|---|---|---|---|"]
    for r in rows:
        per = result["results"][r["method"]]["humaneval"]
        solved = f"{per.get('passed', '–')} / {per.get('n', limit)}"
        out.append(f"| {r['method']} | {solved} | {_fmt(r['score'], 1, True)} | {_fmt(r.get('retain'), 1)} | "
                   f"{_fmt(r.get('param_skip'), 2, True)} |")
    return out


def trained_ablations(result: dict) -> list[str]:
    """Trained ablation checkpoints, not the recipe-2 ones the headline reports (no_memread-10-r2)."""
    return [m for m in result["config"]["methods"]
            if m.split("-")[0] in ("no_memread", "no_aux", "no_pos") and not is_headline(m)]


def matched_table(result: dict) -> list[str]:
    """Each checkpoint against its local twin at the param skip it realises on calibration text."""
    matched = result.get("matched") or {}
    if not matched:
        return []
    rows = _rows(result)
    out = ["", "## Each checkpoint against its local twin at matched compute", "",
           "The twin runs at the tau whose param skip on calibration text (train-split blocks of every domain) "
           "equals the checkpoint's at its own tau; the difference is paired (both resampled on the same examples).",
           "", "| checkpoint | twin | twin tau | calibration skip % (checkpoint / twin) | main-suite skip % "
           "(checkpoint / twin) | Retain % [95 % CI] | twin Retain % [95 % CI] | difference, points [95 % CI] |",
           "|---|---|---|---|---|---|---|---|"]
    for name, m in matched.items():
        diff = ((result.get("retain") or {}).get(name) or {}).get("vs_twin") or {}
        skips = [_fmt((rows.get((k, "main")) or {}).get("param_skip"), 1, True) for k in (name, m["method"])]
        delta = "–" if diff.get("difference") is None else \
            f"{diff['difference']:+.1f} [{diff['low']:+.1f}, {diff['high']:+.1f}]"
        out.append(table_row(name, m["twin"], f"{m['tau']:.3f}",
                             f"{100 * m['target_skip']:.1f} / {100 * m['realised_skip']:.1f}", " / ".join(skips),
                             _retain_ci(result, name), _retain_ci(result, m["method"]), delta))
    return out


def main_methods(result: dict) -> list[str]:
    """Checkpoints, baselines and dense: not the ablations (trained or inference-time), which have their table."""
    trained = trained_ablations(result)
    return [m for m in result["config"]["methods"] if "/" not in m and m not in trained]


def render(result: dict, figure: Path) -> str:
    methods = result["config"]["methods"]
    trained = trained_ablations(result)
    main = main_methods(result)
    ablations = ([m for m in ("hero-10", "local-10") if m in methods] + trained
                 + [m for m in methods if "/" in m] + [m for m in ("dense",) if m in methods])
    cfg = result["config"]
    out = ["# Results", "",
           "Generated by `scripts/results_report.py` from `docs/bigbench.json` (written by `scripts/make_results.py`,",
           "`make results`). Do not edit by hand.", "",
           f"Backbone: {cfg['backbone']}. Limit: {cfg['limit']} examples per task / problems / texts. "
           f"Wall time of the evaluation: {cfg.get('wall_seconds', '?')} s. "
           f"Main suite: {', '.join(cfg['tasks'].get('main') or [])}.", "",
           "Param skip and FLOPs are measured on the tokens each method processed in the main suite. "
           "Retain = mean over the suite's tasks of routed / dense score, in percent (tasks where dense scores 0 "
           "are left out); Retain (main + HumanEval) counts HumanEval as one more task, with a 95 % bootstrap "
           "interval over examples (hero_core.eval.suites.retain). `<twin>@<checkpoint>`: the local twin at the "
           "checkpoint's param skip on calibration text. "
           "Domain columns: perplexity ratio routed/dense on held-out text, top-1 agreement with dense, "
           "KL(dense‖routed) in nats per token.", "",
           CAVEAT, ""] + retrained_note(result) + ["## All methods", ""] + comparison_table(result, main) + [
           "", f"![Retain vs param skip]({figure.relative_to(ROOT / 'docs').as_posix()})"]
    out += matched_table(result)
    if trained or any("/" in m for m in methods):
        out += ["", "## Ablations", "",
                "Trained (`make results` with `scripts/make_results.py --ablations`): local-10 (the paper's w/o "
                "History) and no_memread-10, no_aux-10, no_pos-10, each trained exactly like hero-10 "
                "(`make checkpoints`), at their own tau. Inference-time (<checkpoint>/<variant>): a checkpoint's "
                "weights run as another variant, which shows what each part contributes to that router's "
                "decisions, not what a router trained without it would do.", ""]
        out += comparison_table(result, ablations)
    out += humaneval_table(result)
    out += ["", "## Main-suite accuracy per task (%)", ""] + task_table(result, main)
    out += ["", "## Checkpoints", "", "| checkpoint | variant | tau (calibrated) | train wall s | train CPU s |",
            "|---|---|---|---|---|"]
    for name, c in result.get("checkpoints", {}).items():
        timing = c["training"].get("timing", {})
        out.append(f"| {name} | {c['variant']} | {c['tau']:.3f} | {timing.get('wall_s', '–')} | "
                   f"{timing.get('cpu_s', '–')} |")
    out += ["", "## The paper's numbers (Llama-3.1-8B-Instruct, 7 lm-eval tasks) — quoted, not measured here", "",
            "| method | param skip % | Retain % |", "|---|---|---|"]
    out += [f"| {label} | {skip} | {ret} |" for label, skip, ret in PAPER]
    return "\n".join(out) + "\n"


def retrained_since(result: dict) -> list[str]:
    """Checkpoints whose bundled weights are not the ones measured here: the training record stored with the
    results (its timing) differs from the one in the checkpoint's config now (the run was trained again since)."""
    from hero_core.method.checkpoint import CheckpointError, read_checkpoint

    stale = []
    for name, measured in result.get("checkpoints", {}).items():
        try:
            now = read_checkpoint(name).training.get("timing")
        except CheckpointError:
            continue  # no longer bundled: nothing to mislead about
        if now != measured["training"].get("timing"):
            stale.append(name)
    return stale


def retrained_note(result: dict) -> list[str]:
    stale = retrained_since(result)
    if not stale:
        return []
    return [f"**Measured before a retrain.** {', '.join(stale)} {'was' if len(stale) == 1 else 'were'} trained again "
            "after these measurements (the training record stored here differs from the bundled checkpoint's), so "
            "their rows below measure the run they replaced. `make results` measures the bundled weights (it needs "
            "the BIG-bench data on the machine).", ""]


CAVEAT = ("**Read the intervals.** The main suite here is small (see the limit above) and the 135M dense model is "
    "close to chance on several of its tasks, so Retain moves by tens of points on a handful of questions and can "
    "exceed 100 % for a model whose perplexity has exploded; the perplexity ratio, top-1 agreement and KL "
    "against dense on held-out text (docs/results.md) measure quality far more tightly.")



def write_headline(readme: Path, bigbench: dict | None, answers: dict | None, sources: tuple[str, str]) -> bool:
    """The README's headline block (between the ``headline`` markers): the small table of
    :mod:`hero_core.reports.readme_headline`; whether the README changed."""
    return write_readme_headline(readme, MEASURED, bigbench, answers)


def full_headline(bigbench: dict | None, answers: dict | None, sources: tuple[str, str]) -> list[str]:
    """Every headline checkpoint with Retain and answers kept beside its matched twin: docs/bigbench.md's table."""
    return ["", "## Every checkpoint: Retain and answers kept beside its local twin", "",
            *headline_lines(bigbench, answers, sources=sources)]


def _shown(path: Path) -> str:
    return path.resolve().relative_to(ROOT).as_posix() if path.resolve().is_relative_to(ROOT) else str(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    docs = ROOT / "docs"
    add_path_arguments(parser, {"results": docs / "bigbench.json", "--answers": docs / "answers.json",
                                "--out": docs / "bigbench.md",
                                "--figure": docs / "figures" / "bigbench_retain_vs_skip.png",
                                "--answers-figure": docs / "figures" / "answers_kept_vs_skip.png",
                                "--readme": ROOT / "README.md"})
    args = parser.parse_args()
    result, answers = load_json(args.results), load_json(args.answers)
    if answers is not None and plot_answers_kept(answers, args.answers_figure):
        say_wrote(args.answers_figure)
    if result is not None:
        plot(result, main_methods(result), args.figure)
        sources = (_shown(args.results), _shown(args.answers))
        args.out.write_text(render(result, args.figure) + "\n".join(full_headline(result, answers, sources)) + "\n")
        say_wrote(args.out, args.figure)
    else:
        print(f"{args.results} not found: {args.out} left as it is")
    write_headline(args.readme, result, answers, (_shown(args.results), _shown(args.answers)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
