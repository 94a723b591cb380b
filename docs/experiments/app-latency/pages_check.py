"""Time and screenshot the changed pages: page switches to Study and Compare, Compare by link with 3 and 5 runs, a
long prompt on Route explorer, a wrong URL value on Compare, each with a screenshot in OUTDIR.

Run from the root of the tree to measure (``PYTHONPATH`` set to it for an older tree):
``python docs/experiments/app-latency/pages_check.py OUTDIR``.
"""
import json
import sys
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))  # scripts/ of the tree being measured
from hero_core.reports.page_clock import instrument
from hero_core.reports.served_app import embedded_env, served_app
from hero_lens_tools.app_browser import NO_EXCEPTION_JS, browser_tab
from scripts.app_latency import Session, held_out_prompts

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
log = out / "timings.log"
env = embedded_env() | {"HERO_LENS_TIMINGS": str(log)}
long_prompt = " ".join(held_out_prompts(3, 200))
rows = []
with served_app(env, start_timeout=180) as base, browser_tab() as tools:
    tools.send("Emulation.setDeviceMetricsOverride",
               {"width": 1400, "height": 2400, "deviceScaleFactor": 1, "mobile": False})
    s = Session(tools, base, log)
    instrument(tools)
    s.time("first", "first visit", s.goto(""), new_document=True)
    time.sleep(25)  # let the background warm-up finish
    def shot(name):
        time.sleep(1.5)
        assert tools.eval(NO_EXCEPTION_JS), name
        tools.eval("window.scrollTo(0, 0); true")
        tools.screenshot(out / f"{name}.png")
    for page in ("study", "compare", "explorer", "memory", "why"):
        s.time("switch", f"switch to {page}", s.nav(page))
        shot(f"switch-{page}")
    for n in (3, 5):
        names = ["hero-10-r4", "local-10", "hero-25", "local-25", "hero-40"][:n]
        q = urllib.parse.urlencode({"compare_preset": "Checkpoints", "compare_checkpoints": names}, doseq=True)
        s.time("compare", f"Compare with {n} checkpoints by link", s.goto(f"compare?{q}"), new_document=True)
        shot(f"compare-{n}")
    q = urllib.parse.urlencode({"compare_checkpoints": "nope-99", "compare_preset": "Checkpoints"})
    s.time("bad url", "Compare with compare_checkpoints=nope-99", s.goto(f"compare?{q}"), new_document=True)
    shot("compare-bad-url")
    print("warned:", tools.eval("document.body.innerText.includes('nope-99')"))
    q = urllib.parse.urlencode({"prompt": long_prompt})
    s.time("long prompt", "Route explorer with a ~600-token prompt by link", s.goto(f"explorer?{q}"), new_document=True)
    shot("explorer-long")
    s.time("switch", "switch to study (again)", s.nav("study"))
    shot("study")
(out / "rows.json").write_text(json.dumps(s.rows, indent=1))
