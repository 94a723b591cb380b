"""The server's background work (app/components/background.py): bounded, cancellable, after the visitors' own work,
its thread gone with its work, and never making a visitor wait for a job holding the key the visitor needs.

Every wait here is on an event, with a generous timeout only to turn a hang (the fault these tests look for) into a
failure."""

import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[1] / "app"
sys.path.insert(0, str(APP))

from components import runtime  # noqa: E402
from components.background import LOAD, PREFETCH, WARM_UP, Cancelled, Worker, on_worker  # noqa: E402
from components.settings import ModelSpec  # noqa: E402

WAIT = 60  # seconds: a hang turned into a failure


def blocked_job(worker: Worker, **options):
    """A job that runs until released; returns (job, started, release)."""
    started, release = threading.Event(), threading.Event()

    def run():
        started.set()
        assert release.wait(WAIT)

    return worker.submit(run, **{"name": "blocker", "priority": PREFETCH, **options}), started, release


def in_thread(fn):
    """Run ``fn`` on a thread of its own (a visitor's session); returns (thread, box with its result)."""
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("value", fn()), daemon=True)
    thread.start()
    return thread, box


def test_a_visitor_takes_over_a_key_a_background_job_is_computing():
    worker, inside, release, calls = Worker(), threading.Event(), threading.Event(), []

    def compute(x):
        calls.append("job" if on_worker() else "visitor")
        if on_worker():
            inside.set()
            assert release.wait(WAIT)  # a nice-19 job, slow under load
        return f"{x} by {calls[-1]}"

    def job():
        worker.prepare(compute, 1)
        return worker.value(compute, 1)  # what the cached function's body does with it

    submitted = worker.submit(job, name="prefetch", priority=PREFETCH)
    assert inside.wait(WAIT)
    visitor, box = in_thread(lambda: worker.value(compute, 1))
    visitor.join(WAIT)
    assert not visitor.is_alive(), "the visitor waited for the background job"
    assert box["value"] == "1 by visitor"
    assert submitted.cancelled.is_set()  # the job lost its key: it stops, its value is dropped
    release.set()
    assert submitted.done.wait(WAIT) and submitted.error is None
    assert worker.wait_idle(WAIT)


def test_a_visitor_joins_the_start_up_load_instead_of_loading_again():
    worker, inside, release, calls = Worker(), threading.Event(), threading.Event(), []

    def load(name):
        calls.append(name)
        inside.set()
        assert release.wait(WAIT)
        return f"model {name}"

    job = worker.submit(lambda: worker.prepare(load, "default"), name="load", priority=LOAD, lowest=False)
    assert inside.wait(WAIT)
    visitor, box = in_thread(lambda: worker.value(load, "default"))
    release.set()
    visitor.join(WAIT)
    assert box["value"] == "model default" and calls == ["default"]  # loaded once
    assert job.done.wait(WAIT) and not job.cancelled.is_set()


def test_a_job_waits_for_the_visitors_own_work():
    worker, visiting, leave = Worker(), threading.Event(), threading.Event()

    def visitor_compute():
        visiting.set()
        assert leave.wait(WAIT)
        return "page"

    visitor, _ = in_thread(lambda: worker.value(visitor_compute))
    assert visiting.wait(WAIT)
    ran = threading.Event()
    job = worker.submit(ran.set, name="warm-up", priority=WARM_UP)
    assert worker.gated.wait(WAIT)  # the worker reached the job and held it back
    assert not job.started.is_set() and not ran.is_set()
    leave.set()
    assert job.done.wait(WAIT) and ran.is_set()
    visitor.join(WAIT)


def test_the_queue_is_bounded_most_urgent_first_and_a_group_keeps_its_newest():
    worker = Worker(capacity=3)
    first, started, release = blocked_job(worker)
    assert started.wait(WAIT)
    order = []
    warm = [worker.submit(lambda i=i: order.append(f"warm {i}"), name=f"warm {i}", priority=WARM_UP)
            for i in range(3)]
    step_a = worker.submit(lambda: order.append("step a"), name="a", priority=PREFETCH, group="visitor 1")
    step_b = worker.submit(lambda: order.append("step b"), name="b", priority=PREFETCH, group="visitor 1")
    assert len(worker.pending()) == 3  # bounded: the least urgent job waiting longest went
    assert warm[0].cancelled.is_set() and warm[0].done.is_set()
    assert step_a.cancelled.is_set() and not step_b.cancelled.is_set()  # its group's newer request replaced it
    release.set()
    assert worker.wait_idle(WAIT)
    assert order == ["step b", "warm 1", "warm 2"]
    assert first.done.is_set()


def test_a_newer_request_cancels_the_running_one_at_its_next_computation():
    worker, inside, release = Worker(), threading.Event(), threading.Event()
    computed = []

    def slow(x):
        inside.set()
        assert release.wait(WAIT)
        return x

    def steps():
        worker.prepare(slow, "tau + 0.01")
        computed.append("+")
        worker.prepare(slow, "tau - 0.01")
        computed.append("-")

    old = worker.submit(steps, name="old steps", priority=PREFETCH, group="visitor")
    assert inside.wait(WAIT)
    new = worker.submit(lambda: computed.append("new"), name="new steps", priority=PREFETCH, group="visitor")
    release.set()
    assert old.done.wait(WAIT) and new.done.wait(WAIT)
    assert old.cancelled.is_set() and old.error is None  # ended by Cancelled, not failed
    assert computed == ["new"]


def test_the_thread_ends_with_its_work_and_a_new_job_starts_another():
    worker = Worker()
    job, started, release = blocked_job(worker)
    assert started.wait(WAIT)
    thread = worker.thread()
    assert thread is not None and thread.is_alive()
    release.set()
    thread.join(WAIT)
    assert not thread.is_alive() and worker.thread() is None
    again = worker.submit(lambda: None, name="again", priority=PREFETCH)
    assert again.done.wait(WAIT)
    assert worker.wait_idle(WAIT)


def test_a_job_that_finds_its_key_evicted_stops_rather_than_compute_under_the_lock():
    worker = Worker()
    errors = []

    def job():
        try:
            worker.value(lambda: 1)  # the cached body on the worker with nothing prepared
        except Cancelled as err:
            errors.append(err)
            raise

    assert worker.submit(job, name="evicted", priority=PREFETCH).done.wait(WAIT)
    assert len(errors) == 1


# -- the app's cached computations (components.runtime) on the tiny model ------------------------------------------
@pytest.fixture
def tiny_app(monkeypatch):
    """The tiny model's spec and a run on it; background jobs at normal priority here (at nice 19 beside a busy test
    suite a held job takes a minute to finish once released: the lock, not the niceness, is under test)."""
    from components import background

    monkeypatch.setenv("HERO_LENS_TINY", "1")
    monkeypatch.setattr(background, "_lowest_priority", lambda: False)
    # the app's one worker, as an earlier test file in this process may have left it: work still queued or running at
    # nice 19 would run before this test's job, which then waits for it, not for the lock under test
    for job in [*runtime.BACKGROUND.pending(), runtime.BACKGROUND.current]:
        if job is not None:
            job.cancel()
    assert runtime.BACKGROUND.wait_idle(WAIT), "the app's background worker did not go idle"
    spec = ModelSpec(tiny=True).canonical()
    return spec, runtime.RunSpec(model=spec, variant="hero", tau=0.5, prompt="A background step of its own.")


def test_a_tau_step_during_its_prefetch_does_not_wait_for_the_prefetch(monkeypatch, tiny_app):
    """The prefetch traces the step at nice 19 (held here); the visitor's step routes it itself, at once."""
    from hero_core.method.model import HeroModel

    spec, run = tiny_app
    runtime.cached_model(spec)
    step = replace(run, tau=0.51, prompt=f"{run.prompt} {threading.get_ident()}")  # a key no other test cached
    inside, release = threading.Event(), threading.Event()
    real = HeroModel.trace

    def trace(self, *args, **kwargs):
        if on_worker():
            inside.set()
            assert release.wait(WAIT)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(HeroModel, "trace", trace)
    job = runtime.BACKGROUND.submit(lambda: runtime.get_trace(step, page=False), name="prefetch", priority=PREFETCH)
    assert inside.wait(WAIT)
    visitor, box = in_thread(lambda: runtime.get_trace(step, page=False))
    visitor.join(WAIT)
    assert not visitor.is_alive(), "the τ step waited for its prefetch"
    assert box["value"].tau == 0.51
    release.set()
    assert job.done.wait(WAIT) and job.cancelled.is_set()
    assert runtime.get_trace(step, page=False).to_dict() == box["value"].to_dict()  # the visitor's, cached


def test_compare_during_the_warm_up_does_not_wait_for_its_model_load(monkeypatch, tiny_app):
    """The warm-up loading a model Compare needs (the twin's router, held here): Compare loads it itself."""
    spec, _ = tiny_app
    # a model no other test loads: the tiny model ignores the checkpoint's name, which makes the cache key unique
    # (a bf16 tiny model alone is also loaded by test_app's precision comparison, and cached for this process)
    other = replace(spec, precision="bf16", checkpoint="held by the background test").canonical()
    inside, release = threading.Event(), threading.Event()
    real = runtime._tiny_model

    def tiny_model(precision, device):
        if on_worker():
            inside.set()
            assert release.wait(WAIT)
        return real(precision, device)

    monkeypatch.setattr(runtime, "_tiny_model", tiny_model)
    job = runtime.BACKGROUND.submit(lambda: runtime.cached_model(other), name="warm-up", priority=WARM_UP)
    assert inside.wait(WAIT)
    visitor, box = in_thread(lambda: runtime.cached_model(other))
    visitor.join(WAIT)
    assert not visitor.is_alive(), "Compare waited for the warm-up's load"
    release.set()
    assert job.done.wait(WAIT) and job.cancelled.is_set()
    assert runtime.cached_model(other) is box["value"]


def test_visitors_computations_are_admitted_in_the_order_they_asked_at_most_the_cores_at_once():
    """Three visitors on one core: one computes, the others wait their turn, first come first served."""
    worker = Worker(slots=lambda: 1)
    release = {name: threading.Event() for name in "abc"}
    started, order = threading.Event(), []

    def compute(name):
        order.append(name)
        started.set()
        assert release[name].wait(WAIT)
        return name

    a, _ = in_thread(lambda: worker.value(compute, "a"))
    assert started.wait(WAIT)
    b, _ = in_thread(lambda: worker.value(compute, "b"))
    assert worker.admission.wait_for_waiting(1, WAIT)
    c, _ = in_thread(lambda: worker.value(compute, "c"))
    assert worker.admission.wait_for_waiting(2, WAIT)
    assert order == ["a"]  # b and c wait while a computes
    for name, thread in (("a", a), ("b", b), ("c", c)):
        release[name].set()
        thread.join(WAIT)
    assert order == ["a", "b", "c"] and worker.admission.most == 1


def test_a_model_load_is_not_held_behind_the_computations_waiting_for_it():
    worker, inside, release = Worker(slots=lambda: 1), threading.Event(), threading.Event()

    def trace():
        inside.set()
        assert release.wait(WAIT)

    busy, _ = in_thread(lambda: worker.value(trace))
    assert inside.wait(WAIT)
    loader, box = in_thread(lambda: worker.value(lambda name: f"model {name}", "twin", admit=False))
    loader.join(WAIT)
    assert box.get("value") == "model twin"  # loaded while the one slot is taken
    release.set()
    busy.join(WAIT)
