"""A τ step finds its trace already computed: the pages that route the sidebar's run have the run one slider step
either side traced in the background once they are drawn (components.prefetch, a job of components.background)."""

import sys
import threading
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[1] / "app"
sys.path.insert(0, str(APP))

from apptest_helpers import assert_clean, starter  # noqa: E402
from components import sidebar_keys as keys  # noqa: E402
from components.background import BACKGROUND  # noqa: E402
from components.prefetch import tau_neighbours  # noqa: E402
from components.runtime import RunSpec  # noqa: E402

PREFETCH_THREAD = "hero-lens-background"


def wait_until_idle(at) -> None:
    assert BACKGROUND.wait_idle(120), "the prefetch did not finish"


def page_passes(monkeypatch) -> list[str]:
    """The threads that run a forward pass from now on (the page's own, or the prefetching one)."""
    from hero_core.method.model import HeroModel

    seen: list[str] = []
    real = HeroModel.forward
    monkeypatch.setattr(HeroModel, "forward", lambda self, *a, **k: seen.append(threading.current_thread().name)
                        or real(self, *a, **k))
    return seen


def test_the_neighbours_are_one_slider_step_either_side_inside_its_range():
    from components.settings import ModelSpec

    run = RunSpec(model=ModelSpec(tiny=True), variant="hero", tau=0.5, prompt="x")
    assert [r.tau for r in tau_neighbours(run)] == [0.51, 0.49]
    assert [r.tau for r in tau_neighbours(RunSpec(model=run.model, variant="hero", tau=0.99, prompt="x"))] == [0.98]
    assert [r.tau for r in tau_neighbours(RunSpec(model=run.model, variant="hero", tau=0.013, prompt="x"))] == [0.02]


# Each page starts at a tau of its own: the traces are cached across the tests of one process.
@pytest.mark.parametrize(("page", "tau"), [(None, 0.3), ("memory", 0.7)])
def test_a_tau_step_routes_nothing_on_the_page_but_a_jump_does(monkeypatch, page, tau):
    monkeypatch.setenv("HERO_LENS_WARMUP", "1")  # the suite turns the background work off; this test is about it
    at = starter(monkeypatch, 180)(page)
    at.slider(key=keys.TAU).set_value(tau).run()
    assert_clean(at)
    wait_until_idle(at)
    passes = page_passes(monkeypatch)
    for step in (0.01, -0.01):  # up, then back down (the page's own tau, cached since the first run)
        at.slider(key=keys.TAU).set_value(round(tau + step, 2)).run()
        assert_clean(at)
        assert at.session_state["sb_settings"].tau == round(tau + step, 2)
        assert [name for name in passes if name != PREFETCH_THREAD] == [], step
        wait_until_idle(at)
    at.slider(key=keys.TAU).set_value(round(tau + 0.05, 2)).run()  # five steps: not prefetched, routed on the page
    assert_clean(at)
    assert [name for name in passes if name != PREFETCH_THREAD]
    wait_until_idle(at)  # its neighbours traced before the next test counts passes


def test_nothing_is_prefetched_when_the_suite_turns_background_work_off(monkeypatch):
    monkeypatch.setenv("HERO_LENS_WARMUP", "0")
    assert BACKGROUND.wait_idle(120)
    submitted = []
    monkeypatch.setattr(BACKGROUND, "submit", lambda *a, **k: submitted.append(k.get("name")))
    at = starter(monkeypatch, 180)()
    assert at.session_state["sb_settings"].tau == 0.5  # the page routed its run (and would have asked for its steps)
    assert submitted == []  # a job is queued while the page runs, so an absence here is final
