"""App latency for a ~130-token prompt, fp32 and bf16 side by side: ``python scripts/app_latency.py``.

* **server**: the explorer page run in this process (Streamlit's AppTest) with the model already loaded; the wall
  time of the run after a new prompt is typed (the routed trace, the dense pass it is compared with, every
  figure), and the page's own "Server time" caption.
* **browser** (when Chromium is installed): the app served on the embedded model; Chromium opens
  ``/?prompt=…&precision=…`` in a fresh session and the clock stops when the skip map is drawn with every cell.

Every repetition uses a different prompt, so nothing comes from the result cache. One torch thread, as the app
uses on this 2-core machine. Prints a table and writes docs/experiments/app-latency.json. Run it on a quiet
machine: anything else on the cores lowers every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OUT = ROOT / "docs" / "experiments" / "app-latency.json"
PRECISIONS = ("full", "bf16")  # the sidebar's names: full = fp32
PROMPT_TOKENS = 130
BASE_TEXT = ("Dynamic depth lets a language model spend less compute on easy tokens. A router looks at each token "
             "before every feed-forward block and decides whether to run the block or a small adapter instead. "
             "The history-aware router also reads a memory of the decisions it made in earlier blocks, so a token "
             "that skipped twice in a row can be treated differently from one that has run every block so far. "
             "Whether this helps depends on the budget, the data and the size of the backbone, and the honest way "
             "to tell is to compare routers at equal compute on text they have never seen.")
SERVER_TIME = re.compile(r"Server time for this page: ([0-9.]+) s")


def prompts(n: int) -> list[str]:
    """``n`` different prompts of PROMPT_TOKENS tokens each (a numbered variant of one paragraph)."""
    from transformers import AutoTokenizer

    from hero_core.backbones import embedded_model_dir

    tok = AutoTokenizer.from_pretrained(embedded_model_dir())
    out = []
    for i in range(n):
        ids = tok(f"Note {i + 1}. {BASE_TEXT} {BASE_TEXT}", add_special_tokens=False)["input_ids"]
        out.append(tok.decode(ids[:PROMPT_TOKENS]))
    return out


def server_times(precision: str, texts: list[str]) -> dict:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=900)
    at.session_state["sb_precision"] = precision
    at.run()  # loads the model and draws the default prompt: not timed
    walls, captions = [], []
    for text in texts:
        at.text_area(key="explorer_prompt").input(text)
        start = time.perf_counter()
        at.run()
        walls.append(time.perf_counter() - start)
        if at.exception:
            raise SystemExit(f"the explorer page raised: {at.exception[0].value}")
        found = [float(m.group(1)) for c in at.caption if (m := SERVER_TIME.search(c.value))]
        captions.extend(found[:1])
    return {"run_s": walls, "page_caption_s": captions}


def browser_times(precision: str, texts: list[str]) -> dict:
    from scripts.app_browser import SKIP_MAP_JS, browser_tab, embedded_env, served_app

    min_cells = 30 * (PROMPT_TOKENS - 10)  # the embedded model routes 30 blocks; the tokenizer may merge a few

    def open_and_wait(tools, base: str, text: str) -> float:
        start = time.perf_counter()
        tools.goto(f"{base}/?{urllib.parse.urlencode({'prompt': text, 'precision': precision})}")
        tools.wait_for(f"(() => {{ const m = {SKIP_MAP_JS}; return m && m.n >= {min_cells}; }})()", timeout=600,
                       what="the skip map")
        return time.perf_counter() - start

    with served_app(embedded_env(), start_timeout=120) as base, browser_tab() as tools:
        open_and_wait(tools, base, "Warm up: load the model.")  # model load: not timed
        return {"end_to_end_s": [open_and_wait(tools, base, text) for text in texts]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=3, help="prompts timed per precision and path")
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    os.environ.pop("HERO_LENS_TINY", None)
    os.environ["HERO_LENS_THREADS"] = "1"
    texts = prompts(2 * args.reps * len(PRECISIONS))
    results = {}
    for i, precision in enumerate(PRECISIONS):
        batch = texts[2 * i * args.reps: (2 * i + 1) * args.reps]
        results[precision] = server_times(precision, batch)
        if not args.no_browser:
            results[precision] |= browser_times(precision, texts[(2 * i + 1) * args.reps: (2 * i + 2) * args.reps])
        print(precision, {k: [round(x, 2) for x in v] for k, v in results[precision].items()}, flush=True)
    print("\n| precision | server: page run, median s | server: page's own caption, median s | "
          "browser: URL to skip map, median s |\n|---|---|---|---|")
    for precision, r in results.items():
        cells = [statistics.median(r[k]) if r.get(k) else None for k in ("run_s", "page_caption_s", "end_to_end_s")]
        print(f"| {precision} | " + " | ".join("–" if c is None else f"{c:.2f}" for c in cells) + " |")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"prompt_tokens": PROMPT_TOKENS, "threads": 1, "reps": args.reps,
                               "load_average": os.getloadavg(), "results": results}, indent=1))
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
