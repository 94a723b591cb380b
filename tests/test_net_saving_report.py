"""docs/net_saving.json grows one measurement at a time: a part merged in keeps every checkpoint already there."""

import json

import pytest

from hero_core.reports import net_saving_report as report


def _report(path, *names, tau=0.5, texts=8):
    body = {"format_version": 1, "max_tokens": 192, "sets": {}, "texts_per_domain": texts,
            "checkpoints": [{"checkpoint": n, "tau": tau, "sets": {}} for n in names]}
    path.write_text(json.dumps(body))
    return path


def test_a_checkpoint_measured_again_replaces_its_row_in_place(tmp_path):
    both = report.merged([_report(tmp_path / "a.json", "hero-10-r7", "hero-25"),
                          _report(tmp_path / "b.json", "hero-10-r7", "hero-25-r7", tau=0.6)])
    assert [c["checkpoint"] for c in both["checkpoints"]] == ["hero-10-r7", "hero-25", "hero-25-r7"]
    assert both["checkpoints"][0]["tau"] == 0.6  # the later measurement


def test_parts_measured_with_other_settings_are_refused(tmp_path):
    with pytest.raises(ValueError, match="different settings"):
        report.merged([_report(tmp_path / "a.json", "x"), _report(tmp_path / "b.json", "y", texts=12)])


def test_merging_a_part_keeps_the_shipped_checkpoints(tmp_path, monkeypatch):
    shipped = _report(tmp_path / "net_saving.json", "hero-10-r7", "hero-25")
    monkeypatch.setattr(report, "REPORT", shipped)
    written = {}
    monkeypatch.setattr(report, "render_markdown", lambda r: "")
    monkeypatch.setattr(report, "readme_lines", lambda r: [])
    monkeypatch.setattr(report, "refresh_block", lambda *a: written.setdefault("readme", a))
    report.main([str(_report(tmp_path / "part.json", "hero-40-r7"))])
    names = [c["checkpoint"] for c in json.loads(shipped.read_text())["checkpoints"]]
    assert names == ["hero-10-r7", "hero-25", "hero-40-r7"] and "readme" in written
