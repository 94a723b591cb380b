"""Every page parameter of a link is checked: a bad value is said (parameter, value, what is accepted) and the page
opens on its default; a good value still restores the control; the table of what each parameter accepts matches
the controls the pages draw; Compare can pick the extra training seeds (seeds/…), by hand and by link."""

import sys
from pathlib import Path

import pytest
import torch

from hero_core.method.checkpoint import bundled_names, seed_names

APP = Path(__file__).resolve().parents[1] / "app"
sys.path.insert(0, str(APP))  # the app's own helpers (components.*), the very modules the app's run imports

from apptest_helpers import assert_clean, cache_with_embedded_model, opener  # noqa: E402
from components.compare import MAX_RUNS, comparable_checkpoints, custom_checkpoints  # noqa: E402
from components.link_params import FLAG, Number, OneOf, accepted, problems_in  # noqa: E402

TIMEOUT = 180
RESTORE_FAILED = "The link could not be restored in full"
PAGE_TITLES = {"explorer": "Route explorer", "compare": "Compare runs", "generate": "Generate", "why": "Why",
               "learn": "Learn", "memory": "Memory", "dataset": "Data set"}


@pytest.fixture
def open_page(monkeypatch, tmp_path):
    monkeypatch.setenv("HERO_LENS_CACHE", str(cache_with_embedded_model(tmp_path)))
    return opener(monkeypatch, TIMEOUT)


# -- the table, without the app ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name, values, said", [
    ("compare_checkpoints", ["hero-10", "nope-99"], "unknown compare_checkpoints 'nope-99' (one of "),
    ("compare_variants", ["telepathy"], "unknown compare_variants 'telepathy' (one of hero, "),
    ("compare_variants", ["hero"] * (MAX_RUNS + 1), f"compare_variants takes at most {MAX_RUNS} values, got 7"),
    ("compare_ckpt_0", ["nope-99"], "unknown compare_ckpt_0 'nope-99' (one of default"),
    ("compare_prec_3", ["fp8"], "unknown compare_prec_3 'fp8' (one of full, bf16, nf4)"),
    ("compare_var_5", ["x"], "unknown compare_var_5 'x' (one of hero, "),
    ("compare_match", ["maybe"], "unknown compare_match 'maybe' (one of true, false)"),
    ("sb_max_tokens", ["5"], "sb_max_tokens must be a whole number from 16 to 2048, got '5'"),
    ("generate_seed", ["-1"], "generate_seed must be a whole number from 0 to 2147483647, got '-1'"),
    ("generate_temperature", ["hot"], "generate_temperature must be a number from 0.05 to 2, got 'hot'"),
    ("learn_depth", ["0"], "learn_depth must be a whole number from 1, got '0'"),
    ("runs", ["local-10,nope"], "unknown runs 'nope' (one of "),
    ("chat", ["2"], "unknown chat '2' (one of 0, 1)"),
])
def test_a_bad_value_names_the_parameter_the_value_and_what_is_accepted(monkeypatch, name, values, said):
    monkeypatch.delenv("HERO_LENS_TINY", raising=False)  # the real checkpoint lists
    found = problems_in({name: values}, accepted())
    assert said in found[name], found


def test_good_values_and_cleared_controls_pass():
    table = accepted()
    good = {"compare_checkpoints": comparable_checkpoints()[:2], "compare_variants": ["hero", "no_history"],
            "compare_prec_1": ["bf16"], "compare_match": ["false"], "sb_max_tokens": ["64"],
            "generate_temperature": ["0.7"], "learn_depth": ["3"], "why_method": ["integrated gradients"],
            "compare_n_runs": [""],  # an empty value clears a control: not a bad value
            "not_a_page_parameter": ["anything"]}  # no page reads it, so nothing is restored from it
    assert problems_in(good, table) == {}


# -- the app -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("page, query, name, said", [
    ("compare", {"compare_checkpoints": "nope-99"}, "compare_checkpoints",
     "unknown compare_checkpoints 'nope-99' (one of hero-10, "),
    ("compare", {"compare_variants": "telepathy"}, "compare_variants",
     "unknown compare_variants 'telepathy' (one of hero, no_history, no_memread, "),
    ("compare", {"compare_preset": "Custom", "compare_ckpt_0": "nope-99"}, "compare_ckpt_0",
     "unknown compare_ckpt_0 'nope-99' (one of default"),
    ("compare", {"compare_preset": "Custom", "compare_prec_1": "fp8"}, "compare_prec_1",
     "unknown compare_prec_1 'fp8' (one of full, bf16, nf4)"),
    ("compare", {"compare_match": "maybe"}, "compare_match", "unknown compare_match 'maybe' (one of true, false)"),
    ("generate", {"generate_max_new": "999"}, "generate_max_new",
     "generate_max_new must be a whole number from 1 to 256, got '999'"),
    ("generate", {"generate_decoding": "beam"}, "generate_decoding",
     "unknown generate_decoding 'beam' (one of greedy, sampled)"),
    ("learn", {"learn_tau": "abc"}, "learn_tau", "learn_tau must be a number from 0.05 to 0.95, got 'abc'"),
    ("why", {"why_method": "shap"}, "why_method", "unknown why_method 'shap' (one of token ablation, "),
    ("explorer", {"sb_max_tokens": "5"}, "sb_max_tokens",
     "sb_max_tokens must be a whole number from 16 to 2048, got '5'"),
    ("explorer", {"chat": "2"}, "chat", "unknown chat '2' (one of 0, 1)"),
    ("dataset", {"runs": "nope"}, "runs", "unknown runs 'nope' (one of hero, "),
    ("dataset", {"match": "2"}, "match", "unknown match '2' (one of 0, 1)"),
])
def test_each_bad_link_value_is_warned_and_the_page_still_renders(open_page, page, query, name, said):
    at = open_page(page, **query)
    assert_clean(at)
    warnings = [w.value for w in at.warning if w.value.startswith(RESTORE_FAILED)]
    # one warning, the table's whole sentence for this value, which names the value and what is accepted
    assert warnings == [f"{RESTORE_FAILED}: {problems_in({name: [query[name]]}, accepted())[name]}."], warnings
    assert said in warnings[0], warnings
    assert at.title and at.title[0].value.startswith(PAGE_TITLES[page])
    assert name not in at.query_params  # the page went on with the default, and the address bar says so


def test_good_link_values_still_restore_compare(open_page):
    at = open_page("compare", compare_variants=["no_memread", "hero"], compare_match="false")
    assert_clean(at)
    assert not [w.value for w in at.warning if w.value.startswith(RESTORE_FAILED)]
    assert at.multiselect(key="compare_variants").value == ["no_memread", "hero"]
    assert at.toggle(key="compare_match").value is False
    at = open_page("compare", compare_preset="Custom", compare_n_runs="2", compare_prec_1="bf16",
                   compare_var_1="no_history")
    assert_clean(at)
    assert at.selectbox(key="compare_prec_1").value == "bf16"
    assert at.selectbox(key="compare_var_1").value == "no_history"


PAGES_DRAWN = [("explorer", {}), ("learn", {}), ("memory", {}), ("compare", {}), ("generate", {}), ("why", {}),
               ("dataset", {}), ("compare", {"compare_preset": "Custom", "compare_n_runs": str(MAX_RUNS)})]


@pytest.mark.parametrize("page, query", PAGES_DRAWN)
def test_the_table_accepts_exactly_what_each_bound_control_shows(open_page, page, query):
    """A control bound to the URL (its key is the parameter's name) must be in the table, and the table must take
    every option it shows and no other, or the full range it spans."""
    at = open_page(page, **query)
    assert_clean(at)
    table = accepted()
    bound = []
    for kind in ("radio", "selectbox", "multiselect", "slider", "number_input", "toggle"):
        for widget in getattr(at, kind):
            name = widget.proto.query_param_key
            if not name:
                continue
            bound.append(name)
            check = table.get(name)
            assert check is not None, f"{page}: the bound control {name} is not in link_params.accepted()"
            if kind == "toggle":
                assert check == FLAG, name
            elif kind in ("slider", "number_input"):
                assert isinstance(check, Number) and check.low == pytest.approx(widget.min), name
                assert check.high is None or check.high == pytest.approx(widget.max), name
            else:
                assert isinstance(check, OneOf) and set(check.options) == set(widget.options), (name, widget.options)
    assert "sb_max_tokens" in bound, bound  # the sidebar's, on every page
    # (counting the sidebar's, every page had one) Explorer's and Data set's bound controls are the sidebar's (Data
    # set writes its runs and match to the link by hand); every other page has its own
    assert bool([n for n in bound if not n.startswith("sb_")]) == (page not in ("explorer", "dataset")), bound


# -- seeds/… in Compare ------------------------------------------------------------------------------------------
def test_seed_runs_are_choices_in_compare_and_accepted_from_a_link():
    seeds = seed_names()
    assert seeds, "the bundled extra training seeds (hero_core/checkpoints/seeds) are missing"
    assert set(seeds) <= set(comparable_checkpoints()) and set(bundled_names()) <= set(comparable_checkpoints())
    assert set(seeds) <= set(custom_checkpoints(tiny=False))
    table = accepted()
    assert problems_in({"compare_checkpoints": [seeds[0], bundled_names()[0]], "compare_ckpt_2": [seeds[-1]]},
                       table) == {}


@pytest.mark.slow
def test_a_seed_run_is_compared_from_a_link_on_the_embedded_model(monkeypatch, tmp_path):
    """The real backbone: Compare's checkpoints opened by link on a seeds/… run beside its first seed."""
    seed = next(n for n in seed_names() if n.startswith("seeds/local-10-s1"))
    monkeypatch.setenv("HERO_LENS_CACHE", str(cache_with_embedded_model(tmp_path)))
    monkeypatch.setenv("HERO_LENS_THREADS", str(torch.get_num_threads()))  # keep this process's setting
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP / "main.py"), default_timeout=900)
    at.switch_page("views/compare.py")
    at.query_params.update({"compare_checkpoints": [seed, "local-10-s1"], "prompt": "A short prompt to compare."})
    at.run()
    assert_clean(at)
    assert at.multiselect(key="compare_checkpoints").value == [seed, "local-10-s1"]
    runs = at.dataframe[0].value["run"].tolist()  # the runs table, first on the page
    assert runs == [f"{seed} (trained router)", "local-10-s1 (trained router)"]


def test_the_root_link_forwards_every_value_of_a_repeated_parameter(monkeypatch, tmp_path):
    """"/" forwards to the first page with the link's parameters: a multiselect's repeated values all go along."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("HERO_LENS_TINY", "1")
    monkeypatch.setenv("HERO_LENS_CACHE", str(cache_with_embedded_model(tmp_path)))
    at = AppTest.from_file(str(APP / "main.py"), default_timeout=TIMEOUT)
    at.query_params.update({"compare_variants": ["no_memread", "hero"]})
    at.run()
    assert_clean(at)
    assert at.query_params["compare_variants"] == ["no_memread", "hero"]
