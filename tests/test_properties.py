"""Property-based tests: trace serialisation and the figure builders hold for any tokens and values."""

import dataclasses
import json
from html.parser import HTMLParser

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hero_core.measures.accounting import ComputeProfile
from hero_core.method.trace import RoutingTrace
from hero_core.viz.figures import (
    CELLS_NAME,
    SKIPPED_NAME,
    TRAJECTORY_FIELDS,
    executed_counts,
    flip_codes,
    flip_map,
    layer_skip_bars,
    skip_heatmap,
    token_compute_html,
    trajectories,
)
from hero_core.viz.memory_figures import memory_map
from hero_core.words.labels import display_tokens, plotly_text, token_label

PROFILE = ComputeProfile(total_params=10_000, ffn_params=300, adapter_params=20, router_params=15,
                         linear_params=8_000, n_layers=6, attention_width=16, d_memory=8)
finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@st.composite
def traces(draw):
    R = draw(st.integers(1, 6))
    T = draw(st.integers(1, 12))
    tokens = draw(st.lists(st.text(min_size=0, max_size=6), min_size=T, max_size=T))
    grid = lambda: np.array(draw(st.lists(finite, min_size=R * T, max_size=R * T))).reshape(R, T)  # noqa: E731
    gate = np.array(draw(st.lists(st.floats(0, 1), min_size=R * T, max_size=R * T))).reshape(R, T)
    attention = np.zeros((T, R, R))
    for j in range(1, R):
        attention[:, j, :j] = draw(st.floats(0, 1))
    return RoutingTrace(backbone="b", checkpoint="c", variant="hero", tau=0.5, tokens=tokens,
                        token_ids=list(range(T)), routed_layers=list(range(R)), gate=gate, executed=gate >= 0.5,
                        history_logit=grid(), local_logit=grid(), p_hist=gate, m_hist=gate, nu=grid(),
                        memory_attention=attention, forgetting=np.full(R, 0.98), profile=PROFILE)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_json_round_trip_is_exact(tmp_path_factory, trace):
    path = tmp_path_factory.mktemp("t") / "trace.json"
    loaded = RoutingTrace.load(trace.save(path))
    assert loaded.equals(trace)
    assert loaded.tokens == trace.tokens
    frame = loaded.to_frame()
    assert len(frame) == trace.n_routed * trace.n_tokens
    assert 0.0 <= loaded.param_skip <= trace.n_routed * PROFILE.ffn_params / PROFILE.total_params + 1e-12


# -- figure builders: any trace, any token text --------------------------------------------------------
# Tokens as a tokenizer may decode them: control characters, emoji, CJK, right-to-left text, markup.
ANY_TOKEN = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=8)
WEIRD_TOKEN = st.sampled_from(["\n", "\t", " ", "", "\x00", "\u202e", "שלום", "مرحبا", "漢字", "👩‍💻", "<b>", "&amp;",
                               "\"'", "\r\n", "\u200b"])
TOKEN_TEXT = st.one_of(ANY_TOKEN, WEIRD_TOKEN)
FIGURE_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _with_tokens(trace: RoutingTrace, tokens: list[str]) -> RoutingTrace:
    return dataclasses.replace(trace, tokens=tokens)


@st.composite
def traces_with_text(draw):
    trace = draw(traces())
    return _with_tokens(trace, draw(st.lists(TOKEN_TEXT, min_size=trace.n_tokens, max_size=trace.n_tokens)))


class _Spans(HTMLParser):
    """Collects the text of every ``hero-token`` span (entities decoded, <br> ignored)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []
        self._inside = False

    def handle_starttag(self, tag, attrs):
        if tag == "span" and ("class", "hero-token") in attrs:
            self.texts.append("")
            self._inside = True
        elif tag != "br":
            assert tag == "div", f"token text produced a <{tag}> tag"

    def handle_endtag(self, tag):
        if tag == "span":
            self._inside = False

    def handle_data(self, data):
        if self._inside:
            self.texts[-1] += data


@FIGURE_SETTINGS
@given(TOKEN_TEXT, st.integers(2, 30))
def test_token_labels_are_one_visible_line(token, max_len):
    label = token_label(token, max_len)
    assert 1 <= len(label) <= max_len
    assert not set("\n\r\t") & set(label)
    assert label.strip()


@FIGURE_SETTINGS
@given(traces_with_text())
def test_skip_map_plots_every_cell_of_the_trace(trace):
    R, T = trace.n_routed, trace.n_tokens
    fig = skip_heatmap(trace)
    cells = next(d for d in fig.data if d.name == CELLS_NAME)
    np.testing.assert_array_equal(cells.x, np.tile(np.arange(T), R))
    np.testing.assert_array_equal(cells.y, np.repeat(np.arange(1, R + 1), T))
    np.testing.assert_array_equal(cells.marker.color, trace.gate.reshape(-1))
    marks = next(d for d in fig.data if d.name == SKIPPED_NAME)
    blocks, tokens = np.nonzero(~trace.executed)
    assert sorted(zip(np.asarray(marks.y) - 1, marks.x, strict=True)) == sorted(zip(blocks, tokens, strict=True))
    # Tick labels stay aligned with their tokens, whatever the text (escaped, one line each).
    axis = fig.layout.xaxis
    # display labels: an empty piece after a non-empty one continues it (a split character), shown as "(x)"
    labels = display_tokens(trace.tokens)
    assert list(axis.ticktext) == [plotly_text(labels[t]) for t in axis.tickvals]
    assert len(axis.tickvals) <= 64 and axis.tickvals[0] == 0
    json.loads(fig.to_json())  # serialisable for the browser


@FIGURE_SETTINGS
@given(traces_with_text())
def test_count_and_rate_figures_are_the_traces_numbers(trace):
    counts = executed_counts(trace).data[0]
    np.testing.assert_array_equal(counts.y, trace.executed.sum(axis=0))
    rates = layer_skip_bars([trace]).data[0]
    np.testing.assert_allclose(rates.y, 1.0 - trace.executed.mean(axis=1))
    assert list(rates.x) == [f"L{layer}" for layer in trace.routed_layers]


@FIGURE_SETTINGS
@given(traces_with_text(), st.data())
def test_memory_map_and_trajectories_show_the_chosen_token(trace, data):
    t = data.draw(st.integers(0, trace.n_tokens - 1))
    z = np.array(memory_map(trace, t).data[0].z, dtype=np.float64)
    lower = np.tril_indices(trace.n_routed, -1)
    np.testing.assert_array_equal(z[lower], trace.memory_attention[t][lower])
    assert np.isnan(z[np.triu_indices(trace.n_routed)]).all()
    fig = trajectories(trace, t)
    for panel, (field, _) in zip(fig.data, TRAJECTORY_FIELDS, strict=True):
        np.testing.assert_array_equal(panel.y, getattr(trace, field)[:, t])
    with pytest.raises(ValueError, match="out of range"):
        memory_map(trace, trace.n_tokens)


@FIGURE_SETTINGS
@given(traces_with_text(), st.data())
def test_flip_map_counts_exactly_the_differing_decisions(trace, data):
    flips = np.array(data.draw(st.lists(st.booleans(), min_size=trace.gate.size, max_size=trace.gate.size)))
    other = dataclasses.replace(trace, executed=trace.executed ^ flips.reshape(trace.gate.shape))
    codes = flip_codes(trace, other)
    assert int((codes >= 2).sum()) == int(flips.sum())
    np.testing.assert_array_equal(codes == 1, trace.executed & other.executed)
    assert f": {int(flips.sum())} of {trace.gate.size} " in flip_map(trace, other).layout.title.text


@FIGURE_SETTINGS
@given(st.lists(TOKEN_TEXT, min_size=1, max_size=12), st.data())
def test_token_text_html_keeps_every_token_and_injects_no_markup(tokens, data):
    counts = data.draw(st.lists(st.integers(0, 30), min_size=len(tokens), max_size=len(tokens)))
    parser = _Spans()
    parser.feed(token_compute_html(tokens, counts, 30))
    expected = [token.replace("\n", "↵").replace("\t", "⇥") or "∅" for token in tokens]
    assert parser.texts == expected
