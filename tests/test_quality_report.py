"""scripts/quality_report.py: the ablation tables set a checkpoint beside hero only at equal training tokens."""

import copy
import json
from pathlib import Path

from hero_core.reports import quality_report

ROOT = Path(__file__).resolve().parents[1]


def _report():
    return quality_report


def _rows(lines: list[str]) -> list[str]:
    table = [line for line in lines if line.startswith("| ") and not line.startswith("| checkpoint")]
    return [line.split("|")[1].strip() for line in table]


def test_ablations_are_tabled_only_beside_a_hero_with_the_same_training_tokens():
    result = json.loads((ROOT / "docs" / "results.json").read_text())
    frontier, checkpoints = result["frontier"], copy.deepcopy(result["checkpoints"])
    curve = next(iter(frontier["curves"].values()))
    frontier = {**frontier, "curves": {**frontier["curves"], "no_pos-10": curve, "no_aux-10": curve}}
    hero_tokens = checkpoints["hero-10"]["training"]["tokens_seen"]
    checkpoints["no_pos-10"] = {"training": {"tokens_seen": hero_tokens}}
    checkpoints["no_aux-10"] = {"training": {"tokens_seen": hero_tokens // 10}}

    lines = _report().ablation_tables(frontier, checkpoints)
    first = lines[:lines.index("", 3)]  # the first stage's table (the fully trained one)
    assert f"After {hero_tokens:,} training tokens each:" in lines
    assert "no_pos-10" in _rows(first) and "no_aux-10" not in _rows(first)
    assert any("`no_aux-10`" in line and f"{hero_tokens // 10:,} tokens" in line for line in lines)


def test_the_greedy_target_row_reads_the_measured_median():
    result = json.loads((ROOT / "docs" / "results.json").read_text())
    report = _report()
    name, needed = report.GREEDY_TARGET
    generations = copy.deepcopy(result["generations"])
    for median, verdict in ((needed, "yes"), (needed - 1, "no")):
        generations["common_prefix"][name]["median"] = median
        row = [line for line in report.target_lines(result["frontier"], generations) if "greedy" in line]
        assert len(row) == 1 and row[0].endswith(f"| {verdict} |") and f"median {median:g} of" in row[0]
    assert not any("greedy" in line for line in report.target_lines(result["frontier"]))  # not measured: no row


def test_a_swept_ablation_is_read_at_heros_own_skip():
    result = json.loads((ROOT / "docs" / "results.json").read_text())
    curves = result["frontier"]["curves"]
    report = _report()
    hero = curves["hero-10"]
    one_tau = {**hero, "points": [report.own_point(hero)]}
    frontier = {**result["frontier"], "curves": {"hero-10": hero, "no_pos-10": copy.deepcopy(hero),
                                                 "no_aux-10": one_tau}}
    lines = report.matched_ablation_table(frontier, ["hero-10", "no_pos-10", "no_aux-10"])
    header = next(line for line in lines if line.startswith("| domain"))
    assert "no_pos-10" in header and "no_aux-10" not in header  # one tau: nothing to interpolate
    chat = [line for line in lines if line.startswith("| chat")]
    cells = [c.strip() for c in chat[0].split("|")[1:-1]]  # the same curve read at its own point: one cell twice
    assert len(chat) == 1 and cells[2] == cells[3] == report._ratio(report.own_point(hero)["chat"])
    assert report.matched_ablation_table(frontier, ["hero-10", "no_aux-10"]) == []


def test_the_frontier_figure_is_the_plotly_chart_exported_as_a_png(tmp_path):
    frontier = json.loads((ROOT / "docs" / "results.json").read_text())["frontier"]
    out = tmp_path / "figures" / "frontier.png"  # a folder a fresh checkout lacks
    _report().plot(frontier, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    net = _report().net_figure_path(out)  # the same runs against FLOPs saved net, drawn beside it
    assert net.name == "frontier_net.png" and net.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_training_table_sums_a_continuations_cpu_over_its_earlier_stages():
    checkpoints = {
        "first": {"variant": "hero", "branch_scaling": "unscaled",
                  "training": {"tokens_seen": 10, "timing": {"wall_s": 3.0, "cpu_s": 2.0},
                               "warm_start": {"r2_median": 0.5}, "final": {"near_tau": 0.4}}},
        "second": {"variant": "hero", "branch_scaling": "unscaled",
                   "training": {"tokens_seen": 20, "init_from": "first", "timing": {"wall_s": 5.0, "cpu_s": 4.0},
                                "earlier_stages": [{"timing": {"cpu_s": 2.0}}], "final": {}}},
    }
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]]
            for line in _report().training_lines(checkpoints)[2:]}
    assert rows["first"][8:] == ["2.0", "0.50", "0.40"]
    assert rows["second"][8:] == ["6.0", "from first", "–"]


def test_a_run_the_guard_rolled_back_is_named_under_its_table():
    from hero_core.reports.quality_report import guard_notes

    rolled = {"training": {"health": {"best_loss": 1.68, "final_loss": 1.74, "rollbacks": [
        {"at_step": 450, "to_step": 175, "lr_scale": 0.5, "loss": 2.0, "best_loss": 1.68}]}}}
    steady = {"training": {"health": {"best_loss": 1.70, "final_loss": 1.71, "rollbacks": []}}}
    warned = {"training": {"health": {"best_loss": 1.70, "final_loss": 2.0, "rollbacks": [
        {"at_step": 300, "to_step": None, "lr_scale": 1.0, "loss": 2.0, "best_loss": 1.70}]}}}  # on_degrade=warn
    notes = guard_notes({"no_pos-10": rolled, "hero-10": steady, "old-run": {}, "warned-10": warned})
    assert len(notes) == 1
    assert "`no_pos-10`" in notes[0] and "at step 450 to step 175 (learning rate x0.5)" in notes[0]
    assert "1.740 against its best 1.680" in notes[0]


def test_the_quality_page_gives_each_checkpoints_net_saving_beside_static_pruning():
    """docs/results.md carries the net table (what each checkpoint saves with its router and adapters charged, static
    pruning at the same net saving), linking the intervals from docs/, or says how to measure it."""
    root = Path(__file__).resolve().parents[1]
    report = json.loads((root / "docs" / "net_saving.json").read_text())
    lines = quality_report.net_saving_lines(report)
    rows = [line for line in lines if line.startswith("| ") and not line.startswith("| checkpoint")]
    assert [row.split(" | ")[0][2:] for row in rows] == [c["checkpoint"] for c in report["checkpoints"]]
    assert "static pruning at the same net saving" in lines[3] and "(net_saving.md)" in "\n".join(lines)
    assert "(docs/net_saving.md)" not in "\n".join(lines)  # the page sits in docs/: no docs/docs/ link
    assert quality_report.net_saving_lines(None)[-1] == "Not measured yet: `make net-saving`."
