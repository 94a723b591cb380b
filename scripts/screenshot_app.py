"""Screenshots of the app on the embedded model with the bundled default checkpoint, for the README.

``python scripts/screenshot_app.py`` serves ``app/main.py`` (no test mode: SmolLM2-135M-Instruct + hero-10),
drives Debian's headless Chromium over the DevTools protocol (the client of tests/test_app_browser.py) and
writes docs/screenshots/{explorer,memory,compare,generate}.png once each page has drawn.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.test_app_browser import CHROMIUM_FLAGS, NO_EXCEPTION_JS, DevTools, free_port  # noqa: E402

OUT = ROOT / "docs" / "screenshots"
PROMPT = "Question: Ana has 12 apples. Then Ana gets 7 more. How many apples does Ana have now?\nAnswer: 12 + 7 = 19."
PAGES = (("explorer", "Route explorer", 4), ("memory", "Memory view", 4), ("compare", "Compare runs", 6),
         ("why", "Why this decision?", 2))


def main() -> int:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "HERO_LENS_TINY"}
    app = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "app" / "main.py"), "--server.port",
                            str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
                            "--server.fileWatcherType", "none"], cwd=ROOT, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    profile = Path(tempfile.mkdtemp(prefix="hero-lens-shots-"))
    exe = shutil.which("chromium") or "/usr/bin/chromium"
    browser = subprocess.Popen([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(180):
            try:
                if urllib.request.urlopen(f"{base}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.5)
        port_file = profile / "DevToolsActivePort"
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            time.sleep(0.2)
        ws_port, path = port_file.read_text().splitlines()[:2]
        tools = DevTools(f"ws://127.0.0.1:{ws_port}{path}")
        tools.send("Page.enable")
        tools.send("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": 1500, "deviceScaleFactor": 1,
                                                          "mobile": False})
        for page, title, charts in PAGES:
            query = urllib.parse.urlencode({"prompt": PROMPT})
            tools.goto(f"{base}/{'' if page == 'explorer' else page}?{query}")
            tools.wait_for(f"document.querySelector('h1')?.innerText.includes({title!r})", timeout=300)
            tools.wait_for(f"document.querySelectorAll('.js-plotly-plot').length >= {charts}", timeout=300,
                           what=f"{charts} charts on {page}")
            time.sleep(2.0)
            if not tools.eval(NO_EXCEPTION_JS):
                raise SystemExit(f"the {page} page shows an exception")
            OUT.mkdir(parents=True, exist_ok=True)
            tools.screenshot(OUT / f"{page}.png")
            print(f"wrote {OUT / f'{page}.png'}", flush=True)
        tools.close()
    finally:
        for proc in (browser, app):
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(profile, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
