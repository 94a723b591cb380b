"""How often the browser draws the skip map after a click or a τ step: every change to the page after the action,
counted per 50 ms (a full draw of the 2,310-cell map is ~20,000-30,000 attribute changes on its points).

Run from the root of the tree: ``python docs/experiments/app-latency/redraws_probe.py click`` (or ``tau``).
"""
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))  # scripts/ of the tree being measured
from hero_core.reports.page_clock import instrument
from hero_core.reports.served_app import embedded_env, served_app
from hero_lens_tools.app_browser import browser_tab
from scripts.app_latency import SKIP_MAP_DRAWN, Session

RECORD_JS = """(() => { window.__changes = []; const t0 = performance.now();
  const where = n => { const owner = n.closest && n.closest('[data-testid]');
    return (n.tagName || n.nodeName) + ' in ' + (owner ? owner.getAttribute('data-testid') : '-'); };
  new MutationObserver(records => { const t = performance.now() - t0;
    for (const r of records) window.__changes.push([Math.round(t), where(r.target)]); })
    .observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
  return true; })()"""

action = sys.argv[1] if len(sys.argv) > 1 else "click"
log = Path("/tmp/redraws-probe.log")
with served_app(embedded_env() | {"HERO_LENS_TIMINGS": str(log), "HERO_LENS_WARMUP": "0"}, start_timeout=180) as base, \
        browser_tab() as tools:
    session = Session(tools, base, log)
    instrument(tools)
    session.time("first", "first visit", session.goto("explorer"), new_document=True, content_js=SKIP_MAP_DRAWN)
    time.sleep(3)
    act = session.click_cell(3, 5) if action == "click" else session.tau_step()
    tools.eval(RECORD_JS)
    session.time(action, action, act)
    changes = tools.eval("window.__changes")
    print(f"{len(changes)} changes; per 50 ms:")
    for start, n in sorted(Counter(t // 50 * 50 for t, _ in changes).items()):
        top = Counter(w for t, w in changes if t // 50 * 50 == start).most_common(2)
        print(f"  {start:5d} ms {n:6d}  {top}")
