"""A person's clock on a Streamlit page in headless Chromium: from a click (or a navigation) to the page drawn and
idle, with the first meaningful content on the way, the browser's own work over the action and the server's.

* :data:`INSTRUMENT_JS` runs in every new document of the tab (``Page.addScriptToEvaluateOnNewDocument``): a
  MutationObserver notes the time of the last change to the page and counts the script runs Streamlit starts
  (its ``stApp`` element's ``data-test-script-state`` turning ``running``).
* :func:`measure` performs an action and waits until Streamlit is not running, nothing is stale or spinning, every
  plotly chart has drawn and the page has not changed for :data:`QUIET_MS`; the page is *idle* at its last change.
* Beside the browser clock: Chromium's own ``Performance.getMetrics`` (script, layout, style, task seconds) over the
  action, the CPU seconds the server and Chromium processes used (Linux ``/proc``), and the server's own time per
  rerun from the log ``app/components/rerun_timing.py`` writes when ``HERO_LENS_TIMINGS`` is set.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

QUIET_MS = 600  # no change to the page for this long after the script ended: drawn and idle
POLL_S = 0.05

INSTRUMENT_JS = """
(() => {
  const s = window.__heroClock = {last: performance.now(), runs: 0, running: false};
  new MutationObserver(records => {
    s.last = performance.now();
    for (const r of records) {
      if (r.type === 'attributes' && r.attributeName === 'data-test-script-state') {
        const now = r.target.getAttribute('data-test-script-state') === 'running';
        if (now && !s.running) s.runs += 1;
        s.running = now;
      }
    }
  }).observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
})();
"""
STATE_JS = """(() => {
  const s = window.__heroClock; const app = document.querySelector('[data-testid="stApp"]');
  if (!s || !app || window.__heroLeaving) return null;
  const state = app.getAttribute('data-test-script-state');
  const busy = !!document.querySelector('[data-stale="true"], [data-testid="stSpinner"]')
    || [...document.querySelectorAll('.js-plotly-plot')].some(p => !p.querySelector('.main-svg'));
  return {runs: s.runs, state: state, busy: busy, quiet_ms: performance.now() - s.last,
          last_epoch_ms: performance.timeOrigin + s.last, h1: (document.querySelector('h1') || {}).innerText || '',
          exception: document.querySelectorAll('[data-testid="stException"]').length,
          errors: [...document.querySelectorAll('[data-testid="stAlertContentError"]')].map(e => e.innerText),
          svg_nodes: document.querySelectorAll('svg *').length,
          charts: document.querySelectorAll('.js-plotly-plot').length};
})()"""
# First meaningful content: the page's title and, below it, a chart, a metric or a table of this run (not stale).
CONTENT_JS = """(() => {
  const fresh = sel => [...document.querySelectorAll(sel)].some(e => !e.closest('[data-stale="true"]'));
  return fresh('.js-plotly-plot .main-svg') || fresh('[data-testid="stMetric"]')
    || fresh('[data-testid="stDataFrame"]');
})()"""
BROWSER_METRICS = ("TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration")


# What the app server's command line holds, whether started as `make run` starts it (app/serve.py) or as a plain
# `streamlit run`: both are given the server's port (and Chromium's command line is not).
SERVER_WORD = "--server.port"

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


def instrument(tools) -> None:
    """Install the page clock in every document this tab opens from now on (and in the open one)."""
    tools.send("Page.addScriptToEvaluateOnNewDocument", {"source": INSTRUMENT_JS})
    tools.send("Performance.enable")
    try:
        tools.eval(f"window.__heroClock ? true : ({INSTRUMENT_JS}, true)")
    except RuntimeError:
        pass


def browser_metrics(tools) -> dict[str, float]:
    metrics = {m["name"]: m["value"] for m in tools.send("Performance.getMetrics")["metrics"]}
    return {name: metrics.get(name, 0.0) for name in BROWSER_METRICS}


def server_reruns(log: Path | None, since_epoch: float) -> list[dict]:
    """The reruns the server logged that started at or after ``since_epoch``."""
    if log is None or not log.exists():
        return []
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["started"] >= since_epoch - 0.01]


def measure(tools, action: Callable[[], None], *, new_document: bool, log: Path | None = None,
            done_js: str | None = None, content_js: str = CONTENT_JS, timeout: float = 600.0) -> dict:
    """Perform ``action`` and time it as a person sees it.

    ``new_document``: the action loads a new page (navigation, reload), so the clock starts afresh there; else the
    page must start at least one new script run. ``done_js``: an extra condition the finished page must meet (say,
    a skip map different from the one before). Returns seconds from the action to the first meaningful content
    (``content_s``) and to the page drawn and idle (``idle_s``), the server's reruns and time, the CPU seconds of
    server and browser, and Chromium's own script / layout / style seconds over the action."""
    if new_document:  # the old document must not pass for the new one while the navigation is under way
        tools.eval("window.__heroLeaving = true")
    runs_before = 0 if new_document else (tools.eval("window.__heroClock ? window.__heroClock.runs : 0") or 0)
    metrics_before, cpu_before = browser_metrics(tools), _cpu_now()
    started_epoch, started = time.time(), time.monotonic()
    action()
    state, content_s = _wait_until_idle(tools, runs_before, started, timeout, content_js, done_js)
    idle_s = state["last_epoch_ms"] / 1000 - started_epoch
    reruns = server_reruns(log, started_epoch)
    return {
        "content_s": round(min(content_s if content_s is not None else idle_s, idle_s), 3),
        "idle_s": round(idle_s, 3),
        "server_s": round(sum(r["wall_s"] for r in reruns), 3) if log else None,
        "server_reruns": len(reruns) if log else None,
        **_cpu_spent(cpu_before, _cpu_now()),
        **_metrics_spent(metrics_before, browser_metrics(tools)),
        "svg_nodes": state["svg_nodes"], "charts": state["charts"], "exception": state["exception"],
        "errors": state["errors"],
    }


def _wait_until_idle(tools, runs_before: int, started: float, timeout: float, content_js: str,
                     done_js: str | None) -> tuple[dict, float | None]:
    """Poll the page until a new script run has ended, nothing is stale, spinning or undrawn, the page has been
    quiet for :data:`QUIET_MS` and ``done_js`` holds: the page's last state, and seconds from ``started`` to the
    first meaningful content (None if it never showed before the page went idle)."""
    content_s = None
    while True:
        now = time.monotonic()
        if now > started + timeout:
            raise TimeoutError(f"the page was not idle {timeout:.0f} s after the action")
        try:
            state = tools.eval(STATE_JS)
            ran = bool(state) and state["runs"] > runs_before
            if content_s is None and ran and tools.eval(content_js):
                content_s = now - started
            extra = tools.eval(done_js) if done_js and state else True
        except RuntimeError:  # the document is being replaced
            state, ran, extra = None, False, False
        if ran and state["state"] == "notRunning" and not state["busy"] and state["quiet_ms"] >= QUIET_MS and extra:
            return state, content_s
        time.sleep(POLL_S)


def _cpu_now() -> dict[str, float | None]:
    return {"server": cpu_seconds(SERVER_WORD), "browser": cpu_seconds("chromium")}


def _cpu_spent(before: dict, after: dict) -> dict[str, float | None]:
    """CPU seconds the server and the browser used between two :func:`_cpu_now` (None without /proc)."""
    return {f"{who}_cpu_s": None if before[who] is None else round(after[who] - before[who], 2)
            for who in ("server", "browser")}


def _metrics_spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Chromium's script / layout / style / task seconds between two :func:`browser_metrics`. A new document may
    start its renderer's counters afresh: then all of the new count is this action's."""
    spent = {name: after[name] - before[name] if after[name] >= before[name] else after[name]
             for name in BROWSER_METRICS}
    return {f"browser_{name[:-len('Duration')].lower()}_s": round(spent[name], 3) for name in BROWSER_METRICS}
