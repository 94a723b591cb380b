"""FFNs skipped per token by absolute position, on 2,048-token sequences of held-out text.

``OMP_NUM_THREADS=1 python scripts/position_skip.py [--checkpoints NAME ...] [--sequences 2]
[--report]``: the command line is hero_core/reports/position_skip_run.py (its docstring says what is measured and
written), the numbers hero_core/eval/frontier/position_skip.py.
"""

import sys

from hero_core.reports.position_skip_run import main

if __name__ == "__main__":
    sys.exit(main())
