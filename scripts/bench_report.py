"""Render docs/performance.md from the JSON written by ``python -m hero_core bench``.

    python -m hero_core bench --out bench.json
    python scripts/bench_report.py bench.json --out docs/performance.md

The page is a pure function of the JSON (see :func:`render`): rerun both commands to refresh it. Every
precision the run measured (fp32 and bf16 by default) gets a column group in the targets, summary and README
tables and a sub-table in each detail section; a single-precision file of the older schema reads as fp32.

The renderer lives in hero_core/reports/bench_report.py; this file is its command line.
"""

import sys

from hero_core.reports.bench_report import main

if __name__ == "__main__":
    sys.exit(main())
