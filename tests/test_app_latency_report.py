"""The app-latency table and its summary sentence are drawn from the benchmark's summary, and the performance
page's renderer keeps the table and the sentence between their markers (the README links the page)."""

from hero_core.reports.app_latency_report import latency_lines, latency_table, summary_words


def row(action, kind, content, idle, met=True, target=(None, None)):
    return {"action": action, "kind": kind, "n": 2, "content_s": content, "idle_s": idle, "server_s": 0.25,
            "server_cpu_s": 0.4, "browser_cpu_s": 2.0, "browser_script_s": 0.3, "browser_layout_s": 0.1,
            "svg_nodes": 4371, "target_content_s": target[0], "target_idle_s": target[1], "met": met}


RESULT = {"measured_on": "2026-12-06", "repeats": 2, "prompt_tokens": 200, "summary": [
    row("first visit (model load included)", "first visit", 7.9, 10.8, target=(8.0, None)),
    row("reload of Route explorer", "reload", 1.2, 4.1, met=False, target=(None, 2.0)),
    row("switch to Memory view", "page switch", 0.2, 1.7, target=(1.5, 3.0)),
    row("switch to Compare runs", "page switch", 0.4, 3.5, met=False, target=(1.5, 3.0)),
    row("new prompt on Route explorer", "new prompt", 1.84, 4.96, met=False, target=(1.0, None)),
]}


def test_the_table_says_each_target_and_whether_it_was_met():
    lines = latency_table(RESULT["summary"])
    assert len(lines) == 2 + 5
    reload = next(line for line in lines if line.startswith("| reload"))
    assert "idle ≤ 2 s **missed**" in reload and "| 1.20 | 4.10 |" in reload
    memory = next(line for line in lines if line.startswith("| switch to Memory"))
    assert "content ≤ 1.5 s met · idle ≤ 3 s met" in memory
    compare = next(line for line in lines if line.startswith("| switch to Compare"))  # one of two targets missed
    assert "content ≤ 1.5 s met · idle ≤ 3 s **missed**" in compare
    assert latency_lines(RESULT)[0].startswith("Measured 2026-12-06 by `python scripts/app_latency.py --repeats 2`")


def test_the_summary_sentence_reads_its_figures_from_the_summary():
    words = summary_words(RESULT)[0]
    assert "first content in 0.2–0.4 s and is idle in 1.7–3.5 s" in words
    assert "a new 200-token prompt's skip map appears in 1.8 s (the page idle in 5.0 s)" in words
    assert "first chart after 7.9 s" in words and "a reload is idle in 4.1 s" in words
    assert "3 of 5 targets are not met yet: reload of Route explorer, switch to Compare runs, new prompt" in words
    assert "a skip-map click is idle in not measured" in words  # an action the run left out is said so


def test_the_performance_page_keeps_the_table(tmp_path):
    import json
    from pathlib import Path

    from hero_core.reports.bench_report import render

    bench = json.loads((Path(__file__).resolve().parents[1] / "docs" / "bench.json").read_text())
    page = render(bench, RESULT)
    start, end = page.index("<!-- app-latency:start -->"), page.index("<!-- app-latency:end -->")
    assert "| reload of Route explorer | 1.20 | 4.10 |" in page[start:end]
    start, end = page.index("<!-- app-latency-words:start -->"), page.index("<!-- app-latency-words:end -->")
    assert "a new 200-token prompt's skip map appears in 1.8 s" in page[start:end]
    assert "](experiments/app-latency/README.md)" in page[start:end]  # the page's own relative link
    assert "Not measured yet" in render(bench, None) and "app-latency-words" not in render(bench, None)
