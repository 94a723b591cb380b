"""Skip by absolute position (hero_core.eval.frontier.position_skip, SweepResult.skip_by_absolute_position, the page's
figure)."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from hero_core.eval.frontier import position_skip as ps
from hero_core.eval.sweep.run import SweepResult, sweep
from hero_core.viz.sweep_figures import sweep_item_quality, sweep_matched_bars, sweep_position_skip

LONG = " ".join(f"Step {i}: add {i} and {i + 1} to get {2 * i + 1}." for i in range(30))  # ~400 tokens
PROMPTS = [LONG, "Hello there, how are you today?", "def add(x, y):\n    return x + y"]


@pytest.fixture(scope="module")
def result(tiny):
    return sweep(tiny, PROMPTS, variants=["hero", "no_history"], max_tokens=200, match_compute=True)


# -- bins ---------------------------------------------------------------------------------------------
def test_bins_put_token_zero_alone_and_follow_the_edges():
    positions = [0, 1, 15, 16, 127, 128, 511, 512, 2047, 2048, 10_000]
    np.testing.assert_array_equal(ps.position_bins(positions), [0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5])
    labels = [ps.bin_label(a, b) for a, b in zip(ps.POSITION_EDGES, ps.POSITION_EDGES[1:])]
    assert labels == ["0 (first token)", "1-15", "16-127", "128-511", "512-2047", "2048+"]
    with pytest.raises(ValueError, match="start at 0"):
        ps.position_bins([3], edges=(1, 16))
    with pytest.raises(ValueError, match="strictly increase"):
        ps.position_bins([3], edges=(0, 16, 16))
    with pytest.raises(ValueError, match="must lie in"):
        ps.position_bins([20], edges=(0, 1, 16))


def test_absolute_bins_of_a_sweep_add_up(result, tiny):
    table = result.skip_by_absolute_position()
    tokens = result.tokens
    for run, g in table.groupby("run"):
        assert g.n_tokens.sum() == (tokens.run == run).sum()  # every token in exactly one bin
        first = g[g.start == 0].iloc[0]
        assert first.label == "0 (first token)" and first.n_tokens == len(PROMPTS)  # one first token per item
        assert list(g.label) == ["0 (first token)", "1-15", "16-127", "128-511"]  # LONG reaches past 128
        assert g[g.start == 128].n_tokens.iloc[0] == 200 - 128  # only LONG is that long (cut at 200)
    # the first-token bin holds exactly the first tokens' numbers, traced afresh
    traces = [tiny.trace(p, variant="hero", max_tokens=200) for p in PROMPTS]
    first = table[(table.run == "hero") & (table.start == 0)].iloc[0]
    assert first.ffn_skipped_per_token == pytest.approx(np.mean([(~t.executed[:, 0]).sum() for t in traces]))
    assert first.param_skip == pytest.approx(np.mean([t.compute()["param_skip"][0] for t in traces]))
    mid = table[(table.run == "hero") & (table.start == 16)].iloc[0]
    want = np.concatenate([t.compute()["param_skip"][16:128] for t in traces])
    assert mid.n_tokens == len(want) and mid.param_skip == pytest.approx(want.mean())


def test_token_table_carries_absolute_index_and_param_skip(result):
    for (_run, _item), g in result.tokens.groupby(["run", "item"]):
        np.testing.assert_array_equal(g.token_index, np.arange(len(g)))
        np.testing.assert_array_equal(g.ffn_executed + g.ffn_skipped, g.ffn_executed.iloc[0] + g.ffn_skipped.iloc[0])


# -- param skip without the first token -------------------------------------------------------------------
def test_excluding_first_token_helper():
    assert ps.param_skip_excluding_first([0.5, 0.1, 0.1]) == pytest.approx(0.1)
    assert math.isnan(ps.param_skip_excluding_first([0.5]))


def test_excluding_first_differs_when_token_zero_skips_more(tiny):
    trace = tiny.trace(LONG, max_tokens=40)
    trace.executed[:, 0] = False  # token 0 skips every FFN, as the real attention sink nearly does
    per_token = trace.compute()["param_skip"]
    without = ps.param_skip_excluding_first(per_token)
    assert without == pytest.approx(per_token[1:].mean())
    assert trace.param_skip > without  # the sink lifts the pooled figure
    assert trace.param_skip - without == pytest.approx((per_token[0] - without) / trace.n_tokens)


def test_sweep_reports_param_skip_without_the_first_token(result):
    items = result.items[result.items.matched_to == ""]
    tokens = result.tokens
    for _, row in items.iterrows():
        t = tokens[(tokens.run == row.run) & (tokens["item"] == row["item"])]
        assert row.param_skip_excluding_first_token == pytest.approx(t.param_skip.iloc[1:].mean())
    quality = result.quality().set_index("run")
    for run in result.runs:
        t = tokens[tokens.run == run]
        assert quality.loc[run, "param_skip"] == pytest.approx(t.param_skip.mean())
        after_first = t[t.token_index > 0].param_skip.mean()
        assert quality.loc[run, "param_skip_excluding_first_token"] == pytest.approx(after_first)
    assert "param_skip_excluding_first_token" in result.matched().columns


def test_quality_weights_items_by_their_tokens_after_the_first():
    items = pd.DataFrame({"run": ["r", "r"], "item": [0, 1], "matched_to": ["", ""], "n_tokens": [1, 11],
                          "param_skip": [0.9, 0.1], "param_skip_excluding_first_token": [np.nan, 0.05],
                          "ffn_per_token": [1.0, 1.0], "nll_sum": [1.0, 1.0], "dense_nll_sum": [1.0, 1.0],
                          "n_pred": [0, 10], "mean_kl": [0.0, 0.0], "top1_agreement": [1.0, 1.0]})
    q = SweepResult(items, pd.DataFrame(), pd.DataFrame()).quality().iloc[0]
    assert q.param_skip == pytest.approx((0.9 + 11 * 0.1) / 12)
    assert q.param_skip_excluding_first_token == pytest.approx(0.05)  # the one-token item has none to add


# -- figures --------------------------------------------------------------------------------------------
def test_page_position_figure_has_the_absolute_axis(result):
    fig = sweep_position_skip(result)
    assert "absolute" in fig.layout.xaxis.title.text and fig.layout.xaxis.type == "category"
    table = result.skip_by_absolute_position()
    for trace in fig.data:
        want = table[table.run == trace.name]
        assert list(trace.x) == list(want.label) and trace.x[0] == "0 (first token)"
        np.testing.assert_allclose(trace.y, want.skip_rate)
    assert "first token" in sweep_item_quality(result).data[0].hovertemplate
    bars = sweep_matched_bars(result).data[0]
    np.testing.assert_allclose(np.asarray(bars.customdata)[:, 1], result.quality().param_skip_excluding_first_token)


# -- the measurement ------------------------------------------------------------------------------------
def test_pack_texts_fills_every_sequence():
    texts = ["a b c", "d e", "f g h i", "j", "k l m n o p"]
    packed = ps.pack_texts(texts, lambda t: len(t.split()), n_sequences=5, max_tokens=5, separator=" | ")
    assert packed == ["a b c | d e", "f g h i | j", "k l m n o p"]  # separators count as tokens
    assert ps.pack_texts(texts, lambda t: len(t.split()), n_sequences=1, max_tokens=5, separator="|") == ["a b c|d e"]
    assert ps.pack_texts(texts, lambda t: len(t.split()), n_sequences=2, max_tokens=100, separator="|") == []


def test_skip_ratio():
    table = pd.DataFrame({"start": [0, 16, 512], "ffn_skipped_per_token": [25.0, 4.0, 3.0]})
    assert ps.skip_ratio(table) == pytest.approx(0.75)
    assert math.isnan(ps.skip_ratio(table[table.start != 512]))
    assert math.isnan(ps.skip_ratio(table.assign(ffn_skipped_per_token=[25.0, 0.0, 3.0])))


def test_trace_sequences_summary_and_report(tiny):
    sequences = {"reasoning": [LONG, LONG[100:]], "code": ["def f(x):\n    return x * 2\n" * 20]}
    tokens = ps.trace_sequences({"tiny-a": tiny}, sequences, max_tokens=160)
    assert set(tokens.columns) >= {"checkpoint", "domain", "sequence", "tau", *ps.TOKEN_COLUMNS}
    summary = ps.summarise(tokens)
    c = summary["checkpoints"]["tiny-a"]
    assert c["n_sequences"] == 3 and c["n_tokens"] == len(tokens) == 3 * 160
    assert c["first_token"]["n_tokens"] == 3 and c["first_token"]["label"] == "0 (first token)"
    assert sum(row["n_tokens"] for row in c["bins"]) == len(tokens)
    assert c["param_skip_excluding_first_token"] == pytest.approx(tokens[tokens.token_index > 0].param_skip.mean())
    assert math.isnan(c["ratio_far_to_near"]) and c["meets_target"] is None  # 160 tokens never reach 512
    table = ps.markdown_table(summary)
    assert "0 (first token)" in table and "tiny-a" in table
    fig = ps.position_skip_figure(summary)
    assert "absolute" in fig.layout.xaxis.title.text and list(fig.data[0].x)[0] == "0 (first token)"


def test_script_flags():
    from hero_core.reports.position_skip_run import parse_args

    args = parse_args(["--checkpoints", "hero-10", "local-10", "--limit", "3"])
    assert args.checkpoints == ["hero-10", "local-10"] and args.sequences == 3 and args.max_tokens == 2048
    with pytest.raises(SystemExit):
        parse_args(["--sequences", "0"])


def test_ratio_chart_fits_its_axis_to_the_intervals(result):
    """Points with whiskers on an axis fitted to the intervals: bars from 0 hid 5 % differences."""
    fig = sweep_matched_bars(result)
    table = result.quality()
    low, high = fig.layout.yaxis.range
    assert low > 0.5 * min(1.0, table.ratio_low.min()) and low <= min(1.0, table.ratio_low.min())
    assert high >= max(1.0, table.ratio_high.max())
    assert fig.data[0].type == "scatter" and fig.data[0].mode == "markers"


def test_results_page_shows_the_measured_positions_or_nothing(tmp_path):
    from hero_core.reports.quality_report import POSITION_RESULTS, position_lines

    assert position_lines(tmp_path / "absent.json", tmp_path / "f.png") == []  # not measured: no section
    lines = position_lines(POSITION_RESULTS, tmp_path / "f.png")
    table = "\n".join(lines)
    saved = json.loads(POSITION_RESULTS.read_text())
    assert "## Skip by absolute position" in lines
    for name in saved["summary"]["checkpoints"]:
        assert f"| {name} (" in table
    assert saved["meta"]["command"] in table
