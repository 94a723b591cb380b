"""Issue 23 in the app, headless on the tiny model: pages that work at their defaults and say what their data show,
and links that hold every view's state (a long prompt by id, or a plain word that they cannot)."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

APP = Path(__file__).resolve().parents[1] / "app"
sys.path.insert(0, str(APP))

from apptest_helpers import assert_clean, cache_with_embedded_model, charts, opener, starter  # noqa: E402
from components.widgets import EXAMPLES, QUESTION_EXAMPLE  # noqa: E402

from hero_core.data import prompt_store  # noqa: E402

TIMEOUT = 300
DEFAULT_PROMPT = EXAMPLES["reasoning"]
LONG_PROMPT = " ".join(f"Sentence {i} of a pasted report, which is far too long for an address bar." for i in range(40))


@pytest.fixture
def app(monkeypatch, tmp_path):
    # the prompt store of this test only
    monkeypatch.setenv("HERO_LENS_CACHE", str(cache_with_embedded_model(tmp_path)))
    return starter(monkeypatch, TIMEOUT)


@pytest.fixture
def open_page(monkeypatch, tmp_path):
    monkeypatch.setenv("HERO_LENS_CACHE", str(cache_with_embedded_model(tmp_path)))
    return opener(monkeypatch, TIMEOUT)


def param(at, key: str):
    value = at.query_params.get(key)
    return value[0] if isinstance(value, list) and len(value) == 1 else value


# -- links ---------------------------------------------------------------------------------------------------
def test_a_long_prompt_travels_by_id_not_the_previous_prompt(app, open_page):
    """A 2,500-character prompt left the previous prompt in the address bar, so the link reopened that one."""
    assert len(LONG_PROMPT) > 2000
    at = app("explorer", prompt="A short earlier prompt.")
    assert param(at, "prompt") == "A short earlier prompt."
    at.text_area(key="explorer_prompt").input(LONG_PROMPT).run()
    assert_clean(at)
    assert "prompt" not in at.query_params  # the earlier prompt is gone from the link
    key = param(at, "prompt_id")
    assert key == prompt_store.prompt_id(LONG_PROMPT) and prompt_store.load(key) == LONG_PROMPT
    assert any("too long for the address bar" in c.value and key in c.value for c in at.caption)
    # the link, opened in a fresh session, holds the long prompt
    fresh = open_page("explorer", prompt_id=key)
    assert_clean(fresh)
    assert fresh.text_area(key="explorer_prompt").value == LONG_PROMPT


def test_a_link_to_a_prompt_this_machine_lacks_says_so(open_page):
    at = open_page("explorer", prompt_id="0123456789abcdef")
    assert not at.exception and not at.error
    warnings = " ".join(w.value for w in at.warning)
    assert "not in this machine's prompt store" in warnings and "0123456789abcdef" in warnings
    assert at.text_area(key="explorer_prompt").value == DEFAULT_PROMPT  # the example, said as such


def test_a_prompt_store_that_cannot_be_written_is_said(app, monkeypatch):
    import components.link_prompt as link_prompt

    def refuse(text, directory=None):
        raise OSError("read-only")

    monkeypatch.setattr(link_prompt.prompt_store, "save", refuse)
    at = app("explorer")
    at.text_area(key="explorer_prompt").input(LONG_PROMPT).run()
    assert_clean(at)
    assert "prompt" not in at.query_params and "prompt_id" not in at.query_params
    assert any("a copied link will not hold it" in c.value for c in at.caption)


@pytest.mark.parametrize("page, query, widget, expected", [
    ("compare", {"compare_preset": "Precision"}, ("radio", "compare_preset"), "precision"),
    ("compare", {"compare_match": "false"}, ("toggle", "compare_match"), False),
    ("memory", {"memory_mode": "ratio to uniform"}, ("radio", "memory_mode"), "ratio"),
    ("why", {"why_method": "integrated gradients", "why_baseline": "zeros"}, ("radio", "why_method"),
     "integrated_gradients"),
    ("generate", {"generate_max_new": "12", "generate_decoding": "sampled", "generate_seed": "7",
                  "generate_chat": "false", "generate_dense": "false"}, ("slider", "generate_max_new"), 12),
    ("learn", {"learn_tau": "0.7"}, ("slider", "learn_tau"), 0.7),
])
def test_every_page_control_comes_back_from_its_link(open_page, page, query, widget, expected):
    at = open_page(page, **query)
    assert not at.exception, [e.value for e in at.exception]
    kind, key = widget
    assert getattr(at, kind)(key=key).value == pytest.approx(expected) if isinstance(expected, float) else \
        getattr(at, kind)(key=key).value == expected
    if page == "generate":
        assert at.radio(key="generate_decoding").value == "sampled" and at.number_input(key="generate_seed").value == 7
        assert at.toggle(key="generate_chat").value is False and at.toggle(key="generate_dense").value is False
    if page == "why":
        assert at.selectbox(key="why_baseline").value == "zeros"


def test_the_shared_chat_toggle_is_in_the_link(app, open_page):
    at = app("explorer")
    at.toggle(key="explorer_chat").set_value(True).run()
    assert_clean(at)
    assert param(at, "chat") == "1"
    fresh = open_page("memory", chat="1")
    assert fresh.toggle(key="memory_chat").value is True


# -- Generate ------------------------------------------------------------------------------------------------
def test_generate_answers_inside_the_chat_template_and_measures_the_answer(app, tiny):
    from hero_core.analysis.spans import answer_and_prompt

    at = app("generate")
    assert at.toggle(key="generate_chat").value is True  # this backbone has a chat template
    at.slider(key="generate_max_new").set_value(10)
    at.button(key="generate_go").click().run()
    assert_clean(at)
    _, expected = tiny.generate(QUESTION_EXAMPLE, max_new_tokens=10, chat_template=True)
    expected.quality = tiny.score_tokens(expected.token_ids, "hero", tau=expected.tau)
    answer, prompt = answer_and_prompt(expected)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Param skip (paper)"] == f"{answer.param_skip:.1%}"
    assert metrics["Answer tokens"] == str(answer.n_tokens)
    assert answer.n_tokens == expected.n_tokens - expected.n_prompt_tokens
    table = at.dataframe[0].value
    assert table["span"].tolist() == ["answer (generated)", "prompt (chat template included)", "all tokens"]
    assert table["tokens"].tolist() == [answer.n_tokens, prompt.n_tokens, expected.n_tokens]
    assert table["param skip"][1] == f"{prompt.param_skip:.1%}"  # the prompt's figures beside the answer's


def test_generate_says_plainly_when_nothing_was_generated(app, monkeypatch):
    """Both models ending the turn at once printed "Routed and dense agree on all 0 generated tokens"."""
    import components.generation as generation

    real = generation.generate

    def ends_at_once(hero, prompt, **kwargs):
        result = real(hero, prompt, **{**kwargs, "max_new_tokens": 1})
        result["pieces"], result["special"] = ["⟦im_end⟧"], [True]
        return result

    monkeypatch.setattr(generation, "generate", ends_at_once)
    at = app("generate")
    at.toggle(key="generate_chat").set_value(False)
    at.button(key="generate_go").click().run()
    assert_clean(at)
    messages = [m.value for m in (*at.warning, *at.success, *at.info)]
    assert not any("agree on all 0" in m for m in messages), messages
    assert any(m.startswith("Nothing was generated: both models ended at once") for m in messages), messages
    assert any("No generated token went through the model" in m for m in messages)
    assert any("Switch **Chat template** on" in m.value for m in at.markdown)


def test_agreement_sentences():
    from components.generation import agreement

    def result(*pieces, special=()):
        return {"pieces": list(pieces), "special": [p in special for p in pieces]}

    end = "⟦im_end⟧"
    assert agreement(result(end, special={end}), result(end, special={end}))[0] == "empty"
    assert agreement(result("Paris", ".", end, special={end}), result("Paris", ".", end, special={end})) == \
        ("same", "Routed and dense wrote the same 2 tokens.")
    kind, text = agreement(result("Paris", end, special={end}), result("Paris", ".", special={end}))
    assert kind == "differ" and "first 1 tokens; then routed stopped and dense wrote 1 more" in text
    assert "part at generated token 2" in agreement(result("A", "b"), result("A", "c"))[1]


# -- Compare -------------------------------------------------------------------------------------------------
def test_compare_states_the_held_out_verdict_and_formats_its_numbers(app, monkeypatch):
    """One prompt's metrics point different ways: the page puts the held-out verdict at matched compute with its
    interval beside them (here: the trained counterpart of the no_history ablation), and shows 10.2 %, not
    10.1618."""
    import components.verdict as verdict

    from hero_core.eval.frontier import measured

    monkeypatch.setattr(verdict, "pairs_for", lambda *a: [verdict.Pair("hero-10", "local-10", "no_history")])
    at = app("compare")
    assert_clean(at)
    text = " ".join(m.value for m in at.markdown)
    rows = measured.matched_between(measured.load(), "hero-10", "local-10")
    assert rows and measured.matched_words(rows) in text
    assert any(c.value == measured.matched_method(measured.load()) for c in at.caption)
    assert any("inference-time ablation of hero-10" in c.value and "local-10" in c.value for c in at.caption)
    frame = next(d.value for d in at.dataframe if "verdict" in d.value.columns)
    first = rows[0]
    assert frame["hero-10 ppl ratio [95 % CI]"][0] == (f"{first['reference_perplexity_ratio']:.3f} "
                                                        f"[{first['reference_ratio_low']:.3f}, "
                                                        f"{first['reference_ratio_high']:.3f}]")
    runs = next(d for d in at.dataframe if "what it is" in d.value.columns)
    config = json.loads(runs.proto.columns)
    assert config["param skip %"]["type_config"]["format"] == "%.1f %%"
    assert config["τ"]["type_config"]["format"] == "%.3f"


def test_compare_warns_when_the_trained_control_is_not_a_fair_one(app, monkeypatch):
    """A trained control whose own training degraded or was unsteady (twins.UNSTEADY_CONTROLS) keeps its row, with the
    warning, once."""
    import components.verdict as verdict

    from hero_core.eval.twins import bundled_control_caveat

    monkeypatch.setattr(verdict, "pairs_for",
                        lambda *a: [verdict.Pair("hero-10-r4", "no_memread-10-r4", "no_memread"),
                                    verdict.Pair("hero-10-r4", "local-10", "no_history")])
    at = app("compare")
    assert_clean(at)
    assert [w.value for w in at.warning if "control" in w.value] == [bundled_control_caveat("no_memread-10-r4")]


def test_verdict_pairs_for_runs():
    from components.verdict import Pair, pairs_for, run_kind

    # trained checkpoints of one budget: compared directly
    assert pairs_for(["hero-10", "local-10"], ["hero", "no_history"], ["hero", "no_history"]) == \
        [Pair("hero-10", "local-10")]
    # inference-time ablations of hero-10: through the checkpoints trained without that part
    assert pairs_for(["hero-10"] * 3, ["hero", "no_history", "no_memread"], ["hero"] * 3) == \
        [Pair("hero-10", "local-10", "no_history"), Pair("hero-10", "no_memread-10", "no_memread")]
    assert pairs_for(["tiny-random"] * 2, ["hero", "no_history"], ["hero"] * 2) == []
    # a later recipe's checkpoint: its local twin is the first recipe's local-10, its ablation twin shares its tags
    assert pairs_for(["hero-10-r4", "local-10", "hero-25"], ["hero", "no_history", "hero"],
                     ["hero", "no_history", "hero"]) == [Pair("hero-10-r4", "local-10")]
    assert pairs_for(["hero-10-r4"] * 2, ["hero", "no_memread"], ["hero"] * 2) == \
        [Pair("hero-10-r4", "no_memread-10-r4", "no_memread")]
    assert run_kind("hero-10", "hero", "no_history") == \
        "inference-time ablation: hero-10 (trained as hero) run as no_history"
    assert run_kind("local-10", "no_history", "no_history") == \
        "trained router: local-10 as trained (local router, no history)"


# -- Why, Explorer, Data set, Learn ----------------------------------------------------------------------------
def test_explorer_shows_the_first_tokens_share_and_a_net_loss(app, tiny, monkeypatch):
    from hero_core.analysis.spans import first_token_lift

    at = app("explorer")
    trace = tiny.trace(DEFAULT_PROMPT)
    without, share = first_token_lift(trace)
    assert any(c.value.startswith(f"{without:.1%} without token 0") for c in at.caption)
    net = trace.summary()["flop_share_saved"]
    warned = any("Routing costs more than dense" in w.value for w in at.warning)
    assert warned == (net <= 0)


def test_explorer_shows_skip_by_absolute_position_on_a_long_prompt(app, tiny):
    """A long prompt's routing fades past the trained 128-token span and token 0 skips most FFNs: the page shows the
    skip of each absolute-position bin beside its skip figures, and says what the bins show."""
    from hero_core.viz.prompt_positions import position_table, position_words

    at = app("explorer", prompt=LONG_PROMPT)
    assert_clean(at)
    trace = tiny.trace(LONG_PROMPT, max_tokens=512)
    assert trace.n_tokens > 128
    chart = next(c for t, c in charts(at).items() if t.startswith("Skip by absolute position"))
    table = position_table(trace)
    assert list(chart["data"][0]["x"]) == list(table.label)
    np.testing.assert_allclose(np.asarray(chart["data"][0]["y"], dtype=float), table.ffn_skipped_per_token)
    assert position_words(table, trace.n_routed) in " ".join(m.value for m in at.markdown)


def test_learn_says_when_token_0_lifts_its_skip_figure(app, tiny, monkeypatch):
    """Learn's first lesson gives the text's param skip "for a typical token"; where token 0 carries a large share of
    the skipping (on SmolLM2 it skips ~24 of 30 FFNs), it says so, from the same trace."""
    import hero_core.analysis.spans as spans

    monkeypatch.setattr(spans, "FIRST_TOKEN_NOTE_SHARE", 0.0)  # the tiny model's token 0 is no sink: always say it
    at = app("learn")
    assert_clean(at)
    base = tiny.trace("The cat sat on the mat. Then the cat saw a bird, and the bird flew away.", max_tokens=96)
    assert spans.first_token_words(base) in [m.value for m in at.markdown]


def test_learn_draws_quality_beside_compute_and_says_what_its_curve_does(app, tiny):
    from hero_core.viz.tau_words import tau_sweep_words

    at = app("learn")
    assert_clean(at)
    sweep = next(s for t, s in charts(at).items() if t.startswith("Compute and quality as the threshold moves"))
    ffn = [float(v) for v in sweep["data"][0]["y"]]
    ratio = [float(v) for v in sweep["data"][1]["y"]]
    taus = [round(t, 2) for t in np.linspace(0.1, 0.9, 9)]
    assert tau_sweep_words(taus, ffn, 4, ratio) in " ".join(m.value for m in at.markdown)
    assert not any("A higher τ skips more;" in m.value for m in at.markdown)


def test_data_set_tables_have_human_headers_and_percentages(app):
    at = app("dataset")
    at.number_input(key="dataset_n").set_value(2)
    at.toggle(key="dataset_match").set_value(False).run()
    at.button(key="dataset_run").click().run()
    assert_clean(at)
    table = next(d for d in at.dataframe if "ratio_low" in d.value.columns and "item" not in d.value.columns)
    config = json.loads(table.proto.columns)
    assert config["param_skip"]["label"] == "param skip" and config["param_skip"]["type_config"]["format"] == "percent"
    assert config["ratio_low"]["label"] == "95 % CI low"
    chips = [m for m in at.metric if m.proto.delta.startswith("ppl ratio")]
    assert chips and all(m.proto.direction == m.proto.NONE for m in chips)  # no stray "↑" on a chip of text
    assert any("without each item's first token" in c.value and "95 % CI [" in c.value for c in at.caption)


def test_the_data_set_settings_come_back_from_a_link(open_page):
    """The run settings are written by hand, not bound: a bound parameter made Open → (st.switch_page) fail."""
    at = open_page("dataset", set="reasoning", n="2", runs="no_history", max_tokens="64", set_chat="1",
                   match="0")
    assert_clean(at)
    assert at.multiselect(key="dataset_variants").value == ["no_history"]
    assert at.number_input(key="dataset_max_tokens").value == 64
    assert at.toggle(key="dataset_chat").value is True and at.toggle(key="dataset_match").value is False
    assert param(at, "runs") == "no_history" and param(at, "max_tokens") == "64" and param(at, "set_chat") == "1"
    at.number_input(key="dataset_max_tokens").set_value(256).run()  # back to its default: out of the link
    assert "max_tokens" not in at.query_params


@pytest.mark.parametrize("page, query, said", [
    ("explorer", {"token": "-5", "block": "2"}, "token must be a whole number from 0, got '-5'"),
    ("explorer", {"token": "abc", "block": "2"}, "token must be a whole number from 0, got 'abc'"),
    ("explorer", {"token": "-5", "block": "999"}, "block 999 is dropped: a selected cell needs both"),
    ("explorer", {"block": "3"}, "block 3 is dropped: a selected cell needs both"),
    ("memory", {"memory_mode": "zzz"}, "unknown memory_mode 'zzz'"),
    ("compare", {"compare_preset": "zzz"}, "unknown compare_preset 'zzz'"),
    ("compare", {"compare_n_runs": "9"}, "compare_n_runs must be a whole number from 1 to 6, got '9'"),
    ("dataset", {"set": "nope"}, "unknown set 'nope'"),
    ("dataset", {"set": "code", "n": "abc"}, "n must be a whole number from 1 to 500, got 'abc'"),
])
def test_every_bad_link_value_is_reported_like_checkpoint_and_tau(open_page, page, query, said):
    at = open_page(page, **query)
    assert not at.exception, [e.value for e in at.exception]
    warnings = [w.value for w in at.warning if w.value.startswith("The link could not be restored in full")]
    assert any(said in w for w in warnings), [w.value for w in at.warning]


def test_a_link_cell_beyond_the_model_is_clamped_and_said(open_page):
    at = open_page("explorer", token="0", block="999")
    assert not at.exception
    warnings = " ".join(w.value for w in at.warning)
    assert "its cell (token 0, layer 999) is beyond" in warnings
