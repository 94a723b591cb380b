"""The README's headline table (hero_core.eval.suites.headline, written by scripts/results_report.py): numbers where the
files have them, "not measured" wherever a file or a checkpoint is missing."""

import pytest

from hero_core.eval.suites import headline as H
from hero_core.reports import results_report

DENSE = {"a": [1, 1, 1, 1, 1, 0, 0, 0, 0, 0], "b": [1, 1, 1, 1, 1, 1, 1, 1, 0, 0]}
HERO = {"a": [1, 1, 1, 1, 1, 0, 0, 0, 0, 0], "b": [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]}  # Retain 75 %
NAMES = ["hero-10", "local-10", "hero-25"]


def _main(table: dict, skip: float) -> dict:
    return {"main": {"tasks": {t: {"accuracy": sum(g) / len(g), "grades": [float(x) for x in g]}
                               for t, g in table.items()},
                     "mean_accuracy": sum(sum(g) / len(g) for g in table.values()) / len(table),
                     "compute": {"tokens": 500, "param_skip": skip}}}


def bigbench() -> dict:
    """A make_results-shaped file with dense, hero-10, local-10 and local-10 at hero-10's skip (no hero-25)."""
    return {"config": {"limit": 10, "suites": ["main"]},
            "results": {"dense": _main(DENSE, 0.0), "hero-10": _main(HERO, 0.1234),
                        "local-10": _main(DENSE, 0.11), "local-10@hero-10": _main(DENSE, 0.1301)},
            "matched": {"hero-10": {"checkpoint": "hero-10", "twin": "local-10", "method": "local-10@hero-10",
                                    "target_skip": 0.109, "tau": 0.4312, "realised_skip": 0.1088}},
            "checkpoints": {"hero-10": {}, "local-10": {}}}


def _kept(kept: float, low: float, high: float, skip: float) -> dict:
    return {"overall": {"n": 120, "dense_correct": 60, "kept": kept, "kept_low": low, "kept_high": high,
                        "answer_param_skip": skip}}


def answers() -> dict:
    return {"kept": {"hero-10": _kept(0.8, 0.7, 0.9, 0.0987), "local-10": _kept(0.85, 0.75, 0.93, 0.09),
                     "local-10@hero-10": _kept(0.9, 0.8, 0.97, 0.1011)},
            "config": {"checkpoints": ["hero-10", "local-10"], "matched": {}}}


def _rows(lines: list[str]) -> dict[str, list[str]]:
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines if line.startswith("| ")]
    return {r[0]: r for r in rows[1:]}  # rows[0] is the header


def test_missing_files_make_every_cell_not_measured():
    lines = H.headline_lines(None, None, NAMES, available=NAMES)
    rows = _rows(lines)
    assert list(rows) == NAMES  # every expected checkpoint keeps its row
    for name in NAMES:
        assert all(c == H.NOT_MEASURED for c in rows[name][1:5]), rows[name]
    assert all(c == H.NOT_MEASURED for c in rows["hero-10"][5:])  # its twin's run too
    assert rows["hero-25"][5] == "no local-25 bundled"  # no twin to measure: said so, not "not measured"
    assert sum("not found" in line for line in lines) == 2


def test_an_expected_checkpoint_not_bundled_yet_keeps_its_row():
    lines = H.headline_lines(bigbench(), answers(), [*NAMES, "hero-10-r2"], available=NAMES)
    rows = _rows(lines)
    assert list(rows) == ["hero-10", "hero-10-r2", "local-10", "hero-25"]
    assert all(c == H.NOT_MEASURED for c in rows["hero-10-r2"][1:])  # its twin local-10 is bundled: not measured
    assert any(line.startswith("Not bundled (yet): hero-10-r2;") for line in lines)


def test_present_files_put_the_numbers_in_and_a_missing_checkpoint_reads_not_measured():
    rows = _rows(H.headline_lines(bigbench(), answers(), NAMES, available=NAMES))
    hero = rows["hero-10"]
    assert hero[1] == "12.3" and hero[2].startswith("75.0 [") and hero[3] == "9.9"
    assert hero[4] == "80.0 [70.0, 90.0] (of 60)"
    assert hero[5] == ("local-10 at tau 0.431 (calibration skip 10.9 % vs 10.9 %); skip on tasks 13.0 %, "
                       "on answers 10.1 %")  # how close the twin's skip landed on the evaluated tokens
    assert hero[6] == "100.0 [100.0, 100.0]"  # the twin answers like dense: paired, no spread
    assert hero[7].startswith("-25.0 [") and hero[8].startswith("90.0 [80.0, 97.0]")
    assert rows["local-10"][5].startswith("—")  # a local checkpoint is the twin itself
    assert all(c == H.NOT_MEASURED for c in rows["hero-25"][1:5])  # in neither file: said, not dropped
    assert rows["hero-25"][5] == "no local-25 bundled"


def test_one_file_missing_leaves_the_other_files_numbers():
    lines = H.headline_lines(bigbench(), None, NAMES, available=NAMES)
    hero = _rows(lines)["hero-10"]
    assert hero[2].startswith("75.0 [") and hero[4] == H.NOT_MEASURED and hero[8] == H.NOT_MEASURED
    assert any("docs/answers.json: not found" in line for line in lines)
    assert not any("docs/bigbench.json: not found" in line for line in lines)


def test_a_file_without_per_example_scores_is_not_passed_off_as_measured():
    old = bigbench()
    for run in old["results"].values():
        for task in run["main"]["tasks"].values():
            del task["grades"]
    lines = H.headline_lines(old, answers(), NAMES, available=NAMES)
    assert _rows(lines)["hero-10"][2] == H.NOT_MEASURED and any("per-example" in line for line in lines)


def test_results_report_writes_the_block_between_the_markers(tmp_path):
    report = results_report
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n<!-- headline:start -->\nold\n<!-- headline:end -->\n\nafter\n")
    assert report.write_headline(readme, bigbench(), answers(), ("docs/bigbench.json", "docs/answers.json"))
    text = readme.read_text()
    assert "\nold\n" not in text and "| run | what it is |" in text and text.endswith("after\n")
    bare = tmp_path / "OTHER.md"
    bare.write_text("no markers\n")
    assert not report.write_headline(bare, None, None, ("a", "b")) and bare.read_text() == "no markers\n"


def test_load_json_is_none_only_for_a_missing_file(tmp_path):
    assert H.load_json(tmp_path / "absent.json") is None
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError):
        H.load_json(tmp_path / "bad.json")


def test_the_reference_line_says_why_humaneval_is_left_out():
    result = bigbench()
    result["results"]["dense"]["humaneval"] = {"n": 20, "passed": 0, "grades": [0.0] * 20,
                                               "compute": {"tokens": 100, "param_skip": 0.0}}
    line = H.headline_lines(result, answers(), NAMES, available=NAMES)[0]
    assert line.startswith("Reference (dense): BIG-bench main suite, 10 examples per task: dense mean accuracy 65.0 %")
    assert "dense passes 0, so it is left out of Retain" in line and "dense right on 60 of 120" in line


def test_a_random_skip_reference_gets_its_own_line_not_a_row():
    report = answers()
    report["kept"]["random@hero-10"] = _kept(0.5, 0.35, 0.65, 0.1012)
    report["config"]["references"] = {"random@hero-10": {"checkpoint": "hero-10", "param_skip": 0.109,
                                                         "skip_probability": 0.1234}}
    lines = H.headline_lines(bigbench(), report, NAMES, available=NAMES)
    assert "random@hero-10" not in _rows(lines)
    line = next(line for line in lines if "random@hero-10" in line)
    assert line.startswith("Reference, not a router:") and "probability 12.3 %" in line
    assert "keeps 50.0 [35.0, 65.0] (of 60)" in line and "10.1 % param skip on the answer tokens" in line
    report["kept"]["oracle@hero-10"] = _kept(0.8, 0.7, 0.9, 0.098)
    report["config"]["references"]["oracle@hero-10"] = {"checkpoint": "hero-10", "param_skip": 0.109,
                                                        "threshold": 0.1234, "realised_param_skip": 0.11}
    oracle = next(line for line in H.headline_lines(bigbench(), report, NAMES, available=NAMES)
                  if "oracle@hero-10" in line)
    assert oracle.startswith("Reference, not a router:") and "not deployable" in oracle and "below 0.123" in oracle
    assert "oracle@hero-10" not in _rows(H.headline_lines(bigbench(), report, NAMES, available=NAMES))
    report["kept"].pop("oracle@hero-10")
    report["kept"].pop("random@hero-10")  # a reference the report names but holds no answers for: no line
    assert not any("random@" in line for line in H.headline_lines(bigbench(), report, NAMES, available=NAMES))


def _measured(pairs):
    return {"matched": [{"reference": hero, "other": twin, "domain": d, "param_skip": 0.1,
                         "reference_perplexity_ratio": 1.1, "other_perplexity_ratio": 1.2}
                        for hero, twin in pairs for d in ("chat", "code", "reasoning")]}


def test_the_readme_headline_is_one_small_table_with_no_empty_cell():
    from hero_core.method.model import DEFAULT_CHECKPOINT
    from hero_core.reports.readme_headline import headline_block

    fig = {"retain": 95.0, "low": 90.0, "high": 99.0}
    retain = {"retain": {DEFAULT_CHECKPOINT: fig, f"local-10@{DEFAULT_CHECKPOINT}": fig, "hero-25-r7": fig,
                         "local-25@hero-25-r7": fig}}
    lines = headline_block(_measured([(DEFAULT_CHECKPOINT, "local-10"), ("hero-25-r7", "local-25")]), retain, None)
    table = [line for line in lines if line.startswith("|")]
    assert len(table[0].split("|")) - 2 <= 6  # at most six columns
    assert len(table) == 2 + 4 and not any(H.NOT_MEASURED in line for line in lines)
    assert table[2].startswith(f"| **{DEFAULT_CHECKPOINT}** | default")
    assert any("Not in the table" in line and "hero-40-r7" in line for line in lines)  # named, not shown empty
    # perplexity measured but no BIG-bench grades: the row stays, its Retain says why it is missing
    ungraded = headline_block(_measured([(DEFAULT_CHECKPOINT, "local-10")]), None, None)
    rows = [line for line in ungraded if line.startswith(f"| **{DEFAULT_CHECKPOINT}**") or line.startswith("| local")]
    assert len(rows) == 2 and all(line.endswith(f"| {H.NOT_MEASURED} |") for line in rows)
    assert any("--fetch-bigbench" in line for line in ungraded)


def test_the_baselines_sentence_reads_every_reference_at_the_defaults_own_skip():
    from hero_core.method.model import DEFAULT_CHECKPOINT
    from hero_core.reports.readme_headline import baselines_sentence

    def point(knob, ratio, skip):
        return {"knob": knob, **{d: {"param_skip": skip, "perplexity_ratio": ratio, "ratio_low": ratio * 0.9,
                                     "ratio_high": ratio * 1.1, "top1_agreement": 0.9}
                                 for d in ("chat", "code", "reasoning")}}

    curves = {DEFAULT_CHECKPOINT: {"kind": "checkpoint", "tau": 0.5, "points": [point(0.5, 1.1, 0.1)]},
              "static": {"adapters_of": "hero-10", "points": [point(1, 1.2, 0.05), point(3, 1.8, 0.15)]},
              "expert_choice": {"adapters_of": "hero-10", "points": [point(0.05, 2.0, 0.05), point(0.1, 3.0, 0.1)]},
              "random": {"adapters_of": "hero-10", "points": [point(0.25, 5.0, 0.25)]}}  # never at 10 %: left out
    sentence = baselines_sentence({"frontier": {"curves": curves}})
    assert "the default 1.100 / 1.100 / 1.100" in sentence
    assert f"static pruning {format(1.2 ** 0.5 * 1.8 ** 0.5, '.3f')} / " in sentence  # log-linear at 10 %
    assert "MoD top-k (not causal) 3.000 / 3.000 / 3.000" in sentence and "random" not in sentence
    assert "each reference on hero-10's adapters" in sentence
    assert baselines_sentence({"frontier": {"curves": {DEFAULT_CHECKPOINT: curves[DEFAULT_CHECKPOINT]}}}) is None


def test_a_checkpoint_trained_again_after_its_measurement_is_named():
    from hero_core.method.checkpoint import read_checkpoint
    from hero_core.reports.results_report import retrained_note, retrained_since

    timing = read_checkpoint("hero-10").training["timing"]
    result = {"checkpoints": {"hero-10": {"training": {"timing": timing}},
                              "hero-25": {"training": {"timing": {"cpu_s": 1.0, "wall_s": 2.0}}},  # another run
                              "gone-10": {"training": {}}}}  # not bundled any more: nothing to say
    assert retrained_since(result) == ["hero-25"]
    assert retrained_note(result)[0].startswith("**Measured before a retrain.** hero-25 was trained again")
    assert retrained_note({"checkpoints": {"hero-10": {"training": {"timing": timing}}}}) == []


def _retain_fig(examples: dict) -> dict:
    return {"retain": 95.0, "low": 90.0, "high": 99.0, "examples": examples}


def test_the_readme_headline_counts_examples_steps_and_the_floor_from_its_records():
    from hero_core.method.model import DEFAULT_CHECKPOINT
    from hero_core.reports.readme_headline import NOISE_FLOOR_RUN, headline_block

    twin = f"local-10@{DEFAULT_CHECKPOINT}"
    retain = {"retain": {name: _retain_fig({"a": 7, "b": 7}) for name in (DEFAULT_CHECKPOINT, twin)}}
    retain_100 = {"retain": {name: _retain_fig({"a": 40, "b": 13}) for name in (DEFAULT_CHECKPOINT, twin)}}
    floor = {"kept": {NOISE_FLOOR_RUN: {"kept": 0.912, "kept_low": 0.85, "kept_high": 0.97, "dense_correct": 31}}}
    kept = {"overall": {"kept": 0.5, "kept_low": 0.4, "kept_high": 0.6, "dense_correct": 31}}
    report = {"kept": {DEFAULT_CHECKPOINT: kept, twin: kept}}
    seeds = {"summary": {"measures": [], "arms": {"hero": {"runs": ["x", "y"]}}, "differences": {}},
             "retain_missing": ""}
    measured = _measured([(DEFAULT_CHECKPOINT, "local-10")])
    text = "\n".join(headline_block(measured, retain, report, retain_100, seeds, None, floor,
                                    {"x": {"steps_done": 123}, "y": {"steps_done": 123}}))
    assert "Retain % [95 % CI], 7 examples per task |" in text
    assert "**Retain at up to 40 examples per task (b 13)**" in text
    assert "dense in bf16 keeps 91.2 % [85.0, 97.0] of the 31 answers dense fp32 gets right" in text
    assert "first training stage (123 steps) of each arm" in text
    uncounted = {"retain": {k: {**v, "examples": {}} for k, v in retain["retain"].items()}}
    bare = "\n".join(headline_block(measured, uncounted, report, None, seeds, None, None,
                                    {"x": {"steps_done": 123}, "y": None}))
    assert "examples per task" not in bare and "floor" not in bare  # no record: no number
    assert "first training stage of each arm" in bare and "steps" not in bare


def test_the_readme_headline_quotes_the_stored_records():
    """On the project's own files: each figure is recomputed here from the record it comes from."""
    import json
    from pathlib import Path

    from hero_core.reports import readme_headline as R

    root = Path(__file__).resolve().parents[1]
    stored = {p: json.loads((root / p).read_text()) if (root / p).is_file() else None
              for p in ("docs/bigbench.json", "docs/answers.json", "docs/experiments/retain-100/bigbench-100.json",
                        "docs/seeds.json", "docs/experiments/answers-noise-floor/kept.json")}
    if None in stored.values():
        pytest.skip("a result file is not in this checkout")
    bigbench, answers, retain_100, seeds, floor = stored.values()
    text = "\n".join(R.headline_block(json.loads((root / "hero_core/checkpoints/measured.json").read_text()),
                                      bigbench, answers, retain_100, seeds, None, floor))
    counts = {n for fig in bigbench["retain"].values() for n in fig.get("examples", {}).values()}
    graded_rows = [n for n in R.PAIRS if n in bigbench["retain"] and f"| **{n}** |" in text]
    if len(counts) == 1 and graded_rows:  # the header says on how many examples the shown Retain was graded
        assert f"{counts.pop()} examples per task |" in text
    f = floor["kept"]["dense bf16 of dense fp32"]
    floor_words = f"dense in bf16 keeps {100 * f['kept']:.1f} % [{100 * f['kept_low']:.1f}"
    if R.DEFAULT_CHECKPOINT in answers["kept"]:  # the floor is said beside the default's answers kept
        assert floor_words in text
    else:  # a report from before this default: no sentence about answers at all, rather than another run's
        assert floor_words not in text and "**Answers kept**" not in text
    runs = [r for arm in seeds["summary"]["arms"].values() for r in arm["runs"]]
    steps = {json.loads((root / "hero_core/checkpoints" / r / "hero_config.json").read_text())["training"]["steps_done"]
             for r in runs}
    if len(steps) == 1:
        assert f"first training stage ({steps.pop()} steps)" in text
    if R.DEFAULT_CHECKPOINT in retain_100["retain"]:  # the larger sample was graded on one default, not every one
        hundred = retain_100["retain"][R.DEFAULT_CHECKPOINT]["examples"]
        assert f"{max(hundred.values())} examples per task" in text
    else:
        assert "Retain at up to" not in text and "retain-100" not in text
    if R.DEFAULT_CHECKPOINT not in bigbench["retain"]:  # a default without grades keeps its row, says so
        assert f"| **{R.DEFAULT_CHECKPOINT}** |" in text and R.NOT_MEASURED in text and "--fetch-bigbench" in text
