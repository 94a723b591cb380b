"""Screenshots of the app on the embedded model with the bundled default checkpoint, for the README.

``python scripts/screenshot_app.py`` serves the app as ``make run`` does (no test mode: SmolLM2-135M-Instruct + the
default checkpoint, hero_core.method.model.DEFAULT_CHECKPOINT), drives Debian's headless Chromium over the DevTools
protocol (hero_lens_tools/app_browser.py) and writes docs/screenshots/{explorer,memory,compare,why}.png once each
page has drawn.
"""

from __future__ import annotations

import sys
import time
import urllib.parse
from pathlib import Path

from hero_core.reports.served_app import embedded_env, served_app
from hero_lens_tools.app_browser import ATTRIBUTE_BUTTON_JS, CLICK_ATTRIBUTE_JS, NO_EXCEPTION_JS, browser_tab

ROOT = Path(__file__).resolve().parents[1]

OUT = ROOT / "docs" / "screenshots"
PROMPT = "Question: Ana has 12 apples. Then Ana gets 7 more. How many apples does Ana have now?\nAnswer: 12 + 7 = 19."
PAGES = (("explorer", "Route explorer", 4), ("memory", "Memory view", 4), ("compare", "Compare runs", 6),
         ("why", "Why this decision?", 3))


def main() -> int:
    with served_app(embedded_env(), start_timeout=90) as base, browser_tab() as tools:
        for page, title, charts in PAGES:
            query = urllib.parse.urlencode({"prompt": PROMPT})
            tools.goto(f"{base}/{'' if page == 'explorer' else page}?{query}")
            tools.wait_for(f"document.querySelector('h1')?.innerText.includes({title!r})", timeout=300)
            if page == "why":  # a decision past the 24th token is attributed on the button
                tools.wait_for(f"!!{ATTRIBUTE_BUTTON_JS} || document.querySelectorAll('.js-plotly-plot').length >= 3",
                               timeout=300, what="the Attribute button")
                tools.eval(CLICK_ATTRIBUTE_JS)
            tools.wait_for(f"document.querySelectorAll('.js-plotly-plot').length >= {charts}", timeout=300,
                           what=f"{charts} charts on {page}")
            time.sleep(2.0)
            if not tools.eval(NO_EXCEPTION_JS):
                raise SystemExit(f"the {page} page shows an exception")
            OUT.mkdir(parents=True, exist_ok=True)
            tools.screenshot(OUT / f"{page}.png")
            print(f"wrote {OUT / f'{page}.png'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
