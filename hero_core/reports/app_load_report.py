"""The app's load table and its background-work cases (docs/app_load.json, written by scripts/app_load.py) for
docs/performance.md.

Both scripts/app_load.py (after a run) and the performance page's renderer (hero_core/reports/bench_report.py, which
rewrites the whole page) draw them from here, so a rerun of either keeps the other's numbers.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

BLOCK = "app-load"


def _s(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _met(ok: bool) -> str:
    return "met" if ok else "**missed**"


def load_table(load: dict) -> list[str]:
    lines = ["| visitors | new prompt → its map: median / p95 (s) | p95 target (N × lone median + 2 s) | "
             "page done: median / p95 (s) | all actions p95 (s) | errors | own numbers | "
             "server RSS before / peak / after (MiB) | server CPU (cores) |", "|---|---|---|---|---|---|---|---|---|"]
    for row, target in zip(load["phases"], load["targets"], strict=True):
        acts, server = row["actions"], row["server"]
        prompt = acts.get("new prompt", {})
        every = [a.get("done_s_p95") for a in acts.values() if a.get("done_s_p95") is not None]
        own = row["ownership"]
        others = f"; another visitor's: {len(own['another_visitors'])}" if own["another_visitors"] else ""
        label = _phase(row)
        if row.get("load_average") is not None:
            label += f" · load {row['load_average']:g}"
        lines.append(
            f"| {label} | {_s(prompt.get('result_s_median'))} / "
            f"{_s(prompt.get('result_s_p95'))} | ≤ {target['map_bound_s']:.2f}: {_met(target['map_met'])} | "
            f"{_s(prompt.get('done_s_median'))} / {_s(prompt.get('done_s_p95'))} | {_s(max(every) if every else None)}"
            f" | {len(row['errors'])} | {own['own']} of {own['of']}"
            f"{others}"
            f" | {server['rss_before_mib']:.0f} / {server['rss_peak_mib']:.0f} / {server['rss_after_mib']:.0f} "
            f"({100 * target['rss_growth']:+.0f} %) | {server['cores_used']:.2f} |")
    return lines


def _phase(row: dict) -> str:
    """A row's visitors: N at once, or the lone baseline (its visitors one after another)."""
    together = row.get("together", row["visitors"] != 1)
    return f"{row['visitors']} at once" if together else f"1 ({row['visitors']} in turn, each alone)"


def action_table(load: dict) -> list[str]:
    names = list(dict.fromkeys(name for row in load["phases"] for name in row["actions"]))
    lines = ["| action | " + " | ".join(_phase(row) for row in load["phases"]) + " |",
             "|---|" + "---|" * len(load["phases"])]
    for name in names:
        cells = []
        for row in load["phases"]:
            a = row["actions"].get(name)
            cells.append("–" if a is None else f"{_s(a.get('done_s_median'))} / {_s(a.get('done_s_p95'))}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def background_table(background: dict) -> list[str]:
    lines = ["| case | code | background on: visitor waits (s) | background off (s) | waited for the background (s) |",
             "|---|---|---|---|---|"]
    for label, cases in background.items():
        for name, sides in cases.items():
            on = statistics.median(r["action_s"] for r in sides["on"])
            off = statistics.median(r["action_s"] for r in sides["off"])
            lines.append(f"| {name} | {label} | {on:.2f} | {off:.2f} | {on - off:+.2f} |")
    return lines


def admission_lines(ab: dict) -> list[str]:
    """The same load with the visitors' computations admitted a few at a time and all at once (an A/B run)."""
    lines = [f"Admission, {ab['visitors']} visitors, `{ab['command']}` twice on one commit, once with every "
             "computation let in at once: seconds median / p95 (the lone baseline of each run beside it).", "",
             "| computations | lone: new prompt → map | new prompt → map | Memory | Compare | peak RSS (MiB) |",
             "|---|---|---|---|---|---|"]
    for label, row in (("admitted, as many as the cores (kept)", ab["with"]), ("all at once", ab["without"])):
        a = row["actions"]
        lines.append(f"| {label} | {_s(row['lone_map_median_s'])} | {_s(a['new prompt']['result_s_median'])} / "
                     f"{_s(a['new prompt']['result_s_p95'])} | {_s(a['switch to Memory']['done_s_median'])} / "
                     f"{_s(a['switch to Memory']['done_s_p95'])} | {_s(a['switch to Compare']['done_s_median'])} / "
                     f"{_s(a['switch to Compare']['done_s_p95'])} | {row['server']['rss_peak_mib']:.0f} |")
    return [*lines, ""]


def _misses(t: dict) -> list[str]:
    """The targets a row missed, each with by how much."""
    out = []
    if not t["no_error"]:
        out.append("errors shown")
    if not t["own_numbers"]:
        out.append("a visitor shown numbers not its own")
    if not t["map_met"]:
        over = t["map_p95_s"] - t["map_bound_s"]
        out.append(f"map p95 {t['map_p95_s']:.2f} s > {t['map_bound_s']:.2f} s (+{over:.2f} s)")
    if not t["rss_met"]:
        out.append(f"peak RSS {t['rss_peak_mib']:.0f} MiB > 2048 MiB (+{t['rss_peak_mib'] - 2048:.0f} MiB)")
    if not t["rss_back_met"]:
        out.append(f"RSS after {100 * t['rss_growth']:+.0f} % of before (target ≤ +10 %)")
    return out


def load_lines(result: dict) -> list[str]:
    """The measured conditions and the tables, as lines of markdown."""
    lines = []
    load = result.get("load")
    if load:
        lone = load["targets"][0]
        lines += [
            f"Measured {load.get('measured_on', '?')} by `{load.get('command', 'python scripts/app_load.py')}`: the "
            "app as `make run` serves it (embedded model, default checkpoint), its visitors clients of Streamlit's own "
            "websocket protocol (no browser: sixteen Chromiums would take the two cores the server is measured on). "
            f"Each visitor opens Route explorer, routes a {load['prompt_tokens']}-token held-out prompt of its own, "
            "switches to Memory view and to Compare runs (the default pair at matched compute, on its prompt); visitor "
            "0 also steps τ. Each row is a fresh server, measured after one opener visited Route explorer, Compare and "
            "Learn. *1* is the sixteen visitors one after another, each alone: the lone baseline (median "
            f"{_s(load['phases'][0]['actions']['new prompt']['result_s_median'])} s to a new prompt's map) and the "
            "numbers every visitor's are checked against (*own numbers*: every metric, the selected cell's line, "
            "Memory's metrics and Compare's table equal to its prompt's alone). "
            f"{load.get('conditions', '')}", "", *load_table(load), "",
            "Every action, median / p95 seconds to the page's end:", "", *action_table(load), ""]
        missed = [f"{_phase(row)}: " + ", ".join(_misses(t))
                  for row, t in zip(load["phases"], load["targets"], strict=True) if _misses(t)]
        lines += [f"Targets (no error, own numbers, map p95 ≤ N × {lone['map_bound_s'] - 2:.2f} + 2 s, RSS ≤ 2 GiB, "
                  "back within 10 %): " + ("all met." if not missed else "missed — " + "; ".join(missed) + "."), ""]
    if load and load.get("admission_ab"):
        lines += admission_lines(load["admission_ab"])
    background = result.get("background")
    if background:
        lines += ["The server's background work and a visitor (`python scripts/app_load.py --background`): each case "
                  "on a fresh server with the background work on, and off (`HERO_LENS_WARMUP=0`: the visitor computes "
                  "it all itself); seconds from the action to the page's end. *Before*: the code before the background "
                  "work was one design (nice-19 threads that held Streamlit's per-key lock); *after*: "
                  "app/components/background.py.", "", *background_table(background), "",
                  "What these numbers show and what they do not, and the tests that show a visitor waiting for a "
                  "background job: [experiments/app-load](experiments/app-load/README.md).", ""]
    return lines or ["Not measured yet: `python scripts/app_load.py`."]


def load_result(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
