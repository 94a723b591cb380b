"""The Streamlit app, headless (streamlit.testing AppTest), on the tiny model (HERO_LENS_TINY=1).

Each page is driven through its widgets and its figures are checked against traces computed directly
with hero_core: the chart the user sees must carry the trace's own numbers on the right axes.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from hero_core.viz.figures import CELLS_NAME, SKIPPED_NAME, flip_codes

APP = Path(__file__).resolve().parents[1] / "app"
MAIN = str(APP / "main.py")
sys.path.insert(0, str(APP))  # the app's own helpers (components.*) for the pure-function tests

from apptest_helpers import assert_clean, charts, starter  # noqa: E402
from components.exports import safe_filename, slug, trace_csv, trace_json  # noqa: E402
from components.widgets import EXAMPLES, QUESTION_EXAMPLE, cell_from_selection  # noqa: E402

TIMEOUT = 180
DEFAULT_PROMPT = EXAMPLES["reasoning"]
GENERATE_PROMPT = QUESTION_EXAMPLE  # Generate starts on the default example's question, without its answer


@pytest.fixture
def app(monkeypatch):
    return starter(monkeypatch, TIMEOUT)


def chart(at, prefix: str) -> dict:
    found = [spec for title, spec in charts(at).items() if title.startswith(prefix)]
    assert found, f"no chart titled {prefix!r}; have {list(charts(at))}"
    return found[0]


def values(obj) -> np.ndarray:
    if isinstance(obj, dict) and "bdata" in obj:
        import base64

        data = np.frombuffer(base64.b64decode(obj["bdata"]), dtype=np.dtype(obj["dtype"]))
        shape = obj.get("shape")
        if shape is not None:
            data = data.reshape([int(n) for n in shape.split(",")] if isinstance(shape, str) else shape)
        return data
    return np.asarray(obj)


def cells(spec: dict, index: int = 0) -> dict:
    return [d for d in spec["data"] if d.get("name") == CELLS_NAME][index]


def assert_skip_map_is(spec: dict, trace, index: int = 0) -> None:
    c = cells(spec, index)
    R, T = trace.n_routed, trace.n_tokens
    if c.get("type") == "heatmap":  # a map only looked at (Compare's stacked maps): one image of g
        np.testing.assert_array_equal(values(c["x"]), np.arange(T))
        np.testing.assert_array_equal(values(c["y"]), np.arange(1, R + 1))
        np.testing.assert_allclose(np.asarray(values(c["z"]), dtype=float).reshape(R, T), trace.gate, rtol=1e-6,
                                   atol=1e-7)
    else:  # a clickable map: one marker per cell
        np.testing.assert_array_equal(values(c["x"]), np.tile(np.arange(T), R))
        np.testing.assert_array_equal(values(c["y"]), np.repeat(np.arange(1, R + 1), T))
        np.testing.assert_allclose(values(c["marker"]["color"]), trace.gate.reshape(-1), rtol=1e-6, atol=1e-7)
    crosses = [d for d in spec["data"] if d.get("name") == SKIPPED_NAME][index]
    blocks, tokens = np.nonzero(~trace.executed)
    np.testing.assert_array_equal(values(crosses["x"]), tokens)
    np.testing.assert_array_equal(values(crosses["y"]), blocks + 1)


# -- explorer -------------------------------------------------------------------------------------------
def test_opens_on_explorer_with_figures_of_the_trace(app, tiny):
    at = app()
    assert at.text_area(key="explorer_prompt").value == DEFAULT_PROMPT
    expected = tiny.trace(DEFAULT_PROMPT, max_tokens=512)
    spec = chart(at, "Skip map · hero · τ = 0.5")
    assert_skip_map_is(spec, expected)
    assert len(spec["layout"]["xaxis"]["tickvals"]) <= expected.n_tokens
    assert spec["layout"]["yaxis"]["ticktext"] == [f"L{layer}" for layer in expected.routed_layers]
    counts = chart(at, "FFNs executed per token")["data"][0]
    np.testing.assert_array_equal(values(counts["y"]), expected.executed_per_token())
    layers = chart(at, "Skip rate per routed layer")["data"][0]
    np.testing.assert_allclose(values(layers["y"]), expected.layer_skip_rates())
    metrics = {m.label: m.value for m in at.metric}
    summary = expected.summary()
    assert metrics["Param skip (paper)"] == f"{summary['param_skip']:.1%}"
    assert metrics["FLOPs saved, net"] == f"{summary['flop_share_saved']:.1%}"
    assert metrics["Tokens"] == str(expected.n_tokens)
    html = at.get("html")[0].proto.body
    assert html.count('class="hero-token"') == expected.n_tokens
    assert [d.label for d in at.get("download_button")][:2] == ["Trace (JSON)", "Tidy table (CSV)"]


def test_prompt_from_url_and_examples(app, tiny):
    at = app(prompt="Hello from the address bar")
    assert at.text_area(key="explorer_prompt").value == "Hello from the address bar"
    expected = tiny.trace("Hello from the address bar")
    assert_skip_map_is(chart(at, "Skip map"), expected)
    at.selectbox(key="explorer_example").select("code").run()
    assert at.text_area(key="explorer_prompt").value == EXAMPLES["code"]
    assert_skip_map_is(chart(at, "Skip map"), tiny.trace(EXAMPLES["code"]))


def test_sidebar_variant_and_tau_rerun_the_trace(app, tiny):
    at = app()
    at.selectbox(key="sb_variant").select("no_history")
    at.slider(key="sb_tau").set_value(0.3).run()
    assert_clean(at)
    expected = tiny.trace(DEFAULT_PROMPT, variant="no_history", tau=0.3)
    assert_skip_map_is(chart(at, "Skip map · no_history · τ = 0.3"), expected)
    assert np.all(expected.history_logit == 0)


def test_chat_template_changes_tokens(app, tiny):
    at = app()
    at.toggle(key="explorer_chat").set_value(True).run()
    assert_clean(at)
    expected = tiny.trace(DEFAULT_PROMPT, chat_template=True)
    assert_skip_map_is(chart(at, "Skip map"), expected)
    assert expected.n_tokens > tiny.trace(DEFAULT_PROMPT).n_tokens


@pytest.mark.parametrize("prompt, message", [("", "empty"), ("   \n\t ", "empty")])
def test_empty_prompt_is_an_error_message(app, prompt, message):
    at = app()
    at.text_area(key="explorer_prompt").input(prompt).run()
    assert not at.exception
    assert any(message in e.value for e in at.error)
    assert not at.get("plotly_chart")


def test_huge_prompt_is_truncated_with_a_notice(app):
    at = app()
    at.number_input(key="sb_max_tokens").set_value(64)
    at.text_area(key="explorer_prompt").input("word " * 20_000).run()
    assert_clean(at)
    assert any("truncated to its first 64 tokens" in w.value for w in at.warning)
    spec = chart(at, "Skip map")
    assert len(values(cells(spec)["x"])) == 64 * 4


@pytest.mark.parametrize("prompt", ["naïve café — 東京 🚀 مرحبا", "<script>alert(1)</script> & \"", "a\x00b\x1b[31m",
                                    "e\u0301\u200b\u202e reversed \ufeff", "\n\n\n"])
def test_odd_characters_route_cleanly(app, prompt):
    at = app()
    at.text_area(key="explorer_prompt").input(prompt).run()
    assert not at.exception
    if prompt.strip():
        assert_clean(at)
        assert chart(at, "Skip map")
        html = at.get("html")[0].proto.body
        assert "<script>" not in html
    else:
        assert any("empty" in e.value for e in at.error)


def test_wrong_backbone_path_is_an_error_message(monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.delenv("HERO_LENS_TINY", raising=False)
    monkeypatch.setenv("HERO_LENS_THREADS", str(torch.get_num_threads()))  # keep this process's setting
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    at.session_state["sb_backbone_kind"] = "local directory"
    at.session_state["sb_backbone_path"] = "/no/such/model/dir"
    at.run()
    assert not at.exception
    assert any("does not exist" in e.value for e in at.error)
    at.session_state["sb_backbone_path"] = str(APP)  # a directory, but not a model
    at.run()
    assert any("no config.json" in e.value for e in at.error)


def test_unavailable_device_is_an_error_message(app):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    at = app()
    at.selectbox(key="sb_device").select("cuda").run()
    assert not at.exception
    assert any("no CUDA GPU" in e.value for e in at.error)
    at.selectbox(key="sb_device").select("cpu").run()
    assert_clean(at)
    assert chart(at, "Skip map")


def test_bad_thread_setting_is_an_error_message(monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("HERO_LENS_TINY", "1")
    monkeypatch.setenv("HERO_LENS_THREADS", "zero")
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT).run()
    assert not at.exception
    assert any("HERO_LENS_THREADS must be a positive integer" in e.value for e in at.error)


def picker(at, name: str):
    """The cell picker of a page ("why_token", "memory_block", ...): its key also names the trace it belongs to."""
    found = [s for s in at.selectbox if s.key and s.key.startswith(name + "_")]
    assert len(found) == 1, f"expected one {name} picker, found {[s.key for s in at.selectbox]}"
    return found[0]


def test_pickers_survive_a_changed_prompt(app):
    """A second, different prompt must not crash the pickers (they once parsed the label '76: .' as an int)."""
    for page in ("memory", "why"):
        at = app(page)
        picker(at, f"{page}_token").select(7).run()
        assert_clean(at)
        at.text_area(key=f"{page}_prompt").input("A much shorter prompt.").run()
        assert_clean(at)
        token = picker(at, f"{page}_token")
        assert 0 <= token.value < len(token.options)
        token.select(len(token.options) - 1).run()
        assert_clean(at)


# -- memory -----------------------------------------------------------------------------------------------
def test_memory_view_for_a_chosen_token(app, tiny):
    at = app("memory")
    picker(at, "memory_token").select(5).run()
    assert_clean(at)
    expected = tiny.trace(DEFAULT_PROMPT)
    R = expected.n_routed
    lower = np.tril_indices(R, -1)
    z = values(chart(at, "Memory attention of token 5")["data"][0]["z"]).astype(float)
    np.testing.assert_allclose(z[lower], expected.memory_attention[5][lower], rtol=1e-6)
    mean = values(chart(at, "Memory attention, mean")["data"][0]["z"]).astype(float)
    np.testing.assert_allclose(mean[lower], expected.mean_memory_attention()[lower], rtol=1e-6)
    lines = chart(at, "Router trajectories of token 5")["data"]
    for line, field in zip(lines, ("gate", "history_logit", "local_logit", "p_hist", "m_hist", "nu"), strict=True):
        np.testing.assert_allclose(values(line["y"]), getattr(expected, field)[:, 5], rtol=1e-6, atol=1e-9)
    rho = chart(at, "Forgetting factor")["data"][0]
    np.testing.assert_allclose(values(rho["y"]), expected.forgetting)


def test_memory_view_says_what_the_reads_show(app, tiny):
    """The entropy against uniform as numbers, the verdict in words, and how far rho moved from its initial value."""
    from hero_core.viz.memory_figures import COLOUR_FLOOR
    from hero_core.viz.memory_words import describe_forgetting, summarise

    at = app("memory")
    picker(at, "memory_token").select(5).run()
    assert_clean(at)
    expected = tiny.trace(DEFAULT_PROMPT)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["This token: read entropy"] == f"{summarise(expected, 5).mean_entropy:.3f}"
    assert metrics["Whole prompt: read entropy"] == f"{summarise(expected).mean_entropy:.3f}"
    text = " ".join(m.value for m in at.markdown)
    assert "close to uniform" in text and "little information about which depth" in text  # a fresh router's reads
    assert describe_forgetting(expected.forgetting, expected.forgetting_init, expected.routed_layers) in text
    assert "ρ did not move during training" in text and "initial 0.98" in text
    rho = chart(at, "Forgetting factor")["data"]
    assert rho[1]["name"].startswith("initial ρ")
    # a contrast states its colour floor and keeps it
    at.radio(key="memory_mode").set_value("difference").run()
    assert_clean(at)
    assert any("Colour floor" in c.value for c in at.caption)
    heat = chart(at, "Memory attention of token 5")["data"][0]
    assert heat["zmax"] >= COLOUR_FLOOR["difference"] and heat["zmin"] <= -COLOUR_FLOOR["difference"]


def test_memory_view_explains_variants_without_memory(app):
    at = app("memory")
    at.selectbox(key="sb_variant").select("no_memread").run()
    assert_clean(at)
    assert any("does not read a depth memory" in i.value for i in at.info)


def test_selected_cell_is_shared_across_pages(app):
    at = app()
    at.session_state["shared_cell"] = {"token": 3, "block": 2}
    at.switch_page("views/why.py").run()
    assert_clean(at)
    assert picker(at, "why_token").value == 3
    assert picker(at, "why_block").value == 2
    at.switch_page("views/memory.py").run()
    assert picker(at, "memory_token").value == 3


def test_clicked_point_to_cell():
    event = {"selection": {"points": [{"x": 4.0, "y": 3, "curve_number": 0}], "point_indices": [0]}}
    assert cell_from_selection(event, n_tokens=10, n_blocks=4) == (4, 2)
    assert cell_from_selection(event, n_tokens=3, n_blocks=4) is None  # stale click outside this trace
    assert cell_from_selection({"selection": {"points": []}}, 10, 4) is None
    assert cell_from_selection(None, 10, 4) is None
    legend_then_cell = {"selection": {"points": [{"x": None, "y": None}, {"x": 1, "y": 1}]}}
    assert cell_from_selection(legend_then_cell, 10, 4) == (1, 0)


# -- compare ----------------------------------------------------------------------------------------------
def test_compare_matches_compute_by_default(app, tiny):
    at = app("compare")
    assert_clean(at)
    assert at.toggle(key="compare_match").value is True
    reference = tiny.trace(DEFAULT_PROMPT, variant="hero")
    table = at.dataframe[0].value
    for variant, tau, skip in zip(table["variant"], table["τ"], table["param skip %"], strict=True):
        expected = tiny.trace(DEFAULT_PROMPT, variant=variant, param_skip=reference.param_skip) \
            if variant != "hero" else reference
        # the page's search runs beside the others (other threads, other batch rows): it may stop a hair apart
        assert tau == pytest.approx(round(expected.tau, 4), abs=2e-3)
        assert skip == pytest.approx(round(100 * expected.param_skip, 4))
    shared = tiny.trace(DEFAULT_PROMPT, variant="no_history")  # at the shared tau the gap is larger or equal
    matched_gap = abs(table["param skip %"][1] - 100 * reference.param_skip)
    assert matched_gap <= abs(100 * shared.param_skip - 100 * reference.param_skip) + 1e-6


def test_compare_variants(app, tiny):
    at = app("compare")
    at.toggle(key="compare_match").set_value(False).run()
    variants = ["hero", "no_history", "no_memread"]
    assert at.multiselect(key="compare_variants").value == variants
    expected = [tiny.trace(DEFAULT_PROMPT, variant=v) for v in variants]
    maps = chart(at, "Skip maps (synchronised axes)")
    for i, trace in enumerate(expected):
        assert_skip_map_is(maps, trace, index=i)
    assert maps["layout"]["xaxis"].get("matches") or maps["layout"]["xaxis2"].get("matches")
    flips = chart(at, "Decision flips hero (as trained) vs no_history (ablation)")
    np.testing.assert_array_equal(values(flips["data"][0]["z"]), flip_codes(expected[0], expected[1]))
    divergence = chart(at, "Per-layer divergence")["data"]
    np.testing.assert_allclose(values(divergence[0]["y"]),
                               (expected[1].executed != expected[0].executed).mean(axis=1))
    table = at.dataframe[0].value
    assert table["variant"].tolist() == variants
    # the labels say which run is the router as trained and which an inference-time ablation of it
    assert table["run"].tolist() == ["hero (as trained)", "no_history (ablation)", "no_memread (ablation)"]
    assert table["what it is"][1] == "inference-time ablation: tiny-random (trained as hero) run as no_history"
    np.testing.assert_allclose(table["param skip %"], [round(100 * t.param_skip, 4) for t in expected])
    quality = chart(at, "Quality against the dense model")["data"]
    from hero_core.measures.metrics import compare_to_dense

    dense = tiny.logits(DEFAULT_PROMPT, variant="dense")
    q = compare_to_dense(dense, tiny.logits(DEFAULT_PROMPT, variant="no_history"), torch.tensor(expected[1].token_ids))
    no_history = [d for d in quality if d.get("name") == "no_history (ablation)"]  # nll, kl, top-1 marks
    np.testing.assert_allclose(values(no_history[0]["y"]), q["nll"], rtol=1e-5)
    np.testing.assert_allclose(values(no_history[1]["y"]), q["kl"], rtol=1e-4, atol=1e-7)
    np.testing.assert_array_equal(values(no_history[2]["x"]), np.flatnonzero(~np.asarray(q["top1_agree"])))
    assert table["top-1 agreement %"][1] == pytest.approx(100 * q["top1_agreement"], abs=1e-3)


def test_compare_precision_full_vs_bf16_vs_nf4(app):
    pytest.importorskip("bitsandbytes")
    at = app("compare")
    at.radio(key="compare_preset").set_value("precision").run()
    assert_clean(at)
    table = at.dataframe[0].value
    assert table["run"].tolist() == ["hero · full", "hero · bf16", "hero · nf4"]
    assert len([d for d in chart(at, "Skip maps")["data"] if d.get("name") == CELLS_NAME]) == 3


def test_compare_checkpoints_in_test_mode_explains(app):
    at = app("compare")
    at.radio(key="compare_preset").set_value("checkpoints").run()
    assert not at.exception
    assert any("comparing checkpoints needs the real backbone" in i.value for i in at.info)


def test_default_checkpoint_pair(monkeypatch):
    import components.compare as compare

    monkeypatch.setattr(compare, "bundled_names", lambda: ["hero-25", "hero-40", "local-25", "local-40"])
    assert compare.default_checkpoints() == ["hero-25", "local-25"]  # no -10 pair bundled here
    monkeypatch.setattr(compare, "bundled_names", lambda: ["hero-40", "local-40"])
    assert compare.default_checkpoints() == ["hero-40", "local-40"]
    monkeypatch.setattr(compare, "bundled_names", lambda: ["hero-10", "hero-25", "local-10", "local-25"])
    assert compare.default_checkpoints() == ["hero-10", "local-10"]  # the quality-first pair comes first
    monkeypatch.setattr(compare, "bundled_names", lambda: ["hero-25"])
    assert compare.default_checkpoints() == ["hero-25"]


def test_the_checkpoint_picker_says_how_much_each_was_trained():
    import json

    from components.settings import CUSTOM_CHECKPOINT, DEFAULT_CHOICE, checkpoint_label

    from hero_core.method.checkpoint import CONFIG_FILE, resolve

    tokens = json.loads((resolve("hero-10") / CONFIG_FILE).read_text())["training"]["tokens_seen"]
    assert checkpoint_label("hero-10") == f"trained · hero-10 · {tokens / 1e6:.2f} M tokens"
    assert checkpoint_label("hero-10-s1").startswith("research · hero-10-s1 · ")
    assert checkpoint_label(CUSTOM_CHECKPOINT) == CUSTOM_CHECKPOINT
    assert checkpoint_label(DEFAULT_CHOICE).startswith("default — ")
    assert checkpoint_label("not-a-checkpoint") == "not-a-checkpoint"  # unreadable: the bare name, no error


# -- generate ---------------------------------------------------------------------------------------------
def test_generate_streams_and_traces(app, tiny):
    at = app("generate")
    at.slider(key="generate_max_new").set_value(12)
    at.button(key="generate_go").click().run()
    assert_clean(at)
    _, expected = tiny.generate(GENERATE_PROMPT, max_new_tokens=12, chat_template=True)  # on by default
    routed_html, dense_html = (h.proto.body for h in at.get("html")[:2])
    assert routed_html.count('class="hero-token"') == 12
    assert dense_html.count('class="hero-token"') == 12
    spec = chart(at, "Skip map over prompt + generated tokens")
    assert_skip_map_is(spec, expected)
    assert expected.n_prompt_tokens < expected.n_tokens
    # Each streamed token is shaded by the FFNs run on the token before it (the one that produced it).
    import re

    streamed = [int(v) for v in re.findall(r'data-ffn="(\d+)"', routed_html)]
    produced_by = expected.executed_per_token()[expected.n_prompt_tokens - 1:]
    assert streamed[: len(produced_by)] == produced_by.tolist()
    # quality of the continuation against dense, teacher-forced on the routed tokens, and where the two part
    scored = tiny.score_tokens(expected.token_ids)
    bars = chart(at, "Quality per token")["data"][0]
    np.testing.assert_allclose(values(bars["y"]), scored["kl_to_dense"], rtol=1e-5, atol=1e-9)
    _, dense = tiny.generate(GENERATE_PROMPT, max_new_tokens=12, variant="dense", chat_template=True)
    start = expected.n_prompt_tokens
    routed_new, dense_new = expected.token_ids[start:], dense.token_ids[start:]
    split = next((i for i, (x, y) in enumerate(zip(routed_new, dense_new)) if x != y), None)
    messages = [m.value for m in (*at.info, *at.success)]
    if split is None:
        assert any("wrote the same" in m for m in messages)
    else:
        assert any(f"part at generated token {split + 1}:" in m for m in messages)


def test_special_tokens_are_markers_and_first_difference():
    from components.generation import Stream, first_difference, special_marker

    stream = Stream(render=lambda html: None, max_count=4, special=frozenset({"<|im_end|>"}))
    stream("Hi", 3)
    stream("<|im_end|>", 2)
    assert stream.pieces == ["Hi", "⟦im_end⟧"] and special_marker("<|im_start|>") == "⟦im_start⟧"
    assert first_difference([1, 2, 3], [1, 2, 4]) == 2 and first_difference([1, 2], [1, 2, 3]) is None


def test_generate_with_an_empty_prompt_is_an_error_message(app):
    at = app("generate")
    at.text_area(key="generate_prompt").input("  ")
    at.button(key="generate_go").click().run()
    assert not at.exception
    assert any("empty" in e.value for e in at.error)


def test_generate_sampled_is_seeded(app):
    at = app("generate")
    at.slider(key="generate_max_new").set_value(8)
    at.radio(key="generate_decoding").set_value("sampled").run()
    at.number_input(key="generate_seed").set_value(7)
    at.button(key="generate_go").click().run()
    first = at.get("html")[0].proto.body
    at.button(key="generate_go").click().run()
    assert_clean(at)
    assert at.get("html")[0].proto.body == first


# -- why ----------------------------------------------------------------------------------------------------
def test_why_split_and_attribution(app, tiny):
    from hero_core.analysis.attribution import explain

    at = app("why")
    picker(at, "why_token").select(6)
    picker(at, "why_block").select(2).run()
    assert_clean(at)
    trace = tiny.trace(DEFAULT_PROMPT)
    a, b = trace.history_logit[2, 6], trace.local_logit[2, 6]
    bars = chart(at, "Decision at L2")["data"][0]
    np.testing.assert_allclose(values(bars["x"]), [b, a, a + b], rtol=1e-6)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["local logit b"] == f"{b:+.3f}" and metrics["history logit a"] == f"{a:+.3f}"
    # token ablation is the default: it always gives an exact answer
    assert at.radio(key="why_method").value == "ablation"
    ablation = chart(at, "token ablation: contribution")["data"][0]
    np.testing.assert_allclose(values(ablation["y"]),
                               explain(tiny, DEFAULT_PROMPT, 6, 2, method="ablation").scores, rtol=1e-4, atol=1e-6)
    assert len(values(ablation["y"])) == 7  # tokens 0..6: later tokens cannot matter

    at.radio(key="why_method").set_value("integrated_gradients").run()
    assert_clean(at)
    expected = explain(tiny, DEFAULT_PROMPT, 6, 2, method="integrated_gradients", n_steps=16, baseline="pad")
    attribution = chart(at, "integrated gradients: contribution")["data"][0]
    np.testing.assert_allclose(values(attribution["y"]), expected.scores, rtol=1e-4, atol=1e-6)


def test_why_says_once_when_integrated_gradients_fail(app, tiny):
    """A failed integrated-gradients attribution gets ONE message (the library's notice and the page's warning
    were two near-identical warnings), with a button to token ablation; "auto" falls back to ablation itself."""
    from hero_core.analysis.attribution import explain

    at = app("why")
    token, block = 8, 1
    picker(at, "why_token").select(token)
    picker(at, "why_block").select(block).run()
    failed = explain(tiny, DEFAULT_PROMPT, token, block, method="integrated_gradients", n_steps=16)
    assert not failed.passed  # a hard decision below flips on the path
    at.radio(key="why_method").set_value("integrated_gradients").run()
    assert_clean(at)
    messages = [m.value for m in (*at.warning, *at.info) if "ntegrated gradients" in m.value]
    assert len(messages) == 1 and messages[0].startswith("Integrated gradients failed on this decision"), messages
    at.button(key="why_use_ablation").click().run()
    assert_clean(at)
    assert at.radio(key="why_method").value == "ablation" and chart(at, "token ablation: contribution")
    at.radio(key="why_method").set_value("auto").run()
    assert_clean(at)
    notes = [m.value for m in (*at.warning, *at.info) if "ntegrated gradients" in m.value]
    assert len(notes) == 1 and "did not pass their completeness check" in notes[0], notes
    assert chart(at, "token ablation: contribution")


def test_why_on_dense_explains(app):
    at = app("why")
    at.selectbox(key="sb_variant").select("dense").run()
    assert not at.exception and not at.error
    assert any("dense variant runs no router" in i.value for i in at.info)


# -- learn ----------------------------------------------------------------------------------------------------
def test_learn_tour_is_live(app, tiny):
    at = app("learn")
    prompt = "The cat sat on the mat. Then the cat saw a bird, and the bird flew away."
    base = tiny.trace(prompt, max_tokens=96)
    assert_skip_map_is(chart(at, "Skip map · hero · τ"), base)
    picker(at, "learn_token").select(4)
    at.slider(key="learn_depth").set_value(3).run()
    assert_clean(at)
    z = values(chart(at, "Memory after 3 of 4")["data"][0]["z"]).astype(float)
    assert np.all(np.isnan(z[3:]))
    np.testing.assert_allclose(z[2, :2], base.memory_attention[4, 2, :2], rtol=1e-6)
    sweep = chart(at, "Compute and quality as the threshold moves")
    assert len(values(sweep["data"][0]["y"])) == 9
    # the sweep keeps its provenance: checkpoint, variant, the run at tau now, the text and the precision
    for part in (base.checkpoint, "hero · τ swept 0.1–0.9", "The cat sat on the mat", "full precision"):
        assert part in sweep["layout"]["title"]["text"], part
    at.toggle(key="learn_history").set_value(False).run()
    assert_clean(at)
    # section 4 compares at equal compute: no_history at the tau that realises hero's param skip
    enc = tiny.encode([prompt], max_tokens=96)
    tau = tiny.tau_for_param_skip(enc.input_ids, enc.attention_mask, "no_history", round(base.param_skip, 6))[0]
    local = tiny.trace(prompt, variant="no_history", tau=tau, max_tokens=96)
    assert any("Compared at equal compute" in c.value for c in at.caption)
    assert_skip_map_is(chart(at, "Skip map · no_history"), local)
    flips = chart(at, "Decision flips hero vs no_history")
    np.testing.assert_array_equal(values(flips["data"][0]["z"]), flip_codes(base, local))


def test_learn_says_what_the_memory_does_and_what_was_measured(app, tiny):
    from hero_core.eval.frontier import measured
    from hero_core.viz.memory_words import describe_memory

    at = app("learn")
    base = tiny.trace("The cat sat on the mat. Then the cat saw a bird, and the bird flew away.", max_tokens=96)
    text = " ".join(m.value for m in at.markdown)
    assert describe_memory(base) in text  # the whole text's reads, from the data
    assert "mostly" not in describe_memory(base)
    # the paper's claim and this backbone's measurement side by side, each labelled
    assert "**The paper's claim**" in text and "**Measured on this backbone**" in text
    assert measured.history_words(measured.load()) in text
    assert any("the loaded backbone" in c.value for c in at.caption)  # measured on SmolLM2, not the tiny model
    # the router among the fixed baselines, from the shipped summary: words, the table and the frontier chart
    assert measured.baseline_words(measured.load()) in text and "static pruning: ahead" in text
    table = next(d.value for d in at.dataframe if "static pruning" in d.value.columns)
    assert list(table["domain"]) == ["chat", "code", "reasoning"] and "oracle (not deployable)" in table.columns
    # the frontier was measured on SmolLM2: the tiny model's costs never move it to the net axis
    assert not [r for r in at.radio if r.key == "baselines_axis"]
    # a sidebar variant without a memory does not silently change the lesson
    at.selectbox(key="sb_variant").select("no_history").run()
    assert_clean(at)
    assert any("does not fit this tour" in i.value for i in at.info)
    assert charts(at)  # the tour still runs, as the checkpoint's own variant


def test_learn_leaves_out_the_lessons_a_local_checkpoint_cannot_teach(app, monkeypatch):
    """On a checkpoint trained as no_history the memory and history lessons would teach from untrained parts
    ("turning history off flips 0 of N decisions"): the page says why instead of drawing them."""
    import hero_core.viz.memory_words as words

    plan = words.tour_plan
    monkeypatch.setattr(words, "tour_plan", lambda trained, chosen, checkpoint: plan("no_history", chosen, "local-10"))
    at = app("learn")
    warnings = " ".join(w.value for w in at.warning)
    assert "trained as the local router" in warnings and "flip no decision by construction" in warnings
    titles = list(charts(at))
    assert any(t.startswith("Skip map · no_history") for t in titles)  # the lessons it can teach still run
    assert not any(t.startswith(("Memory after", "Decision flips")) for t in titles)
    assert not any("Turning the history off" in m.value for m in at.markdown)


# -- exports ---------------------------------------------------------------------------------------------------
def test_export_helpers(tiny):
    from hero_core import RoutingTrace

    assert safe_filename("hero-lens", "explorer", "../../etc/passwd", ext="html") == \
        "hero-lens_explorer_etc-passwd.html"
    assert safe_filename("Ünïcödé 東京 ✓", ext="json") == "unicode.json"
    assert safe_filename("", ext="csv") == "hero-lens.csv"
    assert len(safe_filename("x" * 500, ext="html")) <= 101
    assert slug("***") == "x"
    trace = tiny.trace("Export me, please.")
    assert RoutingTrace.from_dict(json.loads(trace_json(trace))).equals(trace)
    csv = trace_csv(trace).splitlines()
    assert len(csv) == 1 + trace.n_tokens * trace.n_routed and csv[0].startswith("token_index,token")


# -- the embedded model -----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_explorer_on_the_embedded_model(monkeypatch):
    """No configuration: the embedded SmolLM2-135M with the default checkpoint; a 128-token prompt."""
    from streamlit.testing.v1 import AppTest

    from hero_core import load_hero

    monkeypatch.delenv("HERO_LENS_TINY", raising=False)
    monkeypatch.setenv("HERO_LENS_THREADS", str(torch.get_num_threads()))  # keep this process's setting
    at = AppTest.from_file(MAIN, default_timeout=600).run()
    assert_clean(at)
    hero = load_hero()
    prompt = " ".join(["The quick brown fox jumps over the lazy dog."] * 13)
    at.text_area(key="explorer_prompt").input(prompt)
    start = time.perf_counter()
    at.run()
    seconds = time.perf_counter() - start
    assert_clean(at)
    expected = hero.trace(prompt, max_tokens=512)
    assert expected.n_routed == 30 and expected.n_tokens >= 128
    assert_skip_map_is(chart(at, "Skip map"), expected)
    print(f"\nembedded explorer, {expected.n_tokens} tokens, warm model: {seconds:.2f} s")


@pytest.mark.slow
def test_compare_and_learn_open_on_what_the_warm_up_computed(monkeypatch):
    """The server's warm-up fills the caches under the keys Compare and Learn ask for at their defaults: the pages
    then run no forward pass, match no tau and sweep nothing."""
    from streamlit.testing.v1 import AppTest

    from hero_core.method.model import HeroModel

    monkeypatch.delenv("HERO_LENS_TINY", raising=False)
    monkeypatch.setenv("HERO_LENS_THREADS", str(torch.get_num_threads()))  # keep this process's setting
    at = AppTest.from_file(MAIN, default_timeout=600).run()
    assert_clean(at)
    from components.warmup import compare_defaults, learn_defaults  # the app's own module, as the pages import it

    compare_defaults(at.session_state["sb_settings"])
    learn_defaults(at.session_state["sb_settings"])
    calls = []
    for name in ("forward", "tau_for_param_skip", "traces_at_taus"):
        real = getattr(HeroModel, name)
        monkeypatch.setattr(HeroModel, name, lambda self, *a, _real=real, _name=name, **k: calls.append(_name)
                            or _real(self, *a, **k))
    at.switch_page("views/compare.py").run()
    assert_clean(at)
    assert "Compute matched to" in " ".join(c.value for c in at.caption)  # the default pair at matched compute
    at.switch_page("views/learn.py").run()
    assert_clean(at)
    assert "Compared at equal compute" in " ".join(c.value for c in at.caption)  # the tour's local twin
    assert calls == []


@pytest.mark.slow
def test_wrong_checkpoint_is_an_error_message(monkeypatch, tmp_path):
    from streamlit.testing.v1 import AppTest

    monkeypatch.delenv("HERO_LENS_TINY", raising=False)
    monkeypatch.setenv("HERO_LENS_THREADS", str(torch.get_num_threads()))  # keep this process's setting
    at = AppTest.from_file(MAIN, default_timeout=600)
    at.session_state["sb_checkpoint"] = "directory…"
    at.session_state["sb_checkpoint_path"] = str(tmp_path)
    at.run()
    assert not at.exception
    assert any("is not a HeRo checkpoint" in e.value for e in at.error)


@pytest.mark.slow
def test_local_model_directory(monkeypatch):
    """A local Hugging Face directory typed into the sidebar (here: the embedded model's safetensors copy)."""
    from streamlit.testing.v1 import AppTest

    from hero_core.backbones.loading import embedded_model_dir

    monkeypatch.delenv("HERO_LENS_TINY", raising=False)
    monkeypatch.setenv("HERO_LENS_THREADS", str(torch.get_num_threads()))  # keep this process's setting
    at = AppTest.from_file(MAIN, default_timeout=600)
    at.session_state["sb_backbone_kind"] = "local directory"
    at.session_state["sb_backbone_path"] = str(embedded_model_dir())
    at.session_state["shared_prompt"] = "A short prompt."
    at.run()
    assert_clean(at)
    spec = chart(at, "Skip map")
    assert spec["layout"]["yaxis"]["ticktext"][-1] == "L29"


def test_glossary_is_in_every_page_sidebar(app):
    for page in ("explorer", "memory", "why"):
        at = app(page)
        assert_clean(at)
        glossary = [e for e in at.sidebar.expander if e.label == "Glossary"]
        assert glossary and any("branch scaling" in m.value for m in glossary[0].markdown)


def test_explorer_shows_quality_beside_the_route(app, tiny):
    at = app("explorer")
    assert_clean(at)
    expected = tiny.trace(DEFAULT_PROMPT, quality=True)
    labels = {m.label: m.value for m in at.metric}
    assert labels["Perplexity ratio"] == f"{expected.quality_summary()['perplexity_ratio']:.3f}"
    bars = chart(at, "Quality per token")["data"][0]
    np.testing.assert_allclose(values(bars["y"]), expected.quality["kl_to_dense"], rtol=1e-5, atol=1e-9)


def test_a_shared_url_restores_the_view(app):
    at = app("explorer", prompt="Share this view.", variant="no_history", tau="0.3", token="2", block="1")
    assert at.selectbox(key="sb_variant").value == "no_history"
    assert at.slider(key="sb_tau").value == pytest.approx(0.3)
    assert at.text_area(key="explorer_prompt").value == "Share this view."
    assert any("Selected:** token 2 " in m.value for m in at.markdown)
    # and the address bar follows the user
    at.selectbox(key="sb_variant").select("hero").run()
    assert at.query_params["variant"] == ["hero"] or at.query_params["variant"] == "hero"
    assert (at.query_params["token"] in (["2"], "2")) and (at.query_params["tau"] in (["0.3"], "0.3"))
    assert "precision" not in at.query_params  # the default precision stays out of the address bar


def test_a_shared_url_sets_the_precision(app):
    at = app("explorer", prompt="Share this view.", precision="bf16")
    assert_clean(at)
    assert at.selectbox(key="sb_precision").value == "bf16"
    assert at.query_params["precision"] in (["bf16"], "bf16")
    at.selectbox(key="sb_precision").select("full").run()
    assert "precision" not in at.query_params


def test_a_bad_url_is_reported_not_applied(monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("HERO_LENS_TINY", "1")
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    at.query_params.update({"variant": "telepathy", "tau": "2", "checkpoint": "nope", "precision": "fp8"})
    at.run()
    assert not at.exception
    warnings = " ".join(w.value for w in at.warning)
    assert "unknown variant 'telepathy'" in warnings and "tau must be" in warnings and "'nope'" in warnings
    assert "unknown precision 'fp8'" in warnings and at.selectbox(key="sb_precision").value == "full"
    assert at.selectbox(key="sb_variant").value == "hero"


@pytest.mark.parametrize("n_runs", [1, 3, 4, 6])
def test_compare_custom_holds_one_to_six_runs_with_every_export(app, n_runs):
    at = app("compare")
    at.radio(key="compare_preset").set_value("custom").run()
    at.number_input(key="compare_n_runs").set_value(n_runs).run()
    assert_clean(at)  # no duplicate widget key among the export buttons (three runs and more raised one)
    table = at.dataframe[0].value
    assert len(table) == n_runs and table["run"].is_unique
    flips = [title for title in charts(at) if title.startswith("Decision flips")]
    assert len(flips) == n_runs - 1
    buttons = [b for b in at.get("download_button")]
    keys = [b.proto.id for b in buttons]
    assert len(keys) == len(set(keys)) and len(buttons) >= 2 + n_runs  # trace, table, one trace per run, figures


def test_compare_select_all_variants(app):
    at = app("compare")
    from hero_core.method.config import INFERENCE_VARIANTS

    at.multiselect(key="compare_variants").set_value(list(INFERENCE_VARIANTS)).run()
    assert_clean(at)
    assert at.dataframe[0].value["variant"].tolist() == list(INFERENCE_VARIANTS)


def test_why_attributes_a_late_decision_on_the_button_only(app, tiny):
    """A decision late in the prompt is attributed on the button (its token ablation is quadratic in the prompt), so
    the exact split shows at once; the button's result equals the library's, and stays for the session."""
    from hero_core.analysis.attribution import explain

    at = app("why")
    token = len(tiny.trace(DEFAULT_PROMPT).tokens) - 1
    picker(at, "why_token").select(token)
    picker(at, "why_block").select(2).run()
    assert_clean(at)
    assert token + 1 > 24  # past AUTO_ATTRIBUTE_TOKENS: nothing attributed yet
    assert chart(at, "Decision at L2") is not None
    assert not [title for title in charts(at) if "contribution of each token" in title]
    at.button(key="why_attribute").click().run()
    assert_clean(at)
    ablation = chart(at, "token ablation: contribution")["data"][0]
    np.testing.assert_allclose(values(ablation["y"]), explain(tiny, DEFAULT_PROMPT, token, 2, method="ablation").scores,
                               rtol=1e-4, atol=1e-6)
    at.run()  # a rerun without the click keeps the session's result
    assert chart(at, "token ablation: contribution") is not None
