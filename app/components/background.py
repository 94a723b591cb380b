"""The server's background work, one design: a bounded queue of cancellable jobs, run one at a time on one thread
that ends when the queue is empty, after the visitors' own work.

Three kinds of job use it: the default model's load as the server starts (app/serve.py), the opening views of
Compare and Learn computed once the first page is served (components.warmup) and the sidebar's run one τ step
either side, traced once a page is drawn (components.prefetch). The rules:

* **Bounded.** At most :data:`CAPACITY` jobs wait; past that the least urgent, oldest waiting job is dropped. A job
  given a ``group`` replaces the jobs of its group still waiting or running (a visitor's newer prefetch request).
* **Cancellable.** :meth:`Job.cancel` drops a waiting job; a running one stops at its next cached computation and
  its result is dropped.
* **Visitors first.** A job starts, and each of its computations begins, only while no visitor computation is
  running (and, on Linux, a background job runs at nice 19). A visitor never waits for a background job holding
  the key it needs: the cached computations (components.runtime) run their background jobs *outside* Streamlit's
  per-key lock (:meth:`Worker.prepare`) and hand the value over; a visitor asking for a key a low-priority job is
  computing cancels that job and computes the key itself at its own priority (:meth:`Worker.value`). The one job
  at normal priority, the start-up load, a visitor joins rather than repeats: it is the same load, already under
  way at the visitor's own priority.
* **No thread outlives its work.** The worker's thread starts with the first job and ends when none is left (no
  thread per model kept for ever); its jobs run their passes one at a time (never taking a core from a visitor's
  pass: hero_core.backbones.threads.one_pass_at_a_time).
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, copy_context
from dataclasses import dataclass, field

log = logging.getLogger(__name__)
WARMUP_ENV = "HERO_LENS_WARMUP"  # "0": no background work after the start (the test suite's many short apps)
LOAD, PREFETCH, WARM_UP, TRIM = 0, 1, 2, 3  # priorities: the lower runs first
CAPACITY = 8
KNOWN = 1024  # keys recently computed or handed over (about what the caches keep)
_JOB: ContextVar[Job | None] = ContextVar("hero_lens_background_job", default=None)
_ADMITTED: ContextVar[bool] = ContextVar("hero_lens_admitted", default=False)


class Cancelled(Exception):  # noqa: N818 - a job's normal end when it is no longer wanted
    """Raised inside a job that was cancelled (or whose key a visitor took over)."""


@dataclass(eq=False)
class Job:
    """One piece of background work; ``lowest``: at nice 19 from when it runs (every job but the start-up load,
    which is the first job of a fresh thread: a thread at nice 19 cannot come back down unprivileged)."""

    name: str
    fn: Callable[[], object]
    priority: int
    group: Hashable | None = None
    lowest: bool = True
    cancelled: threading.Event = field(default_factory=threading.Event)
    started: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def cancel(self) -> None:
        self.cancelled.set()

    def check(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled(self.name)


@dataclass(eq=False)
class _Computing:
    job: Job
    finished: threading.Event = field(default_factory=threading.Event)
    value: object = None
    ok: bool = False


def on_worker() -> Job | None:
    """The background job running on this thread (or in the context it handed to a thread), if any."""
    return _JOB.get()


def enabled() -> bool:
    return os.environ.get(WARMUP_ENV) != "0"


class Admission:
    """Visitors' computations (a trace, a τ search, a sweep), at most :func:`slots` at once, admitted in the order
    they asked: sixteen visitors on two cores wait their turn instead of running sixteen passes that share the cores
    and hold sixteen passes' activations (a 200-token pass with its dense reference holds ~150 MB). A computation
    started inside an admitted one (the same thread, or one it handed its context to) is not admitted again."""

    def __init__(self, slots: Callable[[], int]) -> None:
        self.slots = slots
        self._cond = threading.Condition()
        self._tickets = 0  # handed out
        self._serving = 0  # the ticket admitted next
        self.running = 0
        self.most = 0  # the most computations admitted at once (for tests)

    def waiting(self) -> int:
        with self._cond:
            return self._tickets - self._serving

    def wait_for_waiting(self, n: int, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._tickets - self._serving >= n, timeout)

    @contextmanager
    def admitted(self) -> Iterator[None]:
        if _ADMITTED.get():
            yield
            return
        with self._cond:
            ticket = self._tickets
            self._tickets += 1
            self._cond.notify_all()
            self._cond.wait_for(lambda: ticket == self._serving and self.running < self.slots())
            self._serving += 1
            self.running += 1
            self.most = max(self.most, self.running)
            self._cond.notify_all()
        token = _ADMITTED.set(True)
        try:
            yield
        finally:
            _ADMITTED.reset(token)
            with self._cond:
                self.running -= 1
                self._cond.notify_all()


def _cores_for_passes() -> int:
    from torch import device

    from hero_core.backbones.threads import passes_at_once  # torch: not on the server's start-up path

    return passes_at_once(device("cpu"))


class Worker:
    """The queue, its one thread, and the hand-over of computed values to the caches (see the module's text)."""

    def __init__(self, capacity: int = CAPACITY, slots: Callable[[], int] = _cores_for_passes) -> None:
        self.capacity = capacity
        self.admission = Admission(slots)
        self._cond = threading.Condition()
        self._queue: list[Job] = []
        self._thread: threading.Thread | None = None
        self._niced = False  # the running thread is at nice 19
        self._visitors = 0  # visitor computations running now
        self._computing: dict[Hashable, _Computing] = {}  # key -> the job computing it outside any cache lock
        self._ready: dict[Hashable, object] = {}  # computed by a job, not yet stored in its cache
        self._known: OrderedDict[Hashable, None] = OrderedDict()
        self.current: Job | None = None
        self.gated = threading.Event()  # set each time a job waits for the visitors (for tests)

    # -- the queue ------------------------------------------------------------------------------------------------
    def submit(self, fn: Callable[[], object], *, name: str, priority: int, group: Hashable | None = None,
               lowest: bool = True) -> Job:
        job = Job(name, fn, priority, group, lowest)
        with self._cond:
            if group is not None:
                for other in [*self._queue, self.current]:
                    if other is not None and other.group == group:
                        other.cancel()
                self._queue = [j for j in self._queue if j.group != group]
            self._queue.append(job)
            while len(self._queue) > self.capacity:  # the least urgent, then the oldest, is dropped
                drop = max(self._queue, key=lambda j: (j.priority, -self._queue.index(j)))
                self._queue.remove(drop)
                drop.cancel()
                drop.done.set()
            if self._thread is None:
                self._start_thread()
            self._cond.notify_all()
        return job

    def pending(self) -> list[Job]:
        with self._cond:
            return list(self._queue)

    def thread(self) -> threading.Thread | None:
        with self._cond:
            return self._thread

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no job waits or runs and the thread has ended (or ``timeout`` s); returns whether it did."""
        with self._cond:
            return self._cond.wait_for(lambda: self._thread is None and not self._queue, timeout)

    def cancel(self, group: Hashable) -> None:
        with self._cond:
            for job in [*self._queue, self.current]:
                if job is not None and job.group == group:
                    job.cancel()
            self._cond.notify_all()

    def _start_thread(self) -> None:  # under the lock; started by a submitter, so at its (normal) priority
        self._niced = False
        self._thread = threading.Thread(target=self._loop, name="hero-lens-background", daemon=True)
        self._thread.start()

    def _next(self) -> Job | None:
        with self._cond:
            while True:
                live = [j for j in self._queue if not j.cancelled.is_set()]
                for job in self._queue:
                    if job.cancelled.is_set():
                        job.done.set()
                self._queue = live
                if not live:
                    self._thread = None  # the thread ends with the work; the next submit starts another
                    self._cond.notify_all()
                    return None
                job = min(live, key=lambda j: j.priority)  # the first of the most urgent (min keeps the order)
                if self._visitors:
                    self.gated.set()
                    self._cond.wait()
                    continue
                self._queue.remove(job)
                self.current = job
                return job

    def _loop(self) -> None:
        while (job := self._next()) is not None:
            if job.lowest and not self._niced:
                self._niced = _lowest_priority()
            job.started.set()
            try:
                copy_context().run(self._run, job)
            finally:
                with self._cond:
                    self.current = None
                    self._cond.notify_all()
                job.done.set()

    def _run(self, job: Job) -> None:
        from hero_core.backbones.threads import one_pass_at_a_time  # torch: not on the server's start-up path

        _JOB.set(job)
        try:
            with one_pass_at_a_time():
                job.check()
                job.fn()
            log.info("background: %s done", job.name)
        except Cancelled:
            log.info("background: %s cancelled", job.name)
        except Exception as err:  # noqa: BLE001 - background work is optional: the pages compute what they need
            job.error = err
            log.exception("background: %s failed; the pages compute what they need", job.name)

    # -- the hand-over of values ----------------------------------------------------------------------------------
    def _key(self, compute: Callable, args: tuple) -> Hashable:
        return (compute.__module__, compute.__qualname__, *args)

    def _remember(self, key: Hashable) -> None:  # under the lock
        self._known[key] = None
        self._known.move_to_end(key)
        while len(self._known) > KNOWN:
            self._known.popitem(last=False)

    def prepare(self, compute: Callable, *args) -> None:
        """On a background job: compute ``compute(*args)`` here, outside any cache lock, and keep it ready for the
        cached function's body (:meth:`value`) to take; nothing when the key was computed lately (then the cache
        has it). Waits for the visitors' computations to end first; raises :class:`Cancelled` when the job is
        cancelled, or a visitor took the key over, meanwhile."""
        job = on_worker()
        if job is None:
            raise RuntimeError("prepare() is for background jobs")
        key = self._key(compute, args)
        with self._cond:
            while self._visitors and not job.cancelled.is_set():
                self.gated.set()
                self._cond.wait()
            job.check()
            if key in self._known or key in self._ready:
                return
            mine = self._computing[key] = _Computing(job)
        try:
            value = compute(*args)
        except BaseException:
            with self._cond:
                self._computing.pop(key, None)
            mine.finished.set()
            raise
        with self._cond:
            self._computing.pop(key, None)
            if not job.cancelled.is_set():
                self._ready[key] = value
                mine.value, mine.ok = value, True
        mine.finished.set()
        job.check()

    def value(self, compute: Callable, *args, admit: bool = True):
        """The body of a cached function: the value a background job computed for these arguments, else
        ``compute(*args)`` now (``admit``: in its turn, :class:`Admission`; a model load is not, so that a load
        never waits behind computations that need the model). A visitor asking for a key a low-priority job is
        computing cancels the job and computes it at its own priority; one at normal priority (the start-up load)
        it joins."""
        key = self._key(compute, args)
        job = on_worker()
        with self._cond:
            if key in self._ready:
                self._remember(key)
                return self._ready.pop(key)
            computing = self._computing.get(key)
            if job is not None:  # a job in the cache's body with nothing ready: the key was evicted meanwhile
                self._known.pop(key, None)
                raise Cancelled(f"{key[1]} is no longer cached: computed when someone needs it")
            if computing is not None and computing.job.lowest:
                computing.job.cancel()
                del self._computing[key]
                computing = None
            self._visitors += 1
        try:
            if computing is not None:  # the start-up load, at the visitor's own priority: wait for it
                computing.finished.wait()
                if computing.ok:
                    with self._cond:
                        self._ready.pop(key, None)
                    return computing.value
            if not admit:
                return compute(*args)
            with self.admission.admitted():
                return compute(*args)
        finally:
            with self._cond:
                self._visitors -= 1
                self._remember(key)
                if not self._visitors and enabled():  # the last visitor's computation: give freed memory back
                    self.submit(_return_freed_memory, name="freed memory back to the system", priority=TRIM,
                                group="trim")
                self._cond.notify_all()

    def stored(self, compute: Callable, *args) -> None:
        """After a job's cached call: drop what it prepared if a visitor's own value was stored instead."""
        with self._cond:
            self._ready.pop(self._key(compute, args), None)


def _lowest_priority() -> bool:
    """This thread (and the threads it starts) at the lowest CPU priority, where the OS allows it (Linux: niceness
    is per thread). Returns whether it is."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        return True
    except (AttributeError, OSError):  # not Linux, or not permitted: background work runs at normal priority
        return False


def _return_freed_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's malloc_trim): a burst of visitors leaves hundreds of
    MB free inside the process's arenas, which glibc keeps otherwise. Elsewhere, nothing."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


BACKGROUND = Worker()
