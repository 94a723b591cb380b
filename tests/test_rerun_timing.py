"""The server's clock for the latency benchmark: one JSON line (and one profile) per rerun, nothing when unset."""

import json
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))

from components import rerun_timing  # noqa: E402


def test_a_rerun_is_logged_and_profiled_where_asked(tmp_path, monkeypatch):
    log, profiles = tmp_path / "reruns.jsonl", tmp_path / "profiles"
    monkeypatch.setenv(rerun_timing.TIMINGS_ENV, str(log))
    monkeypatch.setenv(rerun_timing.PROFILE_ENV, str(profiles))
    before = time.time()
    with rerun_timing.timed_rerun() as record:
        record["page"] = "explorer"
        time.sleep(0.05)
    with rerun_timing.timed_rerun():
        pass  # a rerun that never learnt its page (an error before navigation)
    first, second = (json.loads(line) for line in log.read_text().splitlines())
    assert first["page"] == "explorer" and first["started"] >= before - 0.01 and first["wall_s"] >= 0.05
    assert second["page"] == "?" and second["number"] == first["number"] + 1
    saved = profiles / f"{first['number']:04d}-explorer.prof"
    assert any("sleep" in name for (_, _, name) in pstats.Stats(str(saved)).stats)


def test_nothing_is_written_when_the_benchmark_is_not_running(tmp_path, monkeypatch):
    monkeypatch.delenv(rerun_timing.TIMINGS_ENV, raising=False)
    monkeypatch.delenv(rerun_timing.PROFILE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    with rerun_timing.timed_rerun() as record:
        record["page"] = "explorer"
    assert list(tmp_path.iterdir()) == []
