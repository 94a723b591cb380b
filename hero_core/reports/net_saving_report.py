"""docs/net_saving.md and the README's net-saving block, from docs/net_saving.json
(``python -m hero_core.eval.frontier.net_table`` measures it; ``make net-saving`` runs both).

The README leads with what a router saves counted net -- its own cost and its adapters' charged -- beside the
paper's param skip, and reads its quality against static pruning at the same net saving."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from hero_core.eval.frontier import net_table
from hero_core.eval.frontier.net_table import net_words, pct, render_markdown
from hero_core.reports.readme_block import refresh_block

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "docs" / "net_saving.json"


def _mean(rows: dict, key: str) -> float:
    return float(np.mean([row[key] for row in rows.values()]))


def readme_lines(report: dict, intervals: str = "docs/net_saving.md") -> list[str]:
    """One row per checkpoint: router share, then per held-out set the net saving, the param skip and the perplexity
    ratio per domain against static pruning's at the same net saving. ``intervals``: the link to the page with the
    intervals, as the page these lines go into reaches it."""
    sets = list(report["sets"])
    head = " | ".join(f"{name}: FLOPs saved net · param skip · perplexity ratio "
                      f"({', '.join(report['sets'][name]['domains'])}) · static pruning at the same net saving"
                      for name in sets)
    lines = [f"| checkpoint | router share of the model | {head} |", "|---|---|" + "---|" * len(sets)]
    for c in report["checkpoints"]:
        cells = []
        for name in sets:
            rows = c["sets"][name]
            domains = report["sets"][name]["domains"]  # the header's order (the JSON's keys are sorted)
            ratios = " / ".join(f"{rows[d]['ratio']:.2f}" for d in domains)
            static = " / ".join(f"{rows[d]['static']['ratio']:.2f}" for d in domains)
            cells.append(f"**{net_words(_mean(rows, 'net_saved'))}** · {pct(_mean(rows, 'param_skip'))} · "
                         f"{ratios} · {static}")
        lines.append(f"| {c['checkpoint']} | {pct(c['router_share'])} | " + " | ".join(cells) + " |")
    lines += ["", f"{report['texts_per_domain']} texts per domain, at most {report['max_tokens']} tokens each, every "
              "checkpoint at its own τ; held-out sets: " + "; ".join(f"*{n}* = {v['words']}" for n, v in
                                                                       report["sets"].items())
              + ". Perplexity ratio routed / dense (1 = unchanged), with intervals in "
              f"[net_saving.md]({intervals})."]
    return lines


def merged(paths: list[Path]) -> dict:
    """One report from several measured apart (e.g. one process per core), checked to share their settings; a
    checkpoint measured twice keeps its later measurement, in the place of its first."""
    reports = [json.loads(p.read_text(encoding="utf-8")) for p in paths]
    settings = {json.dumps({k: v for k, v in r.items() if k != "checkpoints"}, sort_keys=True) for r in reports}
    if len(settings) != 1:
        raise ValueError(f"{[str(p) for p in paths]} were measured with different settings: measure them together")
    by_name = {c["checkpoint"]: c for r in reports for c in r["checkpoints"]}
    return reports[0] | {"checkpoints": list(by_name.values())}


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("parts", nargs="*", type=Path,
                        help="reports to merge into docs/net_saving.json first (it keeps its other checkpoints)")
    args = parser.parse_args(argv)
    if args.parts:  # into what is there: a checkpoint measured later must not drop the others
        into = [REPORT] if REPORT.is_file() and REPORT.resolve() not in {p.resolve() for p in args.parts} else []
        REPORT.write_text(json.dumps(merged([*into, *args.parts]), indent=1, sort_keys=True) + "\n",
                          encoding="utf-8")
    report = json.loads(REPORT.read_text(encoding="utf-8"))
    REPORT.with_suffix(".md").write_text(
        "# What each checkpoint saves, counted net\n\n" + net_table.__doc__.split("\n\n", 1)[1]
        + "\n" + render_markdown(report) + "\n\nMeasured by `make net-saving` "
        "(`python -m hero_core.eval.frontier.net_table`).\n", encoding="utf-8")
    refresh_block(ROOT / "README.md", "net", readme_lines(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
