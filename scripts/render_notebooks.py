"""The three notebooks executed, with their outputs, as Markdown pages in docs/notebooks/ (``make notebooks``).

``python scripts/render_notebooks.py [--only NAME ...] [--out DIR]``: the command line is
hero_core/reports/notebook_pages.py (its docstring says what a page keeps and how its size is bounded).
"""

import sys

from hero_core.reports.notebook_pages import main

if __name__ == "__main__":
    sys.exit(main())
