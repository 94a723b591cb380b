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
    and a test must not write into the user's cache. The tiny model reads only the embedded model's tokenizer from
    it, linked in from the user's cache (:func:`cache_with_embedded_model`)."""
    if "HERO_LENS_CACHE" not in os.environ or not os.environ["HERO_LENS_CACHE"].startswith(tempfile.gettempdir()):
        monkeypatch.setenv("HERO_LENS_CACHE", str(cache_with_embedded_model(
            Path(tempfile.mkdtemp(prefix="hero-lens-test-cache-")))))


def cache_with_embedded_model(folder: Path) -> Path:
    """``folder`` as a private cache dir holding the embedded model's safetensors copy, linked from the user's cache
    (converted there first if need be, once per machine). Why: a fresh cache would convert the GGUF again for each
    test that starts the app (a minute or more on a loaded 2-core machine), and the app's first page waits for it."""
    from hero_core.backbones.loading import embedded_model_dir

    given = os.environ.pop("HERO_LENS_CACHE", None)  # the user's cache, not a test's, holds the one conversion
    try:
        converted = embedded_model_dir()
    finally:
        if given is not None:
            os.environ["HERO_LENS_CACHE"] = given
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / converted.name).exists():
        (folder / converted.name).symlink_to(converted, target_is_directory=True)
    return folder


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
