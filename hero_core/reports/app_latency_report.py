"""The app's latency table and its summary sentence (docs/app_latency.json, written by scripts/app_latency.py) for
docs/performance.md.

Both scripts/app_latency.py (after a run) and the performance page's renderer (hero_core/reports/bench_report.py,
which rewrites the whole page) draw it from here, so a rerun of either keeps the other's numbers.
"""

from __future__ import annotations

import json
from pathlib import Path


def latency_table(summary: list[dict]) -> list[str]:
    lines = ["| action | first content (s) | idle (s) | target | server time (s) | CPU server / Chromium (s) | "
             "Chromium script / layout (s) | SVG nodes |", "|---|---|---|---|---|---|---|---|"]
    for r in summary:
        verdict = " · ".join(
            f"{what} ≤ {limit:g} s " + ("met" if r.get(key, 0) <= limit else "**missed**")
            for what, key, limit in (("content", "content_s", r["target_content_s"]),
                                     ("idle", "idle_s", r["target_idle_s"])) if limit) or "—"
        lines.append(f"| {r['action']} | {r.get('content_s', 0):.2f} | {r.get('idle_s', 0):.2f} | {verdict} | "
                     f"{r.get('server_s', 0):.2f} | {r.get('server_cpu_s', '–')} / {r.get('browser_cpu_s', '–')} | "
                     f"{r.get('browser_script_s', 0):.2f} / {r.get('browser_layout_s', 0):.2f} | "
                     f"{int(r.get('svg_nodes', 0))} |")
    return lines



def latency_lines(result: dict) -> list[str]:
    """The measured conditions and the table, as lines of markdown."""
    return [f"Measured {result.get('measured_on', '?')} by `python scripts/app_latency.py --repeats "
            f"{result['repeats']}`: the app as `make run` serves it (embedded model, default checkpoint) in headless "
            f"Chromium on the same 2-core machine; medians of {result['repeats']} fresh servers (every repeat is a "
            f"first user); new prompts are {result['prompt_tokens']}-token held-out texts the server never saw. "
            "*First content*: the page's heading and its first chart, metric or table of this run; *idle*: Streamlit "
            "done, every chart drawn, the page unchanged for 0.6 s, timed at its last change. Server time: the page "
            "script's own reruns; CPU: the server's and Chromium's processes over the action.", "",
            *latency_table(result["summary"])]


def load_latency(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def summary_words(result: dict) -> list[str]:
    """The performance page's sentence on the app's speed, every figure read from the benchmark's summary (the
    README links it: a list of missed targets is more than a newcomer's first page should carry)."""
    rows = {r["action"]: r for r in result["summary"]}
    switches = [r for r in result["summary"] if r["kind"] == "page switch"]
    missed = [r["action"] for r in result["summary"] if not r["met"]]

    def span(key: str) -> str:
        values = [r[key] for r in switches]
        return f"{min(values):.1f}–{max(values):.1f} s"

    def idle(action: str) -> str:
        return f"{rows[action]['idle_s']:.1f} s" if action in rows else "not measured"

    explorer = rows.get("new prompt on Route explorer", {})
    drawn, settled = explorer.get("content_s", float("nan")), explorer.get("idle_s", float("nan"))
    return [f"a switch to any page at its defaults shows its first content in {span('content_s')} and is idle in "
            f"{span('idle_s')}; a new {result['prompt_tokens']}-token prompt's skip map appears in "
            f"{drawn:.1f} s (the page idle in {settled:.1f} s); a skip-map click is idle in "
            f"{idle('click a skip-map cell')}, a τ step in "
            f"{idle('τ one step up (sidebar)')}; Compare with 4 / 6 checkpoints in "
            f"{idle('Compare with 4 checkpoint(s), by link')} / {idle('Compare with 6 checkpoint(s), by link')}; the "
            f"first visit shows its first chart after {rows['first visit (model load included)']['content_s']:.1f} s "
            f"(the model load included), a reload is idle in {idle('reload of Route explorer')}. "
            f"{len(missed)} of {len(rows)} targets are not met yet: "
            + ", ".join(missed) + " ([what bounds each](experiments/app-latency/README.md))."]
