"""The cores a process may use (affinity and cgroup quota, read from fake cgroup files here), torch's threads set in
one place, and passes side by side that never outnumber the usable cores, however they nest."""

import re
import threading
from pathlib import Path

import pytest
import torch

from hero_core.backbones import threads
from hero_core.method.side_by_side import each_side_by_side, passes_at_once, side_by_side

ROOT = Path(__file__).resolve().parents[1]
CPU = torch.device("cpu")


def fake_cgroup(tmp_path: Path, files: dict[str, str], own: str = "0::/\n") -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text(own)
    return root, proc


@pytest.fixture
def eight_cores(monkeypatch):
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)


@pytest.mark.parametrize(("files", "own", "quota", "cores"), [
    ({"cpu.max": "150000 100000\n"}, "0::/\n", 1.5, 2),  # v2: one and a half cores, rounded up
    ({"cpu.max": "max 100000\n"}, "0::/\n", None, 8),  # v2: no quota
    ({"box/cpu.max": "100000 100000\n", "cpu.max": "max 100000\n"}, "0::/box\n", 1.0, 1),  # the process's own group
    ({"cpu/cpu.cfs_quota_us": "250000\n", "cpu/cpu.cfs_period_us": "100000\n"}, "1:cpu:/\n", 2.5, 3),  # v1
    ({"cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}, "1:cpu,cpuacct:/\n",
     None, 8),  # v1: no quota
    ({"cpu.max": "garbage\n"}, "0::/\n", None, 8),  # unreadable: no quota, not a crash
])
def test_usable_cores_are_the_affinity_capped_by_the_cgroup_quota(tmp_path, eight_cores, files, own, quota, cores):
    root, proc = fake_cgroup(tmp_path, files, own)
    assert threads.cgroup_cpu_limit(root, proc) == quota
    assert threads.usable_cores(root, proc) == cores


def test_the_affinity_mask_caps_the_cores_too(tmp_path, monkeypatch):
    root, proc = fake_cgroup(tmp_path, {"cpu.max": "400000 100000\n"})
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 3}, raising=False)
    assert threads.usable_cores(root, proc) == 2


def test_passes_and_serving_threads_follow_a_quota_below_the_machine(tmp_path, eight_cores, monkeypatch):
    """A container limited to one core on an 8-core machine: one pass at a time, one torch thread."""
    root, proc = fake_cgroup(tmp_path, {"cpu.max": "100000 100000\n"})
    monkeypatch.setattr(threads, "CGROUP_ROOT", root)
    monkeypatch.setattr(threads, "PROC_CGROUP", proc)
    monkeypatch.delenv(threads.THREADS_ENV, raising=False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert passes_at_once(CPU) == 1
    assert threads.serving_threads() == 1
    (root / "cpu.max").write_text("400000 100000\n")
    assert passes_at_once(CPU) == 4
    assert threads.serving_threads() == 2
    monkeypatch.setenv(threads.THREADS_ENV, "3")
    assert threads.serving_threads() == 3
    monkeypatch.setenv(threads.THREADS_ENV, "0")
    with pytest.raises(ValueError, match="positive integer"):
        threads.serving_threads()


def test_torch_threads_are_set_in_one_module():
    """Every torch.set_num_threads of the library, the app and the scripts is threads.set_threads' own."""
    allowed = {ROOT / "hero_core" / "backbones" / "threads.py"}
    found = []
    for folder in ("hero_core", "app", "scripts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path in allowed:
                continue
            if re.search(r"\bset_num_threads\s*\(", path.read_text()):
                found.append(str(path.relative_to(ROOT)))
    assert found == []


def test_set_threads_for_a_while_restores_the_count():
    before = torch.get_num_threads()
    with threads.threads_for_a_while(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError):
        threads.set_threads(0)


class Passes:
    """Records which threads ran passes, and makes the first outer pass wait until a second one runs beside it (an
    event, so a run with two cores is sure to overlap, and one without never waits for long)."""

    def __init__(self, *, overlap: bool) -> None:
        self.overlap = overlap
        self.threads: set[int] = set()
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.second = threading.Event()

    def one(self, name: str):
        with self.lock:
            self.threads.add(threading.get_ident())
            self.running += 1
            self.most = max(self.most, self.running)
            if self.running >= 2:
                self.second.set()
        try:
            if name == "0-routed" and self.overlap:
                self.second.wait(20)
            return name
        finally:
            with self.lock:
                self.running -= 1

    def outer(self, i: int):  # a Compare run: its trace's routed and dense passes, side by side where a core is free
        return side_by_side(lambda: self.one(f"{i}-routed"), lambda: self.one(f"{i}-dense"), together=True)


@pytest.mark.parametrize("cores", [1, 2, 3])
def test_nested_passes_never_outnumber_the_usable_cores(monkeypatch, cores):
    """Compare's four runs side by side at four at once, each trace asking for a dense pass on its own thread: at
    most ``cores`` threads run passes (the caller's included), and no more than ``cores`` at a time."""
    monkeypatch.setattr(threads, "usable_cores", lambda *a: cores * torch.get_num_threads())
    passes = Passes(overlap=cores >= 2)
    result = each_side_by_side(passes.outer, range(4), at_once=4)
    assert result == [(f"{i}-routed", f"{i}-dense") for i in range(4)]
    assert len(passes.threads) <= cores and passes.most <= cores
    assert passes.most >= min(cores, 2)  # side by side where allowed (the first pass waits for a second)
    assert threads.PASSES.taken == 0


def test_background_work_runs_its_passes_one_at_a_time(monkeypatch):
    monkeypatch.setattr(threads, "usable_cores", lambda *a: 4 * torch.get_num_threads())
    passes = Passes(overlap=False)
    with threads.one_pass_at_a_time():
        each_side_by_side(passes.outer, range(3), at_once=3)
    assert passes.threads == {threading.get_ident()} and passes.most == 1
