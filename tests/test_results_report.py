"""scripts/results_report.py renders every evaluated method from the results JSON, and nothing typed by hand."""

import copy
import json
from pathlib import Path

from hero_core.reports import results_report

ROOT = Path(__file__).resolve().parents[1]


def _report():
    return results_report


def _bundled_result() -> dict:
    return json.loads((ROOT / "docs" / "experiments" / "bigbench-earlier-checkpoints" / "results.json").read_text())


def test_every_method_gets_a_row_with_its_measured_param_skip(tmp_path):
    result = _bundled_result()
    text = _report().render(result, ROOT / "docs" / "figures" / "retain_vs_skip.png")
    tables = text.split("## Code: HumanEval")[0].split("## Main-suite accuracy")[0]  # the comparison tables
    rows = {line.split("|")[1].strip(): line for line in tables.splitlines() if line.startswith("| ")}
    for summary in result["summary"]:
        if summary["suite"] == "main":
            assert summary["method"] in rows, summary["method"]
            assert f"{100 * summary['param_skip']:.2f}" in rows[summary["method"]]


def test_trained_ablations_land_in_the_ablation_table_not_the_main_one():
    result = copy.deepcopy(_bundled_result())
    source = next(r for r in result["summary"] if r["method"] == "hero-25" and r["suite"] == "main")
    result["summary"].append(dict(source, method="no_memread-25", param_skip=0.123456))
    result["config"]["methods"] = [*result["config"]["methods"], "no_memread-25"]
    text = _report().render(result, ROOT / "docs" / "figures" / "retain_vs_skip.png")
    main_part, ablation_part = text.split("## Ablations")
    assert "| no_memread-25 |" not in main_part
    assert "| no_memread-25 | 12.35 |" in ablation_part.split("## Code: HumanEval")[0]


def test_humaneval_table_shows_solved_counts_when_the_code_suite_ran():
    result = copy.deepcopy(_bundled_result())
    report = _report()
    result["summary"] = [r for r in result["summary"] if r["suite"] != "humaneval"]
    assert report.humaneval_table(result) == []  # no code suite, no table
    result["config"]["humaneval"] = {"limit": 4, "methods": ["hero-25"]}
    for name, passed, retain in (("dense", 2, 100.0), ("hero-25", 1, 50.0)):
        result["results"].setdefault(name, {})["humaneval"] = {"passed": passed, "n": 4}
        result["summary"].append({"method": name, "suite": "humaneval", "score": passed / 4, "retain": retain,
                                  "param_skip": 0.0 if name == "dense" else 0.2512})
    table = "\n".join(report.humaneval_table(result))
    assert "first 4 problems" in table
    assert "| hero-25 | 1 / 4 | 25.0 | 50.0 | 25.12 |" in table and "| dense | 2 / 4 | 50.0 |" in table


def test_matched_twins_and_retain_intervals_are_rendered_from_the_file():
    result = copy.deepcopy(_bundled_result())
    result["matched"] = {"hero-25": {"checkpoint": "hero-25", "twin": "local-25", "method": "local-25",
                                     "target_skip": 0.251, "tau": 0.4567, "realised_skip": 0.2498}}
    result["retain"] = {"hero-25": {"retain": 80.95, "low": 55.1, "high": 101.2,
                                    "vs_twin": {"difference": -11.9, "low": -30.2, "high": 6.4}},
                        "local-25": {"retain": 92.86, "low": 70.0, "high": 110.0}}
    text = _report().render(result, ROOT / "docs" / "figures" / "retain_vs_skip.png")
    assert "| hero-25 | local-25 | 0.457 | 25.1 / 25.0 |" in text
    assert "| 81.0 [55.1, 101.2] | 92.9 [70.0, 110.0] | -11.9 [-30.2, +6.4] |" in text
    hero_row = next(line for line in text.splitlines() if line.startswith("| hero-25 | 26.92 |"))
    assert "| 81.0 [55.1, 101.2] |" in hero_row  # the CI column of the all-methods table
