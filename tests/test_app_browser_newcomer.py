"""The app a newcomer meets, in a real browser: the landing page's start, Compare with 3, 4 and 6 runs, every bad
link value said, and (on the embedded model, ``slow``) the grouped checkpoint list and Compare with four
checkpoints on one backbone (backbone loads counted from the sidebar, not timed)."""

import json
import time
import urllib.parse

import pytest
import test_app_browser as shared
import test_app_browser_defaults as defaults
from test_app_browser_defaults import click_at, click_button

from hero_lens_tools.app_browser import NO_EXCEPTION_JS

server, browser_endpoint, browser, shots = shared.server, shared.browser_endpoint, shared.browser, shared.shots
# the embedded model's server (its caches linked in, so the model is not converted again) and a tab of its own
embedded_server, tab = defaults.embedded_server, defaults.tab

pytestmark = pytest.mark.browser

BODY_TEXT = "document.body.innerText"


def open_url(tools, url: str, marker: str, timeout: float = 120.0) -> None:
    # The old document answers until the new one replaces it (the tab is shared with earlier tests, whose page may
    # hold the same marker): mark it, and wait for a document without the mark. Not DevTools.goto: "/" forwards to
    # /explorer, so the path it waits for is not the one asked for.
    try:
        tools.eval("window.__heroLeaving = true")
    except RuntimeError:
        pass
    tools.send("Page.navigate", {"url": url})
    tools.wait_for("!window.__heroLeaving && document.readyState === 'complete'", timeout=timeout,
                   what=f"navigation to {url}")
    tools.wait_for(f"{BODY_TEXT}.includes({json.dumps(marker)})", timeout=timeout, what=repr(marker))
    tools.wait_for("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout,
                   what="the page to finish running")


def no_exception(tools) -> None:
    assert tools.eval(NO_EXCEPTION_JS), tools.eval(BODY_TEXT)[:2000]
    assert "Something went wrong" not in tools.eval(BODY_TEXT)


def test_the_landing_page_says_where_to_start(server, browser, shots):
    tools = browser
    open_url(tools, f"{server}/", "Route this prompt")
    tools.wait_for(f"{BODY_TEXT}.includes('one column per token') && {BODY_TEXT}.includes('Take the guided tour')",
                   what="the landing page's start box")
    shared.submit_prompt(tools, "Short words may skip layers.")  # typed, then the visible button routes it
    click_button(tools, "Route this prompt")
    tools.wait_for(f"{BODY_TEXT}.includes('Selected:')", what="the routed prompt")
    no_exception(tools)
    tools.screenshot(shots / "landing.png")
    tools.eval("[...document.querySelectorAll('a')].find(a => a.innerText.includes('Take the guided tour')).click()")
    tools.wait_for("location.pathname.endsWith('/learn')", what="the guided tour")


@pytest.mark.parametrize("n_runs", [3, 4, 6])
def test_compare_holds_three_four_and_six_runs(server, browser, shots, n_runs):
    tools = browser
    query = urllib.parse.urlencode({"compare_preset": "Custom", "compare_n_runs": n_runs})
    open_url(tools, f"{server}/compare?{query}", "Per-layer divergence")
    no_exception(tools)
    flips = tools.eval("[...document.querySelectorAll('.gtitle')].filter(t => t.textContent.startsWith("
                       "'Decision flips')).length")
    assert flips == n_runs - 1
    assert tools.eval("new URLSearchParams(location.search).get('compare_n_runs')") == str(n_runs)
    if n_runs == 6:
        tools.screenshot(shots / "compare-6.png")


@pytest.mark.parametrize("query, said", [
    ({"token": "-5", "block": "3"}, "token must be a whole number from 0"),
    ({"token": "0", "block": "999"}, "is beyond this prompt"),
    ({"memory_mode": "zzz"}, "unknown memory_mode 'zzz'"),
    ({"compare_preset": "zzz"}, "unknown compare_preset 'zzz'"),
    ({"compare_checkpoints": "nope-99"}, "unknown compare_checkpoints 'nope-99'"),
    ({"set": "nope"}, "unknown set 'nope'"),
    ({"n": "abc", "set": "code"}, "n must be a whole number"),
    ({"checkpoint": "nope"}, "checkpoint 'nope' is not bundled here"),
    ({"tau": "7"}, "tau must be a number between 0.01 and 0.99"),
])
def test_every_bad_link_value_is_said(server, browser, query, said):
    tools = browser
    open_url(tools, f"{server}/explorer?{urllib.parse.urlencode(query)}", "could not be restored in full")
    assert said in tools.eval(BODY_TEXT)
    no_exception(tools)


# -- the embedded model -------------------------------------------------------------------------------------------
def backbone_loads(tools) -> int:
    text = tools.eval(BODY_TEXT)
    marker = "Backbones in memory: "
    assert marker in text, text[:1500]
    return int(text.split("(loaded ")[1].split(" ")[0])


@pytest.mark.slow
def test_the_checkpoint_list_explains_itself(embedded_server, tab, shots):
    open_url(tab, f"{embedded_server}/", "Backbones in memory", timeout=300)
    text = tab.eval(BODY_TEXT)
    assert "trained to 10 % param skip" in text and "seed 0" in text  # the chosen checkpoint's line from its config
    box = ("[...document.querySelectorAll('[data-testid=stSelectbox]')].find(e => "
           "e.querySelector('label')?.innerText.trim() === 'Checkpoint')")
    click_at(tab, f"{box}?.querySelector('input[role=combobox], [data-baseweb=select] > div')", "the checkpoint list")
    options = tab.wait_for("(() => { const o = [...document.querySelectorAll('[role=\"option\"]')]"
                           ".map(x => x.innerText); return o.length ? o : null; })()", what="the checkpoint list")
    assert options[0].startswith("default — ") and options[-1] == "directory…"
    assert any(o.startswith("trained · local-10") for o in options) and any(o.startswith("ablation ·") for o in options)
    assert not any(o.startswith("research ·") for o in options)  # behind the switch
    tab.screenshot(shots / "checkpoint-list.png")
    assert backbone_loads(tab) == 1


@pytest.mark.slow
def test_compare_with_four_checkpoints_loads_the_backbone_once(embedded_server, tab, shots):
    names = ["hero-10-r4", "local-10", "hero-25", "hero-40"]
    query = urllib.parse.urlencode({"compare_preset": "Checkpoints"}) + "".join(
        f"&compare_checkpoints={urllib.parse.quote(n)}" for n in names)
    open_url(tab, f"{embedded_server}/compare?{query}", "Per-layer divergence", timeout=600)
    no_exception(tab)
    runs = tab.eval("[...document.querySelectorAll('.gtitle')].filter(t => t.textContent.startsWith("
                    "'Decision flips')).length")
    assert runs == 3
    time.sleep(1.0)
    tab.screenshot(shots / "compare.png")
    assert backbone_loads(tab) == 1  # four routers, one backbone
