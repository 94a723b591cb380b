"""App latency on the embedded model: a 130-token prompt to drawn figures, in fp32 and in bf16.

``python scripts/app_latency.py [--runs 3] [--tokens 130] [--browser-nice N]`` serves ``app/main.py`` (no test mode:
SmolLM2-135M-Instruct and the default checkpoint) and routes held-out code prompts, cut to ``--tokens`` tokens, in
Route explorer in headless Chromium, two ways per precision: ``--runs`` prompts **opened by link** (a new page with
the prompt in the URL: the browser loads the app's scripts while the server routes) and ``--runs`` prompts
**pasted** over the prompt box of the open page (the page reruns without reloading). Two times per prompt:

* **server**: the page's own "Server time for this page" caption (the whole page script: the routed trace, its
  dense pass for the quality row, every figure and table), the time a faster browser could not remove;
* **browser**: from the navigation (or the paste) to the page drawn (server time, transfer, plotly's drawing).

Beside each time it reads the CPU seconds the app's server and Chromium used over the page (Linux ``/proc``; absent
elsewhere): on a machine where the browser shares the server's cores, that is where the server's time goes.
``--browser-nice 19`` starts Chromium at the lowest CPU priority, so it takes only what the server leaves idle.

Each precision first opens one warm-up prompt (loading the model and compiling nothing else is the first
visitor's price, reported apart); every measured prompt is new, so no run comes from the app's trace cache.
Writes docs/experiments/app-latency/results.json (results-browser-nice-N.json with ``--browser-nice``) and prints
a table. Run it on a quiet machine.
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
from functools import partial
from pathlib import Path

from hero_core.reports.app_browser import (
    FIND_SKIP_MAP_JS,
    NO_EXCEPTION_JS,
    SKIP_MAP_JS,
    browser_tab,
    embedded_env,
    served_app,
)

ROOT = Path(__file__).resolve().parents[1]

OUT = ROOT / "docs" / "experiments" / "app-latency" / "results.json"
PRECISIONS = {"full": "fp32", "bf16": "bf16"}  # the app's precision choice -> the name in the report
SERVER_TIME = re.compile(r"Server time for this page: ([0-9.]+) s \((\d+) tokens")
PAGE_TIMEOUT_S = 300
HOW = {"opened": "opened by link (a new page)", "pasted": "pasted into the open page"}
# The server-time caption once this run has drawn it (Streamlit marks a previous run's elements stale until redrawn).
CAPTION_JS = ("([...document.querySelectorAll('p')].find(p => p.innerText.startsWith('Server time for this page')"
              " && !p.closest('[data-stale=\"true\"]')) || {}).innerText || null")
SELECT_PROMPT_JS = ("(() => { const box = document.querySelector('textarea[aria-label=\"Prompt\"]');"
                    " if (!box) return false; box.focus(); box.select(); return true; })()")


def held_out_prompts(n: int, tokens: int) -> list[str]:
    """``n`` distinct held-out code texts, each cut to its first ``tokens`` tokens of the embedded tokenizer."""
    from transformers import AutoTokenizer

    from hero_core.core.backbones import embedded_model_dir
    from hero_core.core.data import domain_texts

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir())
    prompts = []
    for text in domain_texts("code", "eval", 4 * n):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) >= tokens:
            prompts.append(tokenizer.decode(ids[:tokens]))
        if len(prompts) == n:
            return prompts
    raise SystemExit(f"fewer than {n} held-out code texts have {tokens} tokens")


def cpu_seconds(command_word: str) -> float | None:
    """CPU seconds (user + system) used so far by every process whose command line holds ``command_word``; None
    without Linux's /proc."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        return None
    ticks = 0
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if command_word.encode() not in (entry / "cmdline").read_bytes():
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (children are counted as their own processes)
    return ticks / os.sysconf("SC_CLK_TCK")


def cpu_used(before: dict, after: dict) -> dict:
    return {name: None if before[name] is None else round(after[name] - before[name], 2) for name in before}


def cpu_now() -> dict:
    return {"server_cpu_s": cpu_seconds("streamlit"), "browser_cpu_s": cpu_seconds("chromium")}


def open_explorer(tools, base: str, prompt: str, precision: str) -> dict:
    """Open Route explorer on ``prompt``; the server's and the browser's time to the drawn skip map, and the CPU
    seconds each used meanwhile."""
    cpu_before = cpu_now()
    query = {"prompt": prompt}
    if precision != "full":
        query["precision"] = precision
    started = time.monotonic()
    tools.goto(f"{base}/explorer?{urllib.parse.urlencode(query)}")
    tools.wait_for(f"(() => {{ const g = {FIND_SKIP_MAP_JS}; return g && g.querySelector('.main-svg') !== null; }})()",
                   timeout=PAGE_TIMEOUT_S, what="the skip map")
    browser_s = time.monotonic() - started
    caption = tools.wait_for(CAPTION_JS, timeout=PAGE_TIMEOUT_S, what="the server-time caption")
    return read_times(tools, caption, browser_s, precision, cpu_before)


def paste_prompt(tools, prompt: str, precision: str) -> dict:
    """Paste ``prompt`` over the prompt box of the open Route explorer and click outside it, as a person does:
    the page reruns without reloading. The same times as :func:`open_explorer`, from the paste on."""
    # The new prompt's skip map differs from the old one's; the caption alone may not (same time, same length).
    tools.eval(f"window.heroMapBefore = JSON.stringify({SKIP_MAP_JS}), true")
    cpu_before = cpu_now()
    started = time.monotonic()
    if not tools.eval(SELECT_PROMPT_JS):
        raise SystemExit("Route explorer has no prompt box")
    tools.send("Input.insertText", {"text": prompt})  # as typed or pasted: the page's own input events fire
    tools.eval("document.activeElement.blur(), true")  # the box commits when it loses focus
    caption = tools.wait_for(f"(() => JSON.stringify({SKIP_MAP_JS}) !== window.heroMapBefore && {CAPTION_JS})()",
                             timeout=PAGE_TIMEOUT_S, what="the new prompt's skip map and server-time caption")
    browser_s = time.monotonic() - started
    return read_times(tools, caption, browser_s, precision, cpu_before)


def read_times(tools, caption: str, browser_s: float, precision: str, cpu_before: dict) -> dict:
    if not tools.eval(NO_EXCEPTION_JS):
        raise SystemExit(f"the explorer shows an exception ({precision})")
    match = SERVER_TIME.search(caption)
    if match is None:
        raise SystemExit(f"unexpected caption: {caption!r}")
    return {"server_s": float(match.group(1)), "browser_s": round(browser_s, 3), "tokens": int(match.group(2)),
            **cpu_used(cpu_before, cpu_now())}


def median_or_none(values: list) -> float | None:
    return None if None in values else round(statistics.median(values), 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="measured prompts per precision")
    parser.add_argument("--tokens", type=int, default=130)
    parser.add_argument("--browser-nice", type=int, default=0, metavar="N",
                        help="start Chromium at niceness N (e.g. 19): it then takes only the CPU the server leaves "
                             "idle, as a browser on another machine would; results go to results-browser-nice-N.json")
    args = parser.parse_args()
    out = OUT.with_name(f"results-browser-nice-{args.browser_nice}.json") if args.browser_nice else OUT
    per_precision = 2 * args.runs + 1  # a warm-up, then new prompts opened by link and pasted into the open page
    prompts = held_out_prompts(len(PRECISIONS) * per_precision, args.tokens)
    report = {"prompt_tokens": args.tokens, "page": "Route explorer (quality row on)",
              "browser_nice": args.browser_nice, "precisions": {}}
    with served_app(embedded_env(), start_timeout=120) as base, browser_tab(nice=args.browser_nice) as tools:
        for i, (precision, name) in enumerate(PRECISIONS.items()):
            own = prompts[i * per_precision:(i + 1) * per_precision]
            first = open_explorer(tools, base, own[0], precision)
            print(f"{name}: first visit (loads the model) {first['browser_s']:.1f} s", flush=True)
            block = report["precisions"][name] = {"first_visit": first}
            ways = (("opened", own[1:args.runs + 1], partial(open_explorer, tools, base, precision=precision)),
                    ("pasted", own[args.runs + 1:], partial(paste_prompt, tools, precision=precision)))
            for how, prompts_here, measure in ways:
                runs = []
                for prompt in prompts_here:
                    runs.append(measure(prompt))
                    run = runs[-1]
                    print(f"{name}, {how}: server {run['server_s']:.2f} s · browser {run['browser_s']:.2f} s "
                          f"({run['tokens']} tokens) · CPU used meanwhile: server {run['server_cpu_s']} s, "
                          f"Chromium {run['browser_cpu_s']} s", flush=True)
                block[how] = {"runs": runs, "server_s_median": statistics.median(r["server_s"] for r in runs),
                              "browser_s_median": round(statistics.median(r["browser_s"] for r in runs), 3),
                              **{f"{key}_median": median_or_none([r[key] for r in runs])
                                 for key in ("server_cpu_s", "browser_cpu_s")}}
    print("\n| precision | prompt | server time (median) | browser, to the drawn page (median) | "
          "CPU over the page: server / Chromium (median) |")
    print("|---|---|---|---|---|")
    for name, block in report["precisions"].items():
        for how in ("opened", "pasted"):
            r = block[how]
            print(f"| {name} | {HOW[how]} | {r['server_s_median']:.2f} s | {r['browser_s_median']:.2f} s | "
                  f"{r['server_cpu_s_median']} s / {r['browser_cpu_s_median']} s |")
        print(f"| {name} | first visit (loads the model) | | {block['first_visit']['browser_s']:.1f} s | |")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
