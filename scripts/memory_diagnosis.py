"""Why the bundled checkpoints' depth memory reads uniformly and gets no training signal, in numbers.

``python scripts/memory_diagnosis.py [--checkpoints hero-10 ...] [--limit 4] [--report]``: the measuring and the
command line are hero_core/train/memory_diagnosis_run.py (its docstring says what is measured), the page
hero_core/train/memory_diagnosis_page.py.
"""

import sys

from hero_core.train.memory_diagnosis_run import main

if __name__ == "__main__":
    sys.exit(main())
