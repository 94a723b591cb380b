"""docs/net_saving.md and the README's net-saving block, from docs/net_saving.json
(``python -m hero_core.eval.frontier.net_table`` measures it; ``make net-saving`` runs both).

The README leads with what a router saves counted net -- its own cost and its adapters' charged -- beside the
paper's param skip, and reads its quality against static pruning at the same net saving."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from hero_core.eval.frontier import net_table
from hero_core.eval.frontier.net_table import net_words, render_markdown
from hero_core.reports.readme_block import refresh_block

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "docs" / "net_saving.json"


def _mean(rows: dict, key: str) -> float:
    return float(np.mean([row[key] for row in rows.values()]))


def readme_lines(report: dict) -> list[str]:
    """One row per checkpoint: router share, then per held-out set the net saving, the param skip and the perplexity
    ratio per domain against static pruning's at the same net saving."""
    sets = list(report["sets"])
    head = " | ".join(f"{name}: FLOPs saved net · param skip · perplexity ratio ({', '.join(report['sets'][name]['domains'])}) "
                      f"· static pruning at the same net saving" for name in sets)
    lines = [f"| checkpoint | router share of the model | {head} |", "|---|---|" + "---|" * len(sets)]
    for c in report["checkpoints"]:
        cells = []
        for name in sets:
            rows = c["sets"][name]
            ratios = " / ".join(f"{row['ratio']:.2f}" for row in rows.values())
            static = " / ".join(f"{row['static']['ratio']:.2f}" for row in rows.values())
            cells.append(f"**{net_words(_mean(rows, 'net_saved'))}** · {_mean(rows, 'param_skip'):.1%} · "
                         f"{ratios} · {static}")
        lines.append(f"| {c['checkpoint']} | {c['router_share']:.1%} | " + " | ".join(cells) + " |")
    lines += ["", f"{report['texts_per_domain']} texts per domain, at most {report['max_tokens']} tokens each, every "
              "checkpoint at its own τ; held-out sets: " + "; ".join(f"*{n}* = {v['words']}" for n, v in
                                                                       report["sets"].items())
              + ". Perplexity ratio routed / dense (1 = unchanged), with intervals in "
              "[docs/net_saving.md](docs/net_saving.md)."]
    return lines


def main() -> int:
    report = json.loads(REPORT.read_text(encoding="utf-8"))
    REPORT.with_suffix(".md").write_text(
        "# What each checkpoint saves, counted net\n\n" + net_table.__doc__.split("\n\n", 1)[1]
        + "\n" + render_markdown(report) + "\n\nMeasured by `make net-saving` "
        "(`python -m hero_core.eval.frontier.net_table`).\n", encoding="utf-8")
    refresh_block(ROOT / "README.md", "net", readme_lines(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
