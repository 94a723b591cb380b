"""The load table (hero_core/reports/app_load_report.py) and its targets (hero_lens_tools/app_load.py), drawn from
the raw runs of scripts/app_load.py: the lone baseline is N = 1 however many visitors came in turn."""

import json
from pathlib import Path

from hero_core.reports.app_load_report import load_lines
from hero_lens_tools.app_load import summarise

ROOT = Path(__file__).resolve().parents[1]


def visitor(map_s: float, shown: str) -> dict:
    return {"actions": [{"action": "new prompt", "result_s": map_s, "done_s": map_s + 0.5, "errors": []}],
            "shown": {"explorer": shown}, "failure": None}


def run(together: bool, maps: list[float], shown: list[str], after: float) -> dict:
    return {"visitors": len(maps), "together": together, "client_cpu_s": 0.1,
            "results": [visitor(m, s) for m, s in zip(maps, shown, strict=True)],
            "server": {"rss_before_mib": 1000.0, "rss_peak_mib": 1500.0, "rss_after_mib": after, "cpu_s": 1.0,
                       "wall_s": 1.0, "cores_used": 1.0}}


def test_the_lone_row_is_one_visitor_and_a_swapped_result_is_caught():
    runs = {"1": run(False, [1.0, 1.0, 1.0, 1.0], list("abcd"), 1050.0),
            "4": run(True, [3.0, 4.0, 5.0, 7.0], ["a", "b", "d", "d"], 1200.0)}
    phases, targets = summarise(runs)
    assert [t["map_bound_s"] for t in targets] == [3.0, 6.0]  # 1 × 1 s + 2 s, then 4 × 1 s + 2 s
    assert targets[0]["map_met"] and targets[0]["rss_back_met"] and targets[0]["own_numbers"]
    assert not targets[1]["map_met"] and not targets[1]["rss_back_met"]
    assert phases[1]["ownership"]["another_visitors"] == [{"visitor": 2, "shown_visitor": 3}]
    text = "\n".join(load_lines({"load": {"prompt_tokens": 200, "phases": phases, "targets": targets}}))
    assert "| 1 (4 in turn, each alone) |" in text and "| 4 at once |" in text
    assert "map p95 7.00 s > 6.00 s (+1.00 s)" in text and "RSS after +20 % of before" in text


def test_the_committed_measurement_is_what_the_summaries_make_of_its_runs():
    load = json.loads((ROOT / "docs" / "app_load.json").read_text())["load"]
    assert summarise(load["runs"]) == (load["phases"], load["targets"])
