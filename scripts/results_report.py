"""Render docs/bigbench.md (tables) and docs/figures/bigbench_retain_vs_skip.png from docs/bigbench.json, and the
README's headline block (Retain and answers kept beside param skip) from docs/bigbench.json and docs/answers.json.

Every number comes from the JSON written by ``scripts/make_results.py`` and ``python -m hero_core eval --answers``;
the paper's figures are quoted in their own, labelled table and plotted with their own markers. A missing result
file leaves the page as it is and makes the headline say "not measured" (hero_core.eval.suites.headline).

The renderer lives in hero_core/reports/results_report.py; this file is its command line.
"""

import sys

from hero_core.reports.results_report import main

if __name__ == "__main__":
    sys.exit(main())
