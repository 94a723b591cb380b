"""Drive the served app in Debian's headless Chromium, for the browser tests, the README screenshots and the latency
benchmark (``scripts/app_latency.py``).

* :class:`DevTools`: a minimal Chrome DevTools Protocol client over the ``websockets`` package Streamlit already
  depends on (nothing beyond requirements.txt);
* :func:`chromium_endpoint`: a headless Chromium, yielding its DevTools WebSocket URL;
* :func:`open_tab`: one more tab of it, sized like a laptop screen; :func:`browser_tab`: both for a script.

The app itself is served by :mod:`hero_core.reports.served_app`. A Chromium that is missing or does not open its
DevTools endpoint raises :class:`BrowserUnavailable` (tests turn it into a skip; scripts stop with the message).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from base64 import b64decode
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hero_core.reports.served_app import stop

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--remote-debugging-port=0", "--window-size=1400,1000"]
NO_EXCEPTION_JS = ("document.querySelectorAll('[data-testid=\"stException\"]').length === 0 && "
                   "!document.body.innerText.includes('Traceback')")
# Why this decision? attributes a decision past the 24th token on this button.
ATTRIBUTE_BUTTON_JS = ("[...document.querySelectorAll('button')].find(b => b.innerText.trim().endsWith("
                       "'Attribute this decision'))")
CLICK_ATTRIBUTE_JS = f"(() => {{ const b = {ATTRIBUTE_BUTTON_JS}; if (b) b.click(); return true; }})()"
# Streamlit's theme wraps titles in <b>; plotly decodes typed arrays into _fullData.
FIND_SKIP_MAP_JS = ("[...document.querySelectorAll('.js-plotly-plot')].find(d => d._fullLayout && "
                    "d._fullLayout.title.text.replace(/<[^>]*>/g, '').startsWith('Skip map'))")
SKIP_MAP_JS = (f"(() => {{ const g = {FIND_SKIP_MAP_JS}; if (!g) return null; "
               "const c = g._fullData.find(t => t.name === 'cells'); if (!c) return null; "
               "return {n: c.x.length, gate: Array.from(c.marker.color)}; })()")


class BrowserUnavailable(RuntimeError):
    """Chromium is not installed or did not open its DevTools endpoint."""


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
        if found:
            return found
    return None


class DevTools:
    """A minimal Chrome DevTools Protocol client: one flattened session on one page."""

    def __init__(self, ws_url: str) -> None:
        from websockets.sync.client import connect

        self.ws = connect(ws_url, max_size=None, open_timeout=30)
        self.next_id = 0
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

    def send(self, method: str, params: dict | None = None, timeout: float = 60.0) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if method.split(".")[0] not in ("Target",):
            message["sessionId"] = self.session
        self.ws.send(json.dumps(message))
        deadline = time.monotonic() + timeout
        while True:
            reply = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def eval(self, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 90.0, what: str = ""):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = self.eval(expression)
            except RuntimeError:  # the document is being replaced (navigation): try again
                value = None
            if value:
                return value
            time.sleep(0.4)
        body = self.eval("document.body ? document.body.innerText.slice(0, 1500) : ''")
        raise AssertionError(f"timed out waiting for {what or expression}; page text:\n{body}")

    def goto(self, url: str) -> None:
        # Streamlit rewrites the query string once the page runs (its URL-bound widgets), so the new document is
        # recognised by its path and by not carrying the mark set on the old one, not by the whole address.
        try:
            self.eval("window.__heroLeaving = true")
        except RuntimeError:
            pass
        self.send("Page.navigate", {"url": url})
        parts = urllib.parse.urlsplit(url)
        path = f"{parts.scheme}://{parts.netloc}{parts.path or '/'}"
        self.wait_for(f"!window.__heroLeaving && location.origin + location.pathname === {json.dumps(path)} && "
                      "document.readyState === 'complete'", what=f"navigation to {url}")

    def screenshot(self, path: Path) -> None:
        # On a loaded two-core machine the compositor can take over a minute to produce a frame after plotly
        # draws; bring the tab to the front (a background tab may not paint at all) and allow one retry.
        self.send("Page.bringToFront")
        try:
            data = self.send("Page.captureScreenshot", {"format": "png"}, timeout=150.0)["data"]
        except TimeoutError:
            data = self.send("Page.captureScreenshot", {"format": "png", "fromSurface": True}, timeout=150.0)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b64decode(data))

    def click(self, x: float, y: float) -> None:
        # Plotly resolves a click to the point under the last hover, so move there first.
        self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
        time.sleep(0.3)
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})

    def close(self) -> None:
        self.ws.close()


@contextmanager
def chromium_endpoint(nice: int = 0) -> Iterator[str]:
    """A headless Chromium; yields its DevTools WebSocket URL (each DevTools client opens its own tab).

    ``nice`` > 0 starts it (and so every process it spawns) at that lower CPU priority (POSIX), so that on a machine
    it shares with the app's server it takes only the CPU the server leaves idle, as a browser on another machine
    would."""
    exe = find_chromium()
    if exe is None:
        raise BrowserUnavailable("Chromium is not installed (apt-get install chromium; `make test` does it)")
    profile = Path(tempfile.mkdtemp(prefix="hero-lens-chromium-"))
    proc = subprocess.Popen([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=(lambda: os.nice(nice)) if nice else None)
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise BrowserUnavailable("Chromium did not start a DevTools endpoint")
            time.sleep(0.2)
        port, path = port_file.read_text().splitlines()[:2]
        yield f"ws://127.0.0.1:{port}{path}"
    finally:
        stop(proc)
        shutil.rmtree(profile, ignore_errors=True)


def open_tab(endpoint: str, width: int = 1400, height: int = 1600) -> DevTools:
    tools = DevTools(endpoint)
    tools.send("Page.enable")
    tools.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                      "mobile": False})
    # Tabs opened side by side are hidden from each other; a hidden page may defer its drawing.
    tools.send("Emulation.setFocusEmulationEnabled", {"enabled": True})
    return tools


@contextmanager
def browser_tab(width: int = 1400, height: int = 1500, *, nice: int = 0) -> Iterator[DevTools]:
    """One tab of a fresh headless Chromium, for scripts (``nice``: as :func:`chromium_endpoint`)."""
    with chromium_endpoint(nice) as endpoint:
        tools = open_tab(endpoint, width, height)
        try:
            yield tools
        finally:
            tools.close()
