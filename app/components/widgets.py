"""Widgets shared by the pages: the prompt box, the clickable skip map, token and block pickers.

State shared across pages lives under non-widget keys (``shared_prompt``, ``shared_chat``,
``shared_cell``): Streamlit drops a widget's state when its page is not shown, so each page's widgets
are re-seeded from these when they reappear.
"""

from __future__ import annotations

import hashlib
from functools import partial
from types import MappingProxyType
from typing import Any

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from hero_core import RoutingTrace
from hero_core.analysis.spans import first_token_lift, net_cost_words
from hero_core.viz.axes import MAX_WINDOW
from hero_core.viz.figures import compute_legend_html, skip_heatmap, skip_overview, token_compute_html
from hero_core.words.labels import token_label

from .charts import show_chart
from .link_prompt import link_note

EXAMPLES = MappingProxyType({
    "reasoning": ("Tom has 3 boxes with 12 apples each. He gives away 7 apples and eats 2. "
                  "How many apples are left? Let's think step by step: 3 * 12 = 36, 36 - 7 = 29, 29 - 2 = 27. "
                  "So the answer is 27."),
    "code": ("def fibonacci(n: int) -> int:\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
             "    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n"),
    "chat": ("Hi! I'm planning a weekend trip to the mountains. Could you suggest three things "
             "I should pack, and explain briefly why each one matters?"),
})
DEFAULT_EXAMPLE = "reasoning"
# Generate's start: the default example's question, without the worked answer the example carries
QUESTION_EXAMPLE = "Tom has 3 boxes with 12 apples each. He gives away 7 apples and eats 2. How many apples are left?"
SHARED_PROMPT = "shared_prompt"
SHARED_CHAT = "shared_chat"
SHARED_CELL = "shared_cell"  # {"token": t, "block": j (0-based)}
MAX_PROMPT_CHARS = 100_000
BIND = "query-params"  # a page control bound to the URL: Streamlit restores and writes it (its key names it)


def _seed_shared() -> None:
    # a prompt named by the link is already here (link_view.restore_from_url, before the page ran)
    st.session_state.setdefault(SHARED_PROMPT, EXAMPLES[DEFAULT_EXAMPLE])
    st.session_state.setdefault(SHARED_CHAT, False)


def _sync_prompt(prefix: str) -> None:
    st.session_state[SHARED_PROMPT] = st.session_state[f"{prefix}_prompt"]


def _sync_chat(prefix: str) -> None:
    st.session_state[SHARED_CHAT] = st.session_state[f"{prefix}_chat"]


def _use_example(prefix: str) -> None:
    choice = st.session_state[f"{prefix}_example"]
    if choice in EXAMPLES:
        st.session_state[f"{prefix}_prompt"] = EXAMPLES[choice]
        st.session_state[SHARED_PROMPT] = EXAMPLES[choice]
    st.session_state[f"{prefix}_example"] = "—"


def prompt_input(prefix: str, *, label: str = "Prompt", height: int = 110,
                 chat_default: bool | None = None, instead_of_default: str | None = None,
                 route_button: bool = True) -> tuple[str, bool]:
    """The prompt box with example prompts and the chat-template toggle; the prompt is shared across pages.

    The chat toggle is shared too, unless ``chat_default`` is given: then it is this page's own, starts there and
    lives in the URL (Generate: a chat model answers a question only inside its template). ``instead_of_default``
    is the page's own start while the shared prompt is still the app's default example (Generate: a question
    without its worked answer, so the model has something to answer)."""
    _seed_shared()
    key, chat_key, example_key = f"{prefix}_prompt", f"{prefix}_chat", f"{prefix}_example"
    if key in st.session_state:
        text = st.session_state[key]
    else:
        shared = st.session_state[SHARED_PROMPT]
        is_default = shared == EXAMPLES[DEFAULT_EXAMPLE]
        text = instead_of_default if instead_of_default and is_default else shared
    # Restated on every run, not only the first: the box's element then carries its text each time (set_value).
    # Seeded once, the text lived only in the browser's widget state, and the browser drops a page's widget states
    # when it clears the page for what it takes as a page change while the server keeps them (streamlit#8425,
    # #8830); the box came back at its empty default and the next click sent "" as the prompt (Why's switch to
    # integrated gradients: "the prompt is empty"). A text being typed is not overwritten: the browser keeps an
    # edit in progress and sends it when the box loses focus.
    st.session_state[key] = text
    shared_chat = chat_default is None
    if shared_chat:  # the shared toggle likewise (Generate's own is bound to the URL, which restores it)
        st.session_state[chat_key] = st.session_state.get(chat_key, st.session_state[SHARED_CHAT])
    st.session_state.setdefault(example_key, "—")
    left, mid, right = st.columns([5, 2, 2], vertical_alignment="bottom")
    # No max_chars: its live counter sat over the last line of a long prompt; an over-long prompt is cut below.
    prompt = left.text_area(label, key=key, height=height, on_change=_sync_prompt, args=(prefix,),
                            help="Press Ctrl+Enter (or click outside) to route it.")
    mid.selectbox("Example prompts", ["—", *EXAMPLES], key=example_key, on_change=_use_example, args=(prefix,))
    # The box commits its text when it loses focus, so this click routes what was typed (Ctrl+Enter does too).
    if route_button:  # a page with its own action button (Generate) leaves it out
        mid.button("Route this prompt", key=f"{prefix}_route", type="primary",
                   help="Routes the text in the box (Ctrl+Enter in the box does the same).")
    chat_help = "Wrap the prompt as a user turn in the model's chat template."
    if shared_chat:
        chat = right.toggle("Chat template", key=chat_key, on_change=_sync_chat, args=(prefix,), help=chat_help)
    else:
        chat = right.toggle("Chat template", value=chat_default, key=chat_key, bind=BIND, help=chat_help)
    if len(prompt) > MAX_PROMPT_CHARS:
        st.warning(f"The prompt has {len(prompt):,} characters; only its first {MAX_PROMPT_CHARS:,} are used.")
        prompt = prompt[:MAX_PROMPT_CHARS]
    note = link_note(prompt)
    if note:
        st.caption(note)
    return prompt, chat


def show_notices(trace: RoutingTrace) -> None:
    for notice in trace.notices:
        where = (" Raise **Max prompt tokens** under *Advanced* in the sidebar (up to 2,048) to route more of it."
                 if "truncated" in notice else "")
        st.warning(f"Notice: {notice}.{where}")


def show_compute_metrics(*, param_skip: float, net_param_skip: float, flop_share_saved: float,
                         ffn_per_token: float, n_routed: int, n_tokens: int, tokens_label: str = "Tokens",
                         param_skip_help: str | None = None, flops_saved_help: str | None = None) -> list:
    """One row of five metrics: FLOPs saved net (first: what routing really saves), the paper's param skip beside it,
    net param skip, FFNs per token (of ``n_routed``) and the tokens counted. Returns the columns, so a page can write
    under a figure (column 1 holds the param skip)."""
    cols = st.columns(5)
    cols[0].metric("FLOPs saved, net", f"{flop_share_saved:.1%}", help=flops_saved_help)
    cols[1].metric("Param skip (paper)", f"{param_skip:.1%}", help=param_skip_help)
    cols[2].metric("Net param skip", f"{net_param_skip:.1%}", help="Param skip minus the adapters and "
                   "router work actually done.")
    cols[3].metric("FFNs per token", f"{ffn_per_token:.1f} / {n_routed}")
    cols[4].metric(tokens_label, f"{n_tokens}")
    return cols


def show_metrics(trace: RoutingTrace) -> None:
    s = trace.summary()
    cols = show_compute_metrics(
        param_skip=s["param_skip"], net_param_skip=s["net_param_skip"], flop_share_saved=s["flop_share_saved"],
        ffn_per_token=s["ffn_executed_per_token"], n_routed=trace.n_routed, n_tokens=trace.n_tokens,
        param_skip_help="The paper's metric: parameters not used per token (skipped FFNs), over all parameters, "
                        "averaged over tokens.",
        flops_saved_help="Share of the dense model's FLOPs not spent, net of adapter, router and memory-read FLOPs.")
    lift = first_token_lift(trace)
    if lift is not None:  # token 0 skips most FFNs: the figure without it, where the figure is shown
        cols[1].caption(f"{lift[0]:.1%} without token 0 (which skipped {lift[1]:.0%} of the skipped FFNs)")
    show_net_cost(s["flop_share_saved"])
    q = trace.quality_summary()
    if q is not None:
        cols = st.columns(5)
        cols[0].metric("Perplexity ratio", f"{q['perplexity_ratio']:.3f}", help="Routed / dense perplexity of "
                       "this prompt's own tokens (1 = unchanged). One prompt is a small sample: see docs/results.md "
                       "for held-out figures with intervals.")
        cols[1].metric("Top-1 agreement", f"{q.get('top1_agreement', float('nan')):.0%}",
                       help="Share of positions where routed and dense predict the same next token.")
        cols[2].metric("KL to dense", f"{q['mean_kl_to_dense']:.4f}", help="Mean KL(dense‖routed), nats/token.")


def show_net_cost(net_saving: float, what: str = "this prompt") -> None:
    """Say, where the skip figures are shown, when routing saved nothing net (FLOPs saved net at or below 0)."""
    words = net_cost_words(net_saving, what)
    if words:
        st.warning(words)


def show_token_compute(trace: RoutingTrace) -> None:
    st.html(token_compute_html(trace.tokens, trace.executed_per_token(), trace.n_routed,
                               n_prompt_tokens=trace.n_prompt_tokens)
            + compute_legend_html(trace.n_routed))


# -- cell selection ----------------------------------------------------------------------------------
def cell_from_selection(selection: Any, n_tokens: int, n_blocks: int) -> tuple[int, int] | None:
    """(token, 0-based block) of the first clicked skip-map point, or None. Pure: tested without Streamlit."""
    try:
        points = selection["selection"]["points"]
    except (KeyError, TypeError):
        return None
    for point in points or []:
        x, y = point.get("x"), point.get("y")
        if x is None or y is None:
            continue
        token, block = int(round(float(x))), int(round(float(y))) - 1
        if 0 <= token < n_tokens and 0 <= block < n_blocks:
            return token, block
    return None


def current_cell(trace: RoutingTrace) -> tuple[int, int]:
    """The shared selected cell, clamped to this trace (default: last token, middle block)."""
    cell = st.session_state.get(SHARED_CELL) or {}
    token = cell.get("token", trace.n_tokens - 1)
    block = cell.get("block", trace.n_routed // 2)
    clamped = min(max(int(token), 0), trace.n_tokens - 1), min(max(int(block), 0), trace.n_routed - 1)
    if cell.get("from_link"):  # a link's cell, used once: beyond this prompt or model, it says so
        if clamped != (token, block):
            st.warning(f"The link could not be restored in full: its cell (token {token}, layer {block}) is beyond "
                       f"this prompt's {trace.n_tokens} tokens × {trace.n_routed} routed layers; showing token "
                       f"{clamped[0]}, layer {clamped[1]}.")
        set_cell(*clamped)
    return clamped


def set_cell(token: int, block: int) -> None:
    st.session_state[SHARED_CELL] = {"token": int(token), "block": int(block)}


CALLBACK_ERROR = "hero_callback_error"


def guarded(callback):
    """Wrap a widget callback so an error in it is shown like any page error (main.py), not as a traceback.

    Streamlit runs callbacks before the script, outside main()'s error handling; the message is kept in
    session state and shown at the top of the next run."""
    def run(*args, **kwargs):
        try:
            callback(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - every error must reach the user as a message
            st.session_state[CALLBACK_ERROR] = f"{type(err).__name__}: {err}"
    return run


def show_callback_error() -> None:
    message = st.session_state.pop(CALLBACK_ERROR, None)
    if message:
        st.error(f"A control could not be applied ({message}); the view was reset to a valid cell.")


def picker_key(trace: RoutingTrace, prefix: str, axis: str) -> str:
    """Widget key of a cell picker, unique to the trace's tokens and blocks.

    A selectbox whose options change under the same key can hand back a stale value (Streamlit matched it
    by its label, and a callback then saw the label string '76: .' instead of an index); a new prompt,
    checkpoint or variant gets a new widget instead, seeded from the shared cell."""
    digest = hashlib.sha1(repr((trace.token_ids, trace.routed_layers)).encode()).hexdigest()[:10]
    return f"{prefix}_{axis}_{digest}"


def _on_map_click(chart_key: str, trace: RoutingTrace, prefix: str) -> None:
    cell = cell_from_selection(st.session_state.get(chart_key), trace.n_tokens, trace.n_routed)
    if cell is None:
        return
    set_cell(*cell)
    st.session_state.setdefault(f"{chart_key}_drawn", {})["in_browser"] = cell  # shown there as the click's point
    # Move this page's pickers to the clicked cell (allowed: callbacks run before the widgets).
    st.session_state[picker_key(trace, prefix, "token")] = cell[0]
    st.session_state[picker_key(trace, prefix, "block")] = cell[1]


DEFAULT_WINDOW = 64  # tokens a long prompt's skip map shows at first (cells ~14 px wide)


def token_window(trace: RoutingTrace, *, prefix: str) -> tuple[int, int] | None:
    """(first, last) token of the skip map's window for a prompt longer than MAX_WINDOW tokens, else None.

    At 512 tokens a full-width map has ~2 px cells and overlapping labels; a window keeps cells legible. It
    follows the selected cell when that moves outside it (a click on another page), and otherwise stays
    where the user put it."""
    T = trace.n_tokens
    if T <= MAX_WINDOW:
        return None
    key, seen_key = picker_key(trace, prefix, "window"), picker_key(trace, prefix, "window_token")
    token = current_cell(trace)[0]
    value = st.session_state.get(key)
    moved = st.session_state.get(seen_key) != token
    if value is None or (moved and not value[0] <= token <= value[1]):
        first = min(max(token - DEFAULT_WINDOW // 2, 0), T - DEFAULT_WINDOW)
        st.session_state[key] = (first, first + DEFAULT_WINDOW - 1)
    st.session_state[seen_key] = token
    first, last = st.slider("Visible tokens", 0, T - 1, key=key,
                            help=f"The prompt has {T} tokens; the skip map shows at most {MAX_WINDOW} at a time so "
                                 "its cells stay readable. Drag the range, or pan the map.")
    if last - first + 1 > MAX_WINDOW:
        last = first + MAX_WINDOW - 1
        st.caption(f"At most {MAX_WINDOW} tokens fit at a readable cell size: showing {first}–{last}.")
    return first, last


def windowed(trace: RoutingTrace, *, prefix: str) -> tuple[int, int] | None:
    """For a long prompt, the token window slider and the overview strip of the whole prompt; returns the
    window (None: the prompt fits), which this page's other token-axis charts then share (:func:`shown_window`)."""
    window = token_window(trace, prefix=prefix)
    if window is not None:
        show_chart(st, skip_overview(trace, window), key=f"{prefix}_overview", config={"displaylogo": False})
    st.session_state[picker_key(trace, prefix, "shown")] = window
    return window


def shown_window(trace: RoutingTrace, prefix: str) -> tuple[int, int] | None:
    """The token window this page's skip map shows for ``trace`` in this run (None: every token)."""
    return st.session_state.get(picker_key(trace, prefix, "shown"))


def clickable_skip_map(trace: RoutingTrace, *, prefix: str, selected: tuple[int, int] | None = None,
                       title: str | None = None) -> go.Figure:
    """The skip map; clicking a cell selects that (token, block) on every page. A long prompt gets a token
    window (a slider) and an overview strip of the whole prompt above the map; the page's other charts along
    the tokens take the same window from :func:`shown_window`."""
    return skip_map_in_window(trace, prefix=prefix, selected=selected, title=title,
                              window=windowed(trace, prefix=prefix))


def skip_map_in_window(trace: RoutingTrace, *, prefix: str, selected: tuple[int, int] | None,
                       title: str | None = None, window: tuple[int, int] | None) -> go.Figure:
    """:func:`clickable_skip_map` with its window already drawn (``window`` from :func:`windowed`)."""
    chart_key = f"{prefix}_map"
    fig = skip_heatmap(trace, selected=_cell_in_figure(chart_key, trace, selected, title, window), title=title,
                       window=window, clickable=True)
    show_chart(st, fig, key=chart_key, selection_mode="points", config={"displaylogo": False},
               on_select=guarded(partial(_on_map_click, chart_key, trace, prefix)))
    return fig


def _cell_in_figure(chart_key: str, trace: RoutingTrace, selected: tuple[int, int] | None, title: str | None,
                    window: tuple[int, int] | None) -> tuple[int, int] | None:
    """The cell the map's figure marks as selected: ``selected``, except right after a click on this very map.

    Streamlit draws a chart whose figure changed from scratch (its identity includes the figure): a click that
    moved the mark in the figure redrew all the map's cells twice, 0.6 s of a click's 0.85 s in Chromium. The
    browser already shows the clicked cell as plotly's selected point, so while the map would otherwise be the same
    figure (same trace, window and title) and the selection is the cell the browser shows, the figure keeps the
    cell it was drawn with, and the chart stays as it is."""
    memory = st.session_state.setdefault(f"{chart_key}_drawn", {})
    drawn_as = (trace.variant, trace.tau, tuple(trace.token_ids), tuple(trace.routed_layers), title, window,
                hash(trace.gate.tobytes()))
    if memory.get("figure") == drawn_as and selected == memory.get("in_browser"):
        return memory.get("cell")
    memory.update(figure=drawn_as, cell=selected, in_browser=selected)
    return selected


def clamp_index(value: Any, n: int, default: int) -> int:
    """``value`` as an index in [0, n), or ``default`` when it is not an integer (never parses a label)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        return min(max(default, 0), n - 1)
    return min(max(int(value), 0), n - 1)


def _cell_picker(trace: RoutingTrace, key: str, axis: int, n: int, label: str, describe) -> int:
    """A selectbox for one coordinate (0 token, 1 block) of the selected cell, kept in sync with the map."""
    default = current_cell(trace)[axis]
    st.session_state[key] = clamp_index(st.session_state.get(key, default), n, default)

    def moved() -> None:
        cell = list(current_cell(trace))
        cell[axis] = clamp_index(st.session_state.get(key), n, cell[axis])
        set_cell(*cell)

    chosen = st.selectbox(label, range(n), key=key, format_func=describe, on_change=guarded(moved))
    return clamp_index(chosen, n, default)


def token_picker(trace: RoutingTrace, *, prefix: str, label: str = "Token") -> int:
    return _cell_picker(trace, picker_key(trace, prefix, "token"), 0, trace.n_tokens, label,
                        lambda t: f"{t}: {token_label(trace.tokens[t], 24)}")


def block_picker(trace: RoutingTrace, *, prefix: str, label: str = "Routed layer") -> int:
    return _cell_picker(trace, picker_key(trace, prefix, "block"), 1, trace.n_routed, label,
                        lambda j: f"L{trace.routed_layers[j]}")  # layers only: one numbering per line
