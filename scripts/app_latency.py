"""App latency on the embedded model: a 130-token prompt to drawn figures, in fp32 and in bf16.

``python scripts/app_latency.py [--runs 3] [--tokens 130]`` serves ``app/main.py`` (no test mode:
SmolLM2-135M-Instruct and the default checkpoint), opens Route explorer in headless Chromium with a held-out code
prompt cut to ``--tokens`` tokens in the URL, and reads two times per prompt:

* **server**: the page's own "Server time for this page" caption (the whole page script: the routed trace, its
  dense pass for the quality row, every figure and table), the time a faster browser could not remove;
* **browser**: from the navigation to the skip map drawn in the page (server time, transfer, plotly's drawing).

Beside each time it reads the CPU seconds the app's server and Chromium used over the page (Linux ``/proc``; absent
elsewhere): on a machine where the browser shares the server's cores, that is where the server's time goes.

Each precision first opens one warm-up prompt (loading the model and compiling nothing else is the first
visitor's price, reported apart); every measured prompt is new, so no run comes from the app's trace cache.
Writes docs/experiments/app-latency/results.json and prints a table. Run it on a quiet machine.
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

from hero_core.reports.app_browser import FIND_SKIP_MAP_JS, NO_EXCEPTION_JS, browser_tab, embedded_env, served_app

ROOT = Path(__file__).resolve().parents[1]

OUT = ROOT / "docs" / "experiments" / "app-latency" / "results.json"
PRECISIONS = {"full": "fp32", "bf16": "bf16"}  # the app's precision choice -> the name in the report
SERVER_TIME = re.compile(r"Server time for this page: ([0-9.]+) s \((\d+) tokens")
PAGE_TIMEOUT_S = 300


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
    caption = tools.wait_for("[...document.querySelectorAll('p')].map(p => p.innerText)"
                             ".find(t => t.startsWith('Server time for this page')) || null",
                             timeout=PAGE_TIMEOUT_S, what="the server-time caption")
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
    args = parser.parse_args()
    prompts = held_out_prompts(len(PRECISIONS) * (args.runs + 1), args.tokens)
    report = {"prompt_tokens": args.tokens, "page": "Route explorer (quality row on)", "precisions": {}}
    with served_app(embedded_env(), start_timeout=120) as base, browser_tab() as tools:
        for i, (precision, name) in enumerate(PRECISIONS.items()):
            own = prompts[i * (args.runs + 1):(i + 1) * (args.runs + 1)]
            first = open_explorer(tools, base, own[0], precision)
            print(f"{name}: first visit (loads the model) {first['browser_s']:.1f} s", flush=True)
            runs = []
            for prompt in own[1:]:
                runs.append(open_explorer(tools, base, prompt, precision))
                run = runs[-1]
                print(f"{name}: server {run['server_s']:.2f} s · browser {run['browser_s']:.2f} s "
                      f"({run['tokens']} tokens) · CPU used meanwhile: server {run['server_cpu_s']} s, "
                      f"Chromium {run['browser_cpu_s']} s", flush=True)
            report["precisions"][name] = {
                "first_visit": first, "runs": runs,
                "server_s_median": statistics.median(r["server_s"] for r in runs),
                "browser_s_median": round(statistics.median(r["browser_s"] for r in runs), 3),
                **{f"{key}_median": median_or_none([r[key] for r in runs])
                   for key in ("server_cpu_s", "browser_cpu_s")}}
    print("\n| precision | server time (median) | browser, navigation to drawn skip map (median) | first visit | "
          "CPU over the page: server / Chromium (median) |")
    print("|---|---|---|---|---|")
    for name, r in report["precisions"].items():
        print(f"| {name} | {r['server_s_median']:.2f} s | {r['browser_s_median']:.2f} s | "
              f"{r['first_visit']['browser_s']:.1f} s | {r['server_cpu_s_median']} s / {r['browser_cpu_s_median']} s |")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
