"""Skip by absolute position within one prompt (hero_core.viz.prompt_positions): the table, its words, its chart."""

import numpy as np
import pytest

from hero_core.viz.prompt_positions import TRAINED_SPAN, position_bars, position_table, position_words

LONG = " ".join(f"Step {i}: add {i} and {i + 1} to get {2 * i + 1}." for i in range(30))  # ~400 tokens


@pytest.fixture(scope="module")
def long_trace(tiny):
    return tiny.trace(LONG, max_tokens=300)


def test_the_table_bins_tokens_by_their_absolute_index(long_trace):
    table = position_table(long_trace)
    assert list(table.label) == ["0 (first token)", "1-15", "16-127", "128-511"]
    assert list(table.n_tokens) == [1, 15, 112, long_trace.n_tokens - 128]
    skipped = (~long_trace.executed).sum(axis=0)
    assert table.ffn_skipped_per_token.iloc[0] == skipped[0]
    assert table.ffn_skipped_per_token.iloc[3] == pytest.approx(skipped[128:].mean())
    net = long_trace.compute()["net_param_skip"]
    assert table.net_param_skip.iloc[2] == pytest.approx(net[16:128].mean())
    # token-weighted, the bins give back the prompt's own figure
    assert np.average(table.param_skip, weights=table.n_tokens) == pytest.approx(long_trace.param_skip)


def test_the_words_say_only_what_the_bins_show(long_trace):
    table = position_table(long_trace)
    words = position_words(table, long_trace.n_routed)
    first = table.ffn_skipped_per_token[0]
    assert f"of {long_trace.n_routed}, by absolute position: token 0 skips {first:.1f}" in words
    near = np.average(table.ffn_skipped_per_token[1:3], weights=table.n_tokens[1:3])
    far = table.ffn_skipped_per_token.iloc[3]
    assert f"Past token {TRAINED_SPAN - 1}" in words
    assert ("fewer" in words) == (far < near) and ("more FFNs" in words) == (far > near)
    assert ("below zero" in words) == bool((table.net_param_skip < 0).any())


def test_a_short_prompt_has_no_sentence_on_the_trained_span(tiny):
    trace = tiny.trace("A short prompt, well inside the trained span of the routers.")
    words = position_words(position_table(trace), trace.n_routed)
    assert "token 0 skips" in words and "Past token" not in words


def test_the_chart_marks_bins_that_cost_more_than_they_save(long_trace):
    table = position_table(long_trace).assign(net_param_skip=[0.1, -0.01, 0.05, -0.2])
    fig = position_bars(table, long_trace).to_plotly_json()
    bars = fig["data"][0]
    assert list(bars["x"]) == list(table.label)
    assert bars["marker"]["color"][1] == bars["marker"]["color"][3] != bars["marker"]["color"][0]
    assert fig["layout"]["title"]["text"].startswith("Skip by absolute position")
    assert "net param skip below zero" in fig["layout"]["title"]["text"]  # what the red bars mean
    assert list(bars["text"]) == [f"{v:.1f}" for v in table.ffn_skipped_per_token]
