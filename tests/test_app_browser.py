"""End to end in a real browser: serve the app (tiny model) and drive Debian's headless Chromium.

Chromium is driven over the DevTools protocol with the ``websockets`` client that Streamlit itself
depends on, so nothing beyond requirements.txt is needed. The test types a prompt into the page,
clicks a cell of the skip map, visits every page, checks that the plotted data are the trace's and that
no exception is shown, and takes a screenshot of every page: into docs/screenshots/ (for the README)
with ``HERO_LENS_UPDATE_SCREENSHOTS=1``, else into pytest's temporary directory so that a test run does
not modify the working tree.
"""

import json
import os
import re
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from apptest_helpers import cache_with_embedded_model

from hero_core.reports.served_app import AppDidNotStart, served_app
from hero_lens_tools.app_browser import (
    ATTRIBUTE_BUTTON_JS,
    CLICK_ATTRIBUTE_JS,
    FIND_SKIP_MAP_JS,
    NO_EXCEPTION_JS,
    SKIP_MAP_JS,
    BrowserUnavailable,
    DevTools,
    chromium_endpoint,
    open_tab,
)

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
DOC_SHOTS = ROOT / "docs" / "screenshots"
URL_PROMPT = "Routing is decided per token: short words may skip layers."
TYPED_PROMPT = "def add(a, b):\n    return a + b"


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    if os.environ.get("HERO_LENS_UPDATE_SCREENSHOTS") == "1":
        return DOC_SHOTS
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # its own cache dir: the long prompts a link names are stored there, not in the user's cache
    env = {**os.environ, "HERO_LENS_TINY": "1",
           "HERO_LENS_CACHE": str(cache_with_embedded_model(tmp_path_factory.mktemp("cache")))}
    try:
        with served_app(env) as base:
            yield base
    except AppDidNotStart as error:
        pytest.fail(str(error))


@pytest.fixture(scope="module")
def browser_endpoint():
    """A headless Chromium; yields its DevTools WebSocket URL (each DevTools client opens its own tab)."""
    pytest.importorskip("websockets.sync.client", reason="the DevTools client needs websockets >= 12")
    try:
        with chromium_endpoint() as endpoint:
            yield endpoint
    except BrowserUnavailable as error:
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def browser(browser_endpoint):
    tools = open_tab(browser_endpoint)
    yield tools
    tools.close()


def wait_for_skip_map(tools: DevTools, n_cells: int) -> dict:
    return tools.wait_for(f"(() => {{ const m = {SKIP_MAP_JS}; return m && m.n === {n_cells} ? m : null; }})()",
                          what=f"a skip map with {n_cells} cells")


def submit_prompt(tools: DevTools, text: str, attempts: int = 5) -> None:
    """Replace the prompt box's text with `text` and press Ctrl+Enter. Streamlit may redraw the box between
    our select() and the typing (the selection is lost and the text lands after the old prompt), so the
    box must hold exactly `text` before the submit; otherwise select and type again."""
    tools.wait_for("document.querySelector('textarea') !== null", what="the prompt box")
    want = json.dumps(text)
    for _ in range(attempts):
        tools.eval("(() => { const t = document.querySelector('textarea'); t.focus(); t.select(); return true; })()")
        tools.send("Input.insertText", {"text": text})
        try:
            tools.wait_for(f"document.querySelector('textarea')?.value === {want}", timeout=3.0,
                           what="the typed prompt in the box")
        except AssertionError:
            continue
        time.sleep(0.3)  # let a redraw in flight land; then check again
        if tools.eval(f"document.querySelector('textarea')?.value === {want}"):
            break
    else:
        raise AssertionError(f"the prompt box never held the typed prompt after {attempts} attempts")
    for kind in ("keyDown", "keyUp"):
        tools.send("Input.dispatchKeyEvent", {"type": kind, "key": "Enter", "code": "Enter", "modifiers": 2,
                                              "windowsVirtualKeyCode": 13})


# the chart whose title starts with the given text (a JS expression; %-format the title in)
CHART_BY_TITLE_JS = ("[...document.querySelectorAll('.js-plotly-plot')].find(d => d._fullLayout && "
                     "d._fullLayout.title.text.replace(/<[^>]*>/g, '').startsWith('%s'))")


# The script run has ended and no element is stale (every delta of the run has arrived).
RUN_ENDED_JS = ("document.querySelector('[data-testid=\"stApp\"]').getAttribute('data-test-script-state') !== "
                "'running' && !document.querySelector('[data-stale=\"true\"]')")
# Resolves once the page has rendered what arrived (two animation frames) and every plotly draw begun by then has
# finished (plotly keeps a draw in flight in the chart's _promises): the events a redraw would come before.
CHARTS_SETTLED_JS = ("(async () => { const frame = () => new Promise(r => requestAnimationFrame(() => r())); "
                     "await frame(); await frame(); await Promise.all([...document.querySelectorAll('.js-plotly-plot')]"
                     ".flatMap(g => g._promises || [])); await frame(); return true; })()")


# Charts whose labels, colour bar or legend made plotly widen a margin (and draw the chart a second time).
PUSHED_MARGINS_JS = ("[...document.querySelectorAll('.js-plotly-plot')].filter(d => d._fullLayout && "
                     "['l', 'r', 't', 'b'].some(s => Math.abs(d._fullLayout.margin[s] - d._fullLayout._size[s]) > 1))"
                     ".map(d => d._fullLayout.title.text.replace(/<[^>]*>/g, '').slice(0, 40) + ' ' + JSON.stringify("
                     "['l', 'r', 't', 'b'].map(s => [d._fullLayout.margin[s], d._fullLayout._size[s]])))")


def test_prompt_to_figures_in_a_browser(server, browser, tiny, shots):
    tools = browser
    # 1. A prompt passed in the address bar.
    tools.goto(f"{server}/?{urllib.parse.urlencode({'prompt': URL_PROMPT})}")
    expected = tiny.trace(URL_PROMPT)
    shown = wait_for_skip_map(tools, expected.n_routed * expected.n_tokens)
    np.testing.assert_allclose(shown["gate"], expected.gate.reshape(-1), rtol=1e-5)  # summation order
    tools.wait_for("document.querySelectorAll('.js-plotly-plot').length >= 3", what="three charts")
    assert tools.eval(NO_EXCEPTION_JS)

    # 2. A prompt typed into the text area, submitted with Ctrl+Enter.
    submit_prompt(tools, TYPED_PROMPT)
    typed = tiny.trace(TYPED_PROMPT)
    shown = wait_for_skip_map(tools, typed.n_routed * typed.n_tokens)
    np.testing.assert_allclose(shown["gate"], typed.gate.reshape(-1), rtol=1e-5)
    assert tools.eval(NO_EXCEPTION_JS)

    # 3. Click a cell of the skip map: the selection moves to that (token, layer).
    # (once the typed prompt's run has ended: its charts after the map are replaced as they arrive)
    tools.wait_for("document.querySelector('[data-testid=\"stApp\"]').getAttribute('data-test-script-state') "
                   "!== 'running' && !document.querySelector('[data-stale=\"true\"]')", what="the run to end")
    token, block = 2, 1
    xy = tools.eval(
        f"(() => {{ const g = {FIND_SKIP_MAP_JS}; g.scrollIntoView(); const L = g._fullLayout; "
        f"const r = g.getBoundingClientRect(); return [r.left + L._size.l + L.xaxis.l2p({token}), "
        f"r.top + L._size.t + L.yaxis.l2p({block + 1})]; }})()")
    # count the redraws of a chart that does not depend on the selected cell: the rerun must leave it as drawn
    assert tools.eval(f"(() => {{ const g = {CHART_BY_TITLE_JS % 'FFNs executed per token'}; g.__draws = 0; "
                      "g.on('plotly_afterplot', () => g.__draws++); return true; })()")
    # ... and the map itself: the clicked cell is its selected point, so the figure the server sends back is the
    # same and the chart stays as drawn (a changed figure would be a new element, drawn from scratch)
    assert tools.eval(f"(() => {{ const g = {FIND_SKIP_MAP_JS}; g.__kept = true; g.__draws = 0; "
                      "g.on('plotly_afterplot', () => g.__draws++); return true; })()")
    tools.click(*xy)
    tools.wait_for(f"document.body.innerText.includes('Selected: token {token} ')", timeout=60,
                   what="the clicked cell to become the selection")
    tools.wait_for(f"location.search.includes('token={token}') && location.search.includes('block={block}')",
                   what="the address bar to name the clicked cell")
    # the click's rerun has ended and every chart has drawn what it was sent: a redraw it causes has happened by then
    tools.wait_for(RUN_ENDED_JS, what="the click's rerun to end")
    assert tools.eval(CHARTS_SETTLED_JS)
    assert tools.eval(f"{CHART_BY_TITLE_JS % 'FFNs executed per token'}.__draws") == 0
    assert tools.eval(f"(() => {{ const g = {FIND_SKIP_MAP_JS}; return [g.__kept === true, g.__draws, "
                      "g.data[0].selectedpoints]; })()") == [True, 0, [block * typed.n_tokens + token]]
    # every chart of the page was drawn with the margins it was given: none needed plotly's second, wider draw
    pushed = tools.eval(PUSHED_MARGINS_JS)
    assert not pushed, "\n".join(pushed)
    tools.wait_for("document.querySelectorAll('.js-plotly-plot').length >= 3")
    time.sleep(1.0)  # let plotly finish drawing before the screenshot
    tools.eval("window.scrollTo(0, 0); document.querySelector('section.main, [data-testid=\"stMain\"]')"
               "?.scrollTo?.(0, 0); true")
    tools.screenshot(shots / "explorer.png")
    assert (shots / "explorer.png").stat().st_size > 10_000
    assert tools.eval(NO_EXCEPTION_JS)


@pytest.mark.parametrize("page, charts, marker", [
    ("memory", 5, "Memory view"), ("compare", 7, "Compare runs"), ("why", 3, "Why this decision?"),
    ("learn", 5, "Learn: dynamic depth"),
])
def test_every_page_renders(server, browser, page, charts, marker, shots):
    tools = browser
    tools.goto(f"{server}/{page}")
    tools.wait_for(f"document.querySelector('h1')?.innerText.includes({json.dumps(marker)})",
                   what=f"the {page} page's title")
    if page == "why":  # a decision past the 24th token (the default: the prompt's last) is attributed on the button
        tools.wait_for(f"!!{ATTRIBUTE_BUTTON_JS} || document.querySelectorAll('.js-plotly-plot').length >= {charts}",
                       timeout=120, what="the Attribute button or the attribution")
        tools.eval(CLICK_ATTRIBUTE_JS)
    tools.wait_for(f"document.querySelectorAll('.js-plotly-plot').length >= {charts}", timeout=120,
                   what=f"{charts} charts on {page}")
    time.sleep(1.0)
    assert tools.eval(NO_EXCEPTION_JS)
    tools.screenshot(shots / f"{page}.png")


def test_generate_page_streams(server, browser, shots):
    tools = browser
    tools.goto(f"{server}/generate")
    tools.wait_for("[...document.querySelectorAll('button')].some(b => b.innerText.trim() === 'Generate')",
                   what="the Generate button")
    tools.eval("[...document.querySelectorAll('button')].find(b => b.innerText.trim() === 'Generate').click(); true")
    tools.wait_for("document.body.innerText.includes('Routing over prompt + generated tokens') && "
                   "document.querySelectorAll('.js-plotly-plot').length >= 2", timeout=120, what="generation")
    tools.wait_for("document.querySelectorAll('.hero-token').length >= 2 * 40", what="the coloured tokens")
    time.sleep(1.0)
    assert tools.eval(NO_EXCEPTION_JS)
    tools.screenshot(shots / "generate.png")


# Different lengths, so a page showing another session's trace fails on the cell count as well as the values.
LOAD_PROMPTS = ["The cat sat.", "def f(x):\n    return x * 2", "Q: 12 + 7 = ? A: 19, because 12 + 7 = 19.",
                "Routing decides per token which feed-forward blocks run.", "שלום עולם 漢字 👩‍💻",
                "Long " * 20 + "prompt."]


SHOWN_GATE_ATOL = 5e-5  # half the last digit the hover text shows of g (4 decimals)


def test_simultaneous_sessions_get_their_own_results(server, browser_endpoint, tiny):
    """A bounded load test: six browser sessions submit different prompts at once, while plain HTTP
    clients hit the server; every page must show exactly its own prompt's trace, with no exception."""
    from concurrent.futures import ThreadPoolExecutor

    expected = [tiny.trace(prompt) for prompt in LOAD_PROMPTS]
    assert len({e.n_tokens for e in expected}) == len(LOAD_PROMPTS)
    tabs = [open_tab(browser_endpoint, height=1000) for _ in LOAD_PROMPTS]
    try:
        for tab, prompt in zip(tabs, LOAD_PROMPTS, strict=True):  # navigate every tab before any has rendered
            tab.send("Page.navigate", {"url": f"{server}/?{urllib.parse.urlencode({'prompt': prompt})}"})

        def http_get(path: str) -> int:
            with urllib.request.urlopen(f"{server}{path}", timeout=30) as reply:
                return reply.status

        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(http_get, ["/", "/_stcore/health"] * 12))
        assert statuses == [200] * 24
        # What a user sees of a gate is its colour and its hover text, g to 4 decimals: compare to half that digit.
        # Sessions running at once reorder float32 sums (thread scheduling), which moved gates by 3e-6 relative in
        # a CI run; another session's trace would differ in size (every prompt here has its own length) or by far
        # more than 5e-5.
        for tab, trace in zip(tabs, expected, strict=True):
            shown = wait_for_skip_map(tab, trace.n_routed * trace.n_tokens)
            np.testing.assert_allclose(shown["gate"], trace.gate.reshape(-1), rtol=0, atol=SHOWN_GATE_ATOL)
            assert tab.eval(NO_EXCEPTION_JS)
        # Still answering, and still each session's own: re-check the first page after all have finished.
        shown = wait_for_skip_map(tabs[0], expected[0].n_routed * expected[0].n_tokens)
        np.testing.assert_allclose(shown["gate"], expected[0].gate.reshape(-1), rtol=0, atol=SHOWN_GATE_ATOL)
    finally:
        for tab in tabs:
            tab.close()


LONG_PROMPT = " ".join(["Routing decides per token which layers run, and the memory keeps what came before."] * 7)


@pytest.mark.parametrize("page", ["memory", "why"])
def test_pickers_survive_a_second_prompt(server, browser, tiny, page):
    """The reproduction of a crash: a ~120-token prompt, then a different, shorter prompt submitted with
    Ctrl+Enter (the token picker once got its old label '76: .' back and died parsing it). The page must redraw
    for the new prompt with its sidebar and no exception."""
    tools = browser
    tools.goto(f"{server}/{page}")
    submit_prompt(tools, LONG_PROMPT)
    first = tiny.trace(LONG_PROMPT, max_tokens=512)
    assert first.n_tokens >= 100
    wait_for_skip_map(tools, first.n_routed * first.n_tokens)
    time.sleep(1.0)  # the token picker now holds the last token of the long prompt
    submit_prompt(tools, TYPED_PROMPT)
    second = tiny.trace(TYPED_PROMPT)
    wait_for_skip_map(tools, second.n_routed * second.n_tokens)  # redrawn for the second prompt
    time.sleep(1.0)
    assert tools.eval(NO_EXCEPTION_JS)
    assert tools.eval("!document.body.innerText.includes('invalid literal')")
    assert tools.eval("document.querySelector('[data-testid=\"stSidebar\"]') !== null")


@pytest.mark.parametrize("page, marker", [("explorer", "Route explorer"), ("memory", "Memory view")])
def test_a_page_url_opens_directly(server, browser, page, marker):
    # The first page used to be the default, served at "/" only: /explorer answered "Page not found".
    tools = browser
    tools.goto(f"{server}/{page}")
    tools.wait_for(f"document.querySelector('h1')?.innerText.includes({json.dumps(marker)})", timeout=120,
                   what=f"the {page} page")
    assert not tools.eval("document.body.innerText.includes('Page not found')")
    assert tools.eval(NO_EXCEPTION_JS)


# Well over the app's 512-token cap: the page must cut it with a notice and show a window of the skip map.
VERY_LONG_PROMPT = " ".join(f"Token {i} of a long prompt, pasted whole; routing decides per token." for i in range(60))
SKIP_MAP_AXIS_JS = (f"(() => {{ const g = {FIND_SKIP_MAP_JS}; if (!g) return null; const a = g._fullLayout.xaxis; "
                    "const c = g._fullData.find(t => t.name === 'cells'); "
                    "const shown = a.tickvals.filter(t => t >= a.range[0] && t <= a.range[1]); "
                    "return {range: a.range, size: c.marker.size, px: shown.map(t => a.l2p(t))}; })()")
CHART_RANGES_JS = ("Object.fromEntries([...document.querySelectorAll('.js-plotly-plot')].filter(d => d._fullLayout)"
                   ".map(d => [d._fullLayout.title.text.split('<br>')[0].replace(/<[^>]*>/g, '').split(/ [·(:]/)[0], "
                   "d._fullLayout.xaxis.range]))")


def test_a_long_prompt_gets_a_token_window(server, browser, tiny):
    """A prompt of 600+ tokens pasted into Route explorer: the skip map shows a window of legible cells whose
    labels never collide, an overview strip covers the whole (truncated) prompt, the charts along the tokens
    share the window; no exception anywhere."""
    from hero_core.viz.axes import LABEL_PX, MAX_WINDOW, MIN_CELL_PX

    assert len(tiny.tokenizer(VERY_LONG_PROMPT)["input_ids"]) >= 600
    expected = tiny.trace(VERY_LONG_PROMPT, max_tokens=512)
    assert expected.n_tokens == 512
    tools = browser
    tools.goto(f"{server}/explorer")
    submit_prompt(tools, VERY_LONG_PROMPT)
    shown = tools.wait_for(f"(() => {{ const m = {SKIP_MAP_JS}; return m && m.n === "
                           f"{expected.n_routed * expected.n_tokens} ? m : null; }})()", timeout=180,
                           what="the skip map of the long prompt")
    np.testing.assert_allclose(shown["gate"], expected.gate.reshape(-1), rtol=1e-5)  # every cell, a pan away
    tools.wait_for("document.body.innerText.includes('truncated')", what="the truncation notice")
    tools.wait_for(f"[...document.querySelectorAll('.js-plotly-plot')].some(d => d._fullLayout && "
                   f"d._fullLayout.title.text.includes('Overview: all {expected.n_tokens} tokens'))",
                   what="the overview strip")
    tools.wait_for("document.body.innerText.includes('Visible tokens')", what="the token window slider")

    axis = tools.eval(SKIP_MAP_AXIS_JS)
    first, last = axis["range"][0] + 0.5, axis["range"][1] - 0.5
    assert 0 < last - first + 1 <= MAX_WINDOW
    assert axis["size"] >= MIN_CELL_PX
    assert min(np.diff(sorted(axis["px"]))) >= LABEL_PX - 0.5  # tick labels never collide (pixels on screen)
    # the other charts along the tokens show the same window
    ranges = tools.wait_for(f"(() => {{ const r = {CHART_RANGES_JS}; return r['FFNs executed per token'] ? r : null; "
                            "})()", what="the FFNs-per-token chart")
    assert ranges["FFNs executed per token"] == axis["range"], ranges

    time.sleep(1.0)
    assert tools.eval(NO_EXCEPTION_JS)


DATASET_CHARTS = ("Skip rate per routed layer (data set)", "Skip rate by token category",
                  "Skip rate by position in the prompt", "Quality against dense per item")


def test_a_data_set_runs_with_progress_and_opens_an_item(server, browser, browser_endpoint, tiny):
    """Issue 13's workflow end to end: a bundled 20-item set (chosen by the URL), Run with a progress bar, the
    figures and tables of the result, one item opened in Route explorer, and that URL reloaded in a fresh tab
    restoring the item's prompt, variant and skip map."""
    from hero_core.eval.sweep.prompt_sets import bundled_items

    n = 20
    items = bundled_items("reasoning", n)
    tools = browser
    tools.goto(f"{server}/dataset?set=reasoning&n={n}")
    tools.wait_for("document.querySelector('h1')?.innerText.includes('Data set')", timeout=120, what="the page")
    tools.wait_for(f"document.body.innerText.includes('{n} prompts')", what=f"{n} prompts")
    # matched compute (a dozen extra passes per item and run) is covered by the AppTest; here the runs go plain
    match = "[...document.querySelectorAll('label')].find(l => l.innerText.includes('Match compute'))"
    tools.wait_for(f"{match} !== undefined", what="the Match compute toggle")
    if tools.eval(f"{match}.querySelector('input').checked"):
        xy = tools.eval(f"(() => {{ const l = {match}; l.scrollIntoView({{block: 'center'}}); "
                        "const r = l.getBoundingClientRect(); return [r.left + 14, r.top + r.height / 2]; })()")
        tools.click(*xy)
        tools.wait_for(f"{match}.querySelector('input').checked === false", what="Match compute off")
    run_button = "[...document.querySelectorAll('button')].find(b => b.innerText.trim() === 'Run')"
    tools.wait_for(f"{run_button} !== undefined", what="the Run button")
    tools.eval(f"{run_button}.click(); true")
    seen = set()  # the progress bar's "k / 20 items", polled while the items run
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        text = tools.eval("document.body.innerText") or ""
        seen.update(int(k) for k in re.findall(rf"(\d+) / {n} items", text))
        if f"{n} / {n} items" in text and "Skip rate per routed layer" in json.dumps(
                tools.eval("[...document.querySelectorAll('.js-plotly-plot')].map(d => d._fullLayout?.title.text)")):
            break
        time.sleep(0.2)
    assert n in seen, f"the run did not finish; progress seen: {sorted(seen)}"
    assert any(0 < k < n for k in seen), f"no progress shown while running: {sorted(seen)}"
    titles = tools.wait_for(
        "(() => { const t = [...document.querySelectorAll('.js-plotly-plot')].filter(d => d._fullLayout)"
        ".map(d => d._fullLayout.title.text.split('<br>')[0].replace(/<[^>]*>/g, '')); "
        f"return t.length >= {len(DATASET_CHARTS) + 1} ? t : null; }})()", timeout=120, what="the data set's charts")
    for wanted in DATASET_CHARTS:
        assert any(t.startswith(wanted) for t in titles), (wanted, titles)
    # the page fills in over several renders: wait for each part rather than read the page once
    tools.wait_for("document.querySelectorAll('[data-testid=\"stDataFrame\"]').length >= 2", timeout=120,
                   what="the quality and items tables")
    # the export buttons come last on the page: they may arrive a moment after the tables
    tools.wait_for("document.body.innerText.includes('Items (CSV)')", timeout=120, what="the export buttons")
    assert tools.eval(NO_EXCEPTION_JS)

    # open the picked row (the first: item 0 under the first run, hero) in Route explorer
    tools.wait_for("(() => { const b = [...document.querySelectorAll('button')]"
                   ".find(b => b.innerText.includes('Open →')); if (!b) return false; b.click(); return true; })()",
                   timeout=120, what="the Open button")
    tools.wait_for("document.querySelector('h1')?.innerText.includes('Route explorer')", timeout=120,
                   what="Route explorer")
    expected = tiny.trace(items[0].text, variant="hero", tau=0.5)
    wait_for_skip_map(tools, expected.n_routed * expected.n_tokens)
    # the prompt box may render a rerun after the figures: wait for it rather than read the page once
    tools.wait_for(f"document.querySelector('textarea')?.value === {json.dumps(items[0].text)}",
                   what="the item's prompt in the prompt box")
    tools.wait_for("location.search.includes('prompt=')", what="the item in the URL")
    url = tools.eval("location.href")
    assert "variant=hero" in url and "/explorer" in url
    assert tools.eval(NO_EXCEPTION_JS)

    # the URL reloaded in a fresh tab (a new session) restores the same view
    fresh = open_tab(browser_endpoint)
    try:
        fresh.goto(url)
        shown = wait_for_skip_map(fresh, expected.n_routed * expected.n_tokens)
        np.testing.assert_allclose(shown["gate"], expected.gate.reshape(-1), rtol=1e-5)
        fresh.wait_for(f"document.querySelector('textarea')?.value === {json.dumps(items[0].text)}",
                       what="the item's prompt restored from the URL")
        assert fresh.eval(NO_EXCEPTION_JS)
    finally:
        fresh.close()


LUMINANCE_JS = ("const lum = c => { if (!c) return null; let m = c.match(/^#([0-9a-f]{6})$/i); let v; "
                "if (m) v = [0, 2, 4].map(i => parseInt(m[1].slice(i, i + 2), 16)); "
                "else { m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null; const p = m[1].split(',').map(Number); "
                "if (p.length === 4 && p[3] === 0) return 'transparent'; v = p.slice(0, 3); } "
                "return (0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]) / 255; };")


def test_figures_follow_the_dark_theme(server, browser_endpoint, tiny):
    """A user whose system (or Streamlit's settings menu) picks the dark theme gets dark figures: plotly draws
    with Streamlit's theme, and no figure paints a light background of its own."""
    tools = open_tab(browser_endpoint)
    try:
        tools.send("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        tools.goto(f"{server}/explorer?{urllib.parse.urlencode({'prompt': URL_PROMPT})}")
        expected = tiny.trace(URL_PROMPT)
        wait_for_skip_map(tools, expected.n_routed * expected.n_tokens)
        tools.wait_for("document.querySelectorAll('.js-plotly-plot').length >= 3", what="three charts")
        time.sleep(1.0)
        found = tools.eval(
            f"(() => {{ {LUMINANCE_JS} const app = document.querySelector('[data-testid=\"stApp\"]'); "
            "return {page: lum(getComputedStyle(app).backgroundColor), charts: [...document.querySelectorAll("
            "'.js-plotly-plot')].filter(d => d._fullLayout).map(d => ({title: d._fullLayout.title.text.slice(0, 40), "
            "font: lum(d._fullLayout.font.color), paper: lum(d._fullLayout.paper_bgcolor), "
            "plot: lum(d._fullLayout.plot_bgcolor)}))}; })()")
        assert found["page"] != "transparent" and found["page"] < 0.3, found  # the app itself is dark
        assert len(found["charts"]) >= 3
        for chart in found["charts"]:
            assert chart["font"] != "transparent" and chart["font"] > 0.6, chart  # light text
            for background in (chart["paper"], chart["plot"]):
                assert background == "transparent" or background < 0.3, chart  # dark or the page's own
        assert tools.eval(NO_EXCEPTION_JS)
    finally:
        tools.close()


def test_compare_matches_compute_in_a_browser(server, browser, tiny):
    """Compare's default is equal compute: every run after the first at the tau where it realises the first run's
    param skip. The page says so, and the quality chart's title gives each run's tau and param skip, which are
    those of the library's own matching."""
    tools = browser
    tools.goto(f"{server}/compare?{urllib.parse.urlencode({'prompt': URL_PROMPT})}")
    tools.wait_for("document.body.innerText.includes('Compute matched to')", timeout=180, what="the matched caption")
    title = tools.wait_for("(() => { const d = [...document.querySelectorAll('.js-plotly-plot')].find(d => "
                           "d._fullLayout && d._fullLayout.title.text.includes('Quality against the dense model'));"
                           " return d ? d._fullLayout.title.text : null; })()", timeout=180, what="the quality chart")
    runs = re.findall(r"(?:<sup>|\| )([^|:<]+?): [^|]*? · (\w+) · τ = ([0-9.]+) · param skip ([0-9.]+)%", title)
    assert len(runs) >= 2, title
    reference = tiny.trace(URL_PROMPT, variant=runs[0][1], tau=float(runs[0][2]))
    enc = tiny.encode([URL_PROMPT])
    for label, variant, tau, skip in runs[1:]:
        if variant == "dense":
            continue
        want = tiny.tau_for_param_skip(enc.input_ids, enc.attention_mask, variant, round(reference.param_skip, 6))[0]
        assert float(tau) == pytest.approx(want, abs=1e-3), (label, tau, want)
        assert float(skip) == pytest.approx(100 * tiny.trace(URL_PROMPT, variant=variant, tau=want).param_skip,
                                            abs=0.06), label
    assert tools.eval(NO_EXCEPTION_JS)
    # the comparison's charts (stacked maps, flip map with its named colour bar, legends on the right) drawn once
    tools.wait_for("[...document.querySelectorAll('.js-plotly-plot')].filter(d => d._fullLayout).length >= 5",
                   timeout=120, what="Compare's charts")
    time.sleep(1.0)
    pushed = tools.eval(PUSHED_MARGINS_JS)
    assert not pushed, "\n".join(pushed)
