"""Render docs/results.md, docs/figures/frontier.png and the README's quality block from docs/results.json.

Every number comes from the JSON written by ``scripts/make_frontier.py``. The oracle is a reference that
needs the FFN's output to decide whether to skip it (not deployable); the paper's budgets are marked, its
numbers are quoted only in docs/results.md's labelled table.

The renderer lives in hero_core/reports/quality_report.py; this file is its command line.
"""

import sys

from hero_core.reports.quality_report import main

if __name__ == "__main__":
    sys.exit(main())
