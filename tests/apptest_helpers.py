"""Driving the app headless (streamlit.testing AppTest) on the tiny model: shared by the app test files."""

import json
import os
import tempfile
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app"
MAIN = str(APP / "main.py")


def starter(monkeypatch, timeout: float):
    """A function that opens the app (optionally on a page, with query parameters) and checks it is clean."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("HERO_LENS_TINY", "1")
    private_cache(monkeypatch)

    def start(page: str | None = None, **query):
        at = AppTest.from_file(MAIN, default_timeout=timeout)
        at.query_params.update(query)
        at.run()
        if page:
            at.switch_page(f"views/{page}.py").run()
        assert_clean(at)
        return at

    return start


def opener(monkeypatch, timeout: float):
    """A function that opens one page straight from a link (``/generate?generate_seed=7``), as a fresh browser
    does: the page's own controls bound to the URL are read on that first run."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("HERO_LENS_TINY", "1")
    private_cache(monkeypatch)

    def open_page(page: str, **query):
        at = AppTest.from_file(MAIN, default_timeout=timeout)
        at.switch_page(f"views/{page}.py")
        at.query_params.update(query)
        return at.run()

    return open_page


def private_cache(monkeypatch) -> None:
    """A cache dir of this test's own: a long prompt typed into a page is stored for its link (the prompt store),
    and a test must not write into the user's cache. The tiny model needs nothing else from it."""
    if "HERO_LENS_CACHE" not in os.environ or not os.environ["HERO_LENS_CACHE"].startswith(tempfile.gettempdir()):
        monkeypatch.setenv("HERO_LENS_CACHE", tempfile.mkdtemp(prefix="hero-lens-test-cache-"))


def assert_clean(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def charts(at) -> dict[str, dict]:
    """Plotly charts on the page by title (the figure JSON Streamlit sends to the browser)."""
    out = {}
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        out[spec["layout"].get("title", {}).get("text", "")] = spec
    return out
