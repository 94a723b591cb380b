"""The quality results of the bundled checkpoints (``make results`` runs this first): docs/results.json.

The frontier over tau, greedy chat answers, memory-attention entropy, the read-matters ablation and a bf16 check:
hero_core/eval/frontier/results.py (the command line; its docstring says what is measured) and
hero_core/eval/frontier/results_sections.py. Then ``scripts/quality_report.py`` renders docs/results.md.
"""

import sys

from hero_core.eval.frontier.results import main

if __name__ == "__main__":
    sys.exit(main())
