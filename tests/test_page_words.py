"""What the pages say, as plain functions (issue 23): spans of a trace (a generation's answer apart from its prompt,
token 0's share), the threshold sweep in words, the local prompt store links name, matched-compute verdicts."""

import math

import numpy as np
import pytest

from hero_core.analysis.spans import (
    answer_and_prompt,
    first_token_lift,
    first_token_words,
    net_cost_words,
    span_figures,
)
from hero_core.data import prompt_store
from hero_core.eval.frontier import measured
from hero_core.viz.tau_words import rises, tau_sweep_words


# -- spans ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def generation(tiny):
    _, trace = tiny.generate("What is the capital of France?", max_new_tokens=8, chat_template=True)
    trace.quality = tiny.score_tokens(trace.token_ids, "hero", tau=trace.tau)
    return trace


def test_the_answer_is_the_generated_tokens_and_the_predictions_of_them(generation):
    trace, n = generation, generation.n_prompt_tokens
    answer, prompt = answer_and_prompt(trace)
    per_token = trace.compute()
    assert answer.n_tokens == trace.n_tokens - n and prompt.n_tokens == n
    assert answer.param_skip == pytest.approx(per_token["param_skip"][n:].mean())
    assert prompt.net_param_skip == pytest.approx(per_token["net_param_skip"][:n].mean())
    assert answer.ffn_executed_per_token == pytest.approx(trace.executed[:, n:].sum(axis=0).mean())
    # the answer's quality: the predictions made at n-1 … T-1 (the last one has no known next token: no NLL)
    nll, dense = trace.quality["nll"][n - 1:-1], trace.quality["dense_nll"][n - 1:-1]
    assert answer.perplexity_ratio == pytest.approx(math.exp(nll.mean() - dense.mean()))
    assert answer.mean_kl_to_dense == pytest.approx(trace.quality["kl_to_dense"][n - 1:].mean())
    assert answer.n_predictions == trace.n_tokens - n + 1


def test_spans_without_tokens_or_quality(tiny):
    trace = tiny.trace("Just a prompt.")
    assert span_figures(trace, trace.n_tokens) is None and span_figures(trace, 3, 2) is None
    whole = span_figures(trace, 0)
    assert whole.param_skip == pytest.approx(trace.param_skip) and math.isnan(whole.perplexity_ratio)
    answer, prompt = answer_and_prompt(trace)  # no n_prompt_tokens: all prompt
    assert answer is None and prompt.n_tokens == trace.n_tokens


def test_first_token_share_and_net_cost_words(tiny):
    trace = tiny.trace("The cat sat on the mat.", tau=0.55)
    without, share = first_token_lift(trace)
    assert without == pytest.approx(trace.compute()["param_skip"][1:].mean())
    skipped = (~trace.executed).sum(axis=0)
    assert share == pytest.approx(skipped[0] / skipped.sum() if skipped.sum() else 0.0)
    trace.executed[:, 0] = False  # token 0 skips every FFN, the others none: it carries all the skipping
    trace.executed[:, 1:] = True
    assert first_token_lift(trace)[1] == 1.0 and "Token 0 (the attention sink) skips" in first_token_words(trace)
    assert net_cost_words(0.01) is None and net_cost_words(float("nan")) is None
    assert "saved -3.8% of the dense model's FLOPs net" in net_cost_words(-0.038, "this prompt")
    assert "costs more than dense" in net_cost_words(0.0, "this prompt")  # saving nothing is no saving


# -- the threshold sweep in words -------------------------------------------------------------------------------
def test_a_sweep_that_rises_somewhere_says_where():
    taus, ffn = [0.1, 0.2, 0.3, 0.4], [20.0, 18.0, 18.6, 15.0]
    assert rises(taus, ffn) == [(0.2, 0.3, 18.0, 18.6)]
    words = tau_sweep_words(taus, ffn, 30, [1.0, 1.01, 1.02, 1.1])
    assert "not at every step: from τ = 0.2 to 0.3 it rises from 18.0 to 18.6" in words
    assert "later gates can open" in words and "from 1 at τ = 0.1 to 1.1 at τ = 0.4" in words


def test_a_monotone_and_a_flat_sweep():
    assert "falls as τ rises" in tau_sweep_words([0.1, 0.5, 0.9], [25.0, 20.0, 10.0], 30)
    assert "does not fall" in tau_sweep_words([0.1, 0.5, 0.9], [30.0, 30.0, 30.0], 30)
    assert "quality" not in tau_sweep_words([0.1, 0.9], [2.0, 1.0], 4, [math.nan, math.nan])


# -- the prompt store -----------------------------------------------------------------------------------------
def test_the_prompt_store_keeps_a_prompt_by_its_content(tmp_path):
    text = "long " * 1000
    key = prompt_store.save(text, tmp_path)
    assert prompt_store.is_id(key) and key == prompt_store.prompt_id(text)
    assert prompt_store.save(text, tmp_path) == key and prompt_store.load(key, tmp_path) == text
    assert prompt_store.load("0" * 16, tmp_path) is None  # not stored here
    assert prompt_store.load("../../etc/passwd", tmp_path) is None  # not an id
    (tmp_path / f"{key}.json").write_text('{"prompt": "something else"}')
    assert prompt_store.load(key, tmp_path) is None  # content that does not hash to its id is not the prompt


# -- matched-compute verdicts ---------------------------------------------------------------------------------
def _point(knob, ratio, low, high, skip):
    return {"knob": knob, "d": {"param_skip": skip, "perplexity_ratio": ratio, "ratio_low": low,
                                "ratio_high": high, "top1_agreement": 0.9}}


def test_matched_rows_pair_every_checkpoint_with_the_hero_of_its_budget():
    frontier = {"domains": ["d"], "curves": {
        "hero-10": {"kind": "checkpoint", "variant": "hero", "tau": 0.5, "points": [_point(0.5, 1.0, 0.98, 1.02, 0.1)]},
        "local-10": {"kind": "checkpoint", "variant": "no_history", "tau": 0.5,
                     "points": [_point(0.4, 1.1, 1.05, 1.15, 0.05), _point(0.6, 1.3, 1.25, 1.35, 0.15)]},
        "no_memread-10": {"kind": "checkpoint", "variant": "no_memread", "tau": 0.5,
                          "points": [_point(0.4, 0.9, 0.85, 1.01, 0.05), _point(0.6, 1.1, 1.0, 1.2, 0.15)]},
        "no_memread-10-s1": {"kind": "checkpoint", "variant": "no_memread", "tau": 0.5,
                             "points": [_point(0.5, 1.0, 0.9, 1.1, 0.1)]},
        "random": {"kind": "baseline", "points": []}}}
    rows = measured.matched_rows(frontier)
    assert [(r["reference"], r["other"], r["better"]) for r in rows] == \
        [("hero-10", "local-10", "hero-10"), ("hero-10", "no_memread-10", "")]
    assert rows[0]["other_perplexity_ratio"] == pytest.approx(np.exp((np.log(1.1) + np.log(1.3)) / 2))
    summary = {"matched": rows, "texts_per_domain": 40, "backbone": "B"}
    assert measured.matched_between(summary, "local-10", "hero-10") == [rows[0]]
    assert measured.matched_words([rows[0]]) == "hero-10 against local-10: **hero-10** better on d."
    assert measured.matched_words([rows[1]]) == "hero-10 against no_memread-10: no clear difference on d."
    assert "Measured on B, 40 held-out texts per domain" in measured.matched_method(summary)
    assert measured.matched_words([]).startswith("No matched-compute measurement")


def test_baseline_rows_read_every_reference_at_the_routers_own_skip():
    """The router against the fixed references at the param skip it realises at its own tau: a reference beyond
    reach is left out, and the words say ahead / behind / no clear difference from the intervals alone."""
    from hero_core.viz.frontier_figure import frontier_chart

    frontier = {"domains": ["d"], "curves": {
        "hero-10": {"kind": "checkpoint", "variant": "hero", "tau": 0.5,
                    "points": [_point(0.35, 0.99, 0.98, 1.0, 0.05), _point(0.5, 1.0, 0.98, 1.02, 0.1)]},
        "local-10": {"kind": "checkpoint", "variant": "no_history", "tau": 0.5,
                     "points": [_point(0.5, 1.1, 1.05, 1.15, 0.1)]},
        "static": {"kind": "baseline", "adapters_of": "hero-10",
                   "points": [_point(1, 1.2, 1.1, 1.3, 0.05), _point(3, 1.4, 1.3, 1.5, 0.15)]},
        "oracle": {"kind": "reference (not deployable)", "adapters_of": "hero-10",
                   "points": [_point(0.1, 0.9, 0.85, 0.95, 0.02), _point(0.3, 0.93, 0.9, 0.96, 0.12)]},
        "random": {"kind": "baseline", "adapters_of": "hero-10",
                   "points": [_point(0.2, 2.0, 1.9, 2.1, 0.2), _point(0.4, 3.0, 2.9, 3.1, 0.4)]}}}
    rows = measured.baseline_rows(frontier, "hero-10")
    assert [r["reference"] for r in rows] == ["static", "oracle"]  # random never reaches 10 %: no equal compute
    assert rows[0]["reference_perplexity_ratio"] == pytest.approx(np.exp((np.log(1.2) + np.log(1.4)) / 2))
    assert rows[0]["router_perplexity_ratio"] == 1.0 and rows[0]["param_skip"] == 0.1
    words = measured.baseline_words({"baselines": rows})
    assert "static pruning: ahead on d" in words and "oracle (not deployable): behind on d" in words
    assert "random" not in words
    assert measured.baseline_rows(frontier, "hero-99") == []
    assert measured.baseline_words({}).startswith("No measurement of the routers against fixed baselines")

    curves = measured.frontier_curves(frontier, "hero-10")
    assert list(curves) == ["hero-10", "local-10", "static", "random", "oracle"]
    assert curves["hero-10"]["d"] == [[0.05, 0.99, 0.98, 1.0], [0.1, 1.0, 0.98, 1.02]]
    fig = frontier_chart(curves, ["d"], mark={"d": 0.1})
    names = [t.name for t in fig.data]
    assert names == ["hero-10", "local-10", "static pruning", "random skipping", "oracle (not deployable)"]
    assert list(fig.data[0].x) == [5.0, 10.0] and fig.layout.yaxis.type == "log"
    assert tuple(fig.layout.xaxis.range) == (0, 20.0)  # opens around the comparison: up to 2x the router's skip
    low, high = fig.layout.yaxis.range  # log10 units, from the points in view only (random's 3.0 at 40 % is not)
    assert 10 ** low < 0.9 and 2.0 < 10 ** high < 2.5
    two = frontier_chart(curves, ["d", "d"], mark={"d": 0.1})
    assert two.layout.yaxis2.type == "log" and two.layout.yaxis2.range == two.layout.yaxis.range  # every panel
    far = frontier_chart({"static": {"d": [[0.05, 1.2, 1.1, 1.3], [0.1, 50.0, 40.0, 60.0]]}}, ["d"], mark={"d": 0.1})
    assert 10 ** far.layout.yaxis.range[1] < 5  # a ratio of 50 in view does not flatten the comparison


def test_routers_past_the_palette_differ_in_line_style():
    """Eight routers on one frontier: the eighth shares the first one's colour, so its line style must differ."""
    from hero_core.viz.frontier_figure import frontier_chart
    from hero_core.viz.palette import RUN_COLOURS

    curves = {f"hero-{k}": {"d": [[0.01 * k, 1.0 + k / 10, 1.0, 2.0]]} for k in range(len(RUN_COLOURS) + 1)}
    styles = [(t.line.color, t.line.dash) for t in frontier_chart(curves, ["d"]).data]
    assert styles[0][0] == styles[-1][0]  # the colour came back ...
    assert len(set(styles)) == len(styles)  # ... and no two routers are drawn alike
