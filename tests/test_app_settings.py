"""The sidebar's settings are one frozen value from the sidebar to the cached call, and everything of a page, its
sidebar and its link included, runs inside the page's error guard."""

import sys
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from hero_core.method.model import DEFAULT_CHECKPOINT as BUNDLED_DEFAULT

APP = Path(__file__).resolve().parents[1] / "app"
sys.path.insert(0, str(APP))  # the app's own helpers (components.*), the very modules the app's run imports

import components.link_view as link_view  # noqa: E402
import components.runtime as runtime  # noqa: E402
import components.settings as app_settings  # noqa: E402
from apptest_helpers import private_cache, starter  # noqa: E402
from components import sidebar_keys  # noqa: E402
from components.runtime import RunSpec  # noqa: E402
from components.settings import ModelSpec, Settings  # noqa: E402

TIMEOUT = 180


@pytest.fixture
def app(monkeypatch):
    return starter(monkeypatch, TIMEOUT)


class _CountingModel:
    """Stands in for a loaded model: counts the traces the cached call computes."""

    def __init__(self, calls: list):
        self.calls = calls

    def trace(self, prompt, **options):
        self.calls.append(options)
        return _Traced(len(self.calls))


class _Traced:
    def __init__(self, number: int):
        self.number = number

    def to_dict(self) -> dict:
        return {"computed": self.number}


def test_equal_settings_share_a_cache_entry_and_different_ones_do_not(monkeypatch):
    calls: list = []
    monkeypatch.setattr(runtime, "_load", lambda spec: _CountingModel(calls))
    prompt = f"a prompt of this test only {uuid.uuid4()}"  # no other test's entry in the process-wide cache
    base = Settings(ModelSpec(tiny=True), variant="hero", tau=0.5, max_tokens=64)
    first = runtime._trace_dict(base, prompt, False)
    assert runtime._trace_dict(Settings(ModelSpec(tiny=True), "hero", 0.5, 64), prompt, False) == first
    assert len(calls) == 1  # an equal value, built anew: the same key
    changed = [replace(base, tau=0.3), replace(base, variant="no_history"), replace(base, max_tokens=32),
               base.with_model(precision="bf16"), base.with_model(checkpoint="local-10")]
    results = [runtime._trace_dict(settings, prompt, False) for settings in changed]
    assert len(calls) == 1 + len(changed) and len({r["computed"] for r in results + [first]}) == 1 + len(changed)
    assert [c["tau"] for c in calls[1:3]] == [0.3, 0.5] and calls[2]["variant"] == "no_history"


def test_a_run_keys_on_its_settings_not_its_labels():
    settings = Settings(ModelSpec(), variant="no_history", tau=0.4, max_tokens=128)
    run = RunSpec.from_settings(settings, "p", False, label="one", kind="a kind")
    assert run.settings == settings and hash(run.settings) == hash(settings)
    assert replace(run, label="another", trained="hero").settings == run.settings
    assert replace(run, tau=0.41).settings != run.settings
    by_name = RunSpec.from_settings(settings.with_model(checkpoint=BUNDLED_DEFAULT), "p", False)
    assert by_name.settings == run.settings  # the default by its own name is the same model: one entry


def test_the_sidebar_settings_reach_the_cached_call(app, monkeypatch):
    at = app("explorer")
    at.selectbox(key=sidebar_keys.VARIANT).select("no_history")
    at.slider(key=sidebar_keys.TAU).set_value(0.3)
    at.number_input(key=sidebar_keys.MAX_TOKENS).set_value(64)
    received = []
    real = runtime._trace_dict
    monkeypatch.setattr(runtime, "_trace_dict", lambda settings, *rest: received.append(settings) or
                        real(settings, *rest))
    at.run()
    assert not at.exception and not at.error
    chosen = at.session_state[sidebar_keys.SETTINGS]
    assert isinstance(chosen, Settings)
    assert (chosen.variant, chosen.tau, chosen.max_tokens) == ("no_history", pytest.approx(0.3), 64)
    assert received and received[0] == chosen.canonical()  # the sidebar's one value, as the cache keys on it


@pytest.mark.parametrize("error, shown", [
    (RuntimeError("the sidebar broke"), "Something went wrong (RuntimeError: the sidebar broke)"),
    (ValueError("a readable reason"), "a readable reason"),
])
def test_an_error_in_the_sidebar_is_the_pages_message(monkeypatch, error, shown):
    def broken():
        raise error

    monkeypatch.setattr(app_settings, "render_sidebar", broken)
    at = _open_unchecked(monkeypatch, "explorer")
    assert not at.exception, [e.value for e in at.exception]
    assert any(shown in e.value for e in at.error), [e.value for e in at.error]


def test_an_error_in_the_link_restore_is_the_pages_message(monkeypatch):
    def broken():
        raise KeyError("compare_checkpoints")

    monkeypatch.setattr(link_view, "restore_from_url", broken)
    at = _open_unchecked(monkeypatch, "compare")
    assert not at.exception, [e.value for e in at.exception]
    assert any("Something went wrong (KeyError" in e.value for e in at.error), [e.value for e in at.error]


def _open_unchecked(monkeypatch, page: str):
    """One run of ``page`` on the tiny model, without the clean-page check (these pages are meant to show an error)."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("HERO_LENS_TINY", "1")
    private_cache(monkeypatch)
    at = AppTest.from_file(str(APP / "main.py"), default_timeout=TIMEOUT)
    at.switch_page(f"views/{page}.py")
    return at.run()
