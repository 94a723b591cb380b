"""The Data set page's machinery: where the prompts come from, which runs, the resumable cached loop, and
opening one item in Route explorer.

Each item is one ``st.cache_data`` call keyed on its text and the runs, so a rerun (or a resumed run after
Cancel) takes finished items from the cache and only routes the rest. The loop itself lives in
:mod:`hero_core.eval.sweep.run`; this module only drives it one item at a time so the page can show progress.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from types import MappingProxyType

import streamlit as st

from hero_core.eval.sweep.prompt_sets import Item, bundled_items, read_prompts
from hero_core.eval.sweep.run import SweepResult, SweepRun, run_item
from hero_core.method.checkpoint import bundled_names
from hero_core.method.config import INFERENCE_VARIANTS

from . import sidebar_keys
from .columns import FRACTION_AS_PERCENT, number_column, number_columns
from .compare import default_checkpoints
from .runtime import cached_model, load_model
from .settings import ModelSpec, Settings, tiny_mode
from .widgets import SHARED_CELL, SHARED_CHAT, SHARED_PROMPT

SET_LABELS = {"reasoning": "Reasoning (generated problems, held out)", "code": "Code (Python source, held out)",
              "chat": "Chat (the dense model's own replies, held out)", "humaneval": "HumanEval prompts"}
OPEN_FLAG = "dataset_open_explorer"
# The run settings live in the URL, written by hand (like ?set= and ?n=) and not bound to the widgets: a bound
# parameter makes st.switch_page raise ("cannot clear query parameters … bound to widgets"), and Open → switches.
URL_SETTINGS = ("runs", "max_tokens", "set_chat", "match")  # set_chat: ?chat= is the pages' shared toggle
MAX_DATASET_RUNS = 4
# Human headers and percentages, as on the other pages (the tables once showed snake_case and fractions).
QUALITY_COLUMNS = MappingProxyType({
    "matched_to": st.column_config.TextColumn("matched to", help="The run whose param skip this one was set to."),
    **number_columns({
        "n_items": ("items",), "n_tokens": ("tokens",), "param_skip": ("param skip", FRACTION_AS_PERCENT),
        "param_skip_excluding_first_token": (
            "param skip w/o token 0", FRACTION_AS_PERCENT,
            "Over every token but each item's first (the attention sink, which skips most FFNs and lifts short "
            "prompts' figure)."),
        "ffn_per_token": ("FFNs / token", "%.1f"), "perplexity_ratio": ("ppl ratio to dense", "%.3f"),
        "ratio_low": ("95 % CI low", "%.3f"), "ratio_high": ("95 % CI high", "%.3f"),
        "mean_kl": ("KL to dense", "%.4f"), "top1_agreement": ("top-1 agreement", FRACTION_AS_PERCENT),
    }),
})
MATCHED_COLUMNS = MappingProxyType({
    **{name: QUALITY_COLUMNS[name] for name in ("n_items", "param_skip", "param_skip_excluding_first_token",
                                                 "ratio_low", "ratio_high")},
    **number_columns({"reference_param_skip": ("reference's param skip", FRACTION_AS_PERCENT),
                      "reference_param_skip_excluding_first_token": ("reference's w/o token 0", FRACTION_AS_PERCENT),
                      "ratio_vs_reference": ("ppl ratio vs reference", "%.3f")}),
})


@dataclass(frozen=True)
class AppRun:
    """One run of the data set: a label, the model to load, the variant and the tau it runs at."""

    label: str
    model: ModelSpec
    variant: str
    tau: float

    def key(self) -> AppRun:
        """The run as the item cache keys on it (the model's canonical spec)."""
        return replace(self, model=self.model.canonical())


@st.cache_data(show_spinner=False, max_entries=32)
def _bundled(name: str, n: int, spec: ModelSpec) -> list[Item]:
    hero = cached_model(spec) if name == "chat" else None  # chat texts are the dense model's replies
    return bundled_items(name, n, hero=hero)


def bundled(name: str, n: int, spec: ModelSpec) -> list[Item]:
    if name == "chat":
        load_model(spec)
    with st.spinner(f"Preparing {n} {name} prompts …"):
        return _bundled(name, int(n), spec.canonical())


@st.cache_data(show_spinner=False, max_entries=16)
def _uploaded(data: bytes, name: str) -> list[Item]:
    return read_prompts(data, name)


def uploaded(files) -> list[Item]:
    """Prompts of every uploaded file, in order (ids prefixed by the file name when several are given)."""
    items: list[Item] = []
    for f in files:
        found = _uploaded(f.getvalue(), f.name)
        items += [Item(f"{f.name}:{it.id}", it.text, it.domain) for it in found] if len(files) > 1 else found
    return items


def restore_settings(prefix: str, run_options: list[str]) -> None:
    """Seed the run settings from a link, once per session (values the page cannot use are left out)."""
    if st.session_state.get(f"{prefix}_url_read"):
        return
    st.session_state[f"{prefix}_url_read"] = True
    params = st.query_params
    runs = [r for r in params.get("runs", "").split(",") if r in run_options][:MAX_DATASET_RUNS]
    if runs:
        st.session_state[runs_key(prefix)] = list(dict.fromkeys(runs))
    if params.get("max_tokens", "").isdigit() and 16 <= int(params["max_tokens"]) <= 2048:
        st.session_state[f"{prefix}_max_tokens"] = int(params["max_tokens"])
    if params.get("set_chat") in ("0", "1"):
        st.session_state[f"{prefix}_chat"] = params["set_chat"] == "1"
    if params.get("match") in ("0", "1"):
        st.session_state[f"{prefix}_match"] = params["match"] == "1"


def write_settings(values: dict[str, str], defaults: dict[str, str]) -> None:
    """Keep the run settings in the address bar: a value differing from its default is written, else removed."""
    for name in URL_SETTINGS:
        if values.get(name, defaults.get(name)) != defaults.get(name):
            if st.query_params.get(name) != values[name]:
                st.query_params[name] = values[name]
        elif name in st.query_params:
            del st.query_params[name]


def initial(key: str, value) -> dict:
    """A widget's starting value, unless the session (or a link) already holds one: both would make Streamlit warn."""
    return {} if key in st.session_state else {"value": value}


def runs_key(prefix: str) -> str:
    return f"{prefix}_variants" if _variants_only() else f"{prefix}_checkpoints"


def _variants_only() -> bool:
    return tiny_mode() or len(bundled_names()) < 2


def run_options() -> tuple[list[str], list[str]]:
    """(what can be chosen, the default choice): variants of the one model in test mode, else bundled checkpoints."""
    if _variants_only():
        return list(INFERENCE_VARIANTS), ["hero", "no_history"]
    return bundled_names(), default_checkpoints()


def pick_runs(settings: Settings, *, prefix: str) -> list[AppRun]:
    """Checkpoints to run (each as its trained variant at its own tau); variants of the one model in test mode."""
    options, default = run_options()
    key = runs_key(prefix)
    start = {} if key in st.session_state else {"default": default}
    if _variants_only():
        variants = st.multiselect("Runs (variants of the sidebar's checkpoint)", options, key=key,
                                  max_selections=MAX_DATASET_RUNS, **start)
        return [AppRun(v, settings.model, v, settings.tau) for v in variants]
    chosen = st.multiselect("Checkpoints", options, key=key, max_selections=MAX_DATASET_RUNS, **start,
                            help="Each runs as the variant it was trained as, at its own τ. The first is the "
                                 "reference for matched compute.")
    runs = []
    for name in chosen:
        spec = settings.with_model(checkpoint=name).model
        config = load_model(spec).config
        runs.append(AppRun(name, spec, config.variant, config.tau))
    return runs


@st.cache_data(show_spinner=False, max_entries=20_000)
def _item_rows(runs: tuple[AppRun, ...], item: tuple, index: int, max_tokens: int, chat: bool, matched: bool) -> dict:
    sweep_runs = [SweepRun(run.label, cached_model(run.model), run.variant, run.tau) for run in runs]
    return run_item(sweep_runs, Item(*item), index, max_tokens=max_tokens, chat_template=chat, match_compute=matched)


def signature(runs: list[AppRun], items: list[Item], *options) -> str:
    digest = hashlib.sha1(repr(([r.key() for r in runs], options)).encode())
    for it in items:
        digest.update(repr((it.id, it.text, it.domain)).encode())
    return digest.hexdigest()[:16]


def _cancel(prefix: str) -> None:
    st.session_state[f"{prefix}_job"] = None


def run_dataset(runs: list[AppRun], items: list[Item], *, max_tokens: int, chat: bool, matched: bool,
                prefix: str) -> SweepResult | None:
    """Run / Cancel buttons and the progress bar; returns the result of the items done so far (None: none).

    Cancel stops at the next item (Streamlit interrupts the script on the click); Run again resumes, taking
    the finished items from the cache."""
    for run in {r.model for r in runs}:
        load_model(run)
    sig = signature(runs, items, max_tokens, chat, matched)
    done_by_job = st.session_state.setdefault(f"{prefix}_done", {})
    done = done_by_job.get(sig, 0)
    n = len(items)
    left, right, _ = st.columns([1, 1, 4])
    if left.button("Run" if done == 0 else ("Run again" if done == n else "Resume"), type="primary",
                   key=f"{prefix}_run"):
        st.session_state[f"{prefix}_job"] = sig
    active = st.session_state.get(f"{prefix}_job") == sig
    if active:
        right.button("Cancel", key=f"{prefix}_cancel", on_click=_cancel, args=(prefix,))
    keys = tuple(r.key() for r in runs)
    todo = range(n) if active else range(min(done, n))
    bar = st.progress(done / n, text=f"{done} / {n} items") if active else None
    parts = []
    for i in todo:
        it = items[i]
        parts.append(_item_rows(keys, (it.id, it.text, it.domain), i, max_tokens, chat, matched))
        done_by_job[sig] = max(done_by_job.get(sig, 0), i + 1)
        if bar is not None:
            bar.progress((i + 1) / n, text=f"{i + 1} / {n} items")
    if active:
        st.session_state[f"{prefix}_job"] = None
        # redraw at once: the buttons drawn before the run ("Run", "Cancel") would otherwise stay as they were;
        # the finished items come back from the cache
        st.rerun()
    done = done_by_job.get(sig, 0)
    if done == n:
        # the finished run keeps its full bar: the rerun above removed the one drawn while it ran
        st.progress(1.0, text=f"{n} / {n} items · done")
    if 0 < done < n and not active:
        st.info(f"Stopped after {done} of {n} items: the results below cover those. **Resume** continues.")
    if not parts:
        return None
    return SweepResult.from_parts(parts, {"runs": [r.label for r in runs], "n_items": n, "n_done": len(parts)})


def open_in_explorer(text: str, run: AppRun, chat: bool) -> None:
    """Callback: put the item's prompt and its run's checkpoint, variant and tau into the shared state (and so
    the URL); the page then switches to Route explorer."""
    for key in (SHARED_PROMPT, "explorer_prompt"):
        st.session_state[key] = text
    for key in (SHARED_CHAT, "explorer_chat"):
        st.session_state[key] = chat
    st.session_state.pop(SHARED_CELL, None)
    if not run.model.tiny:
        st.session_state[sidebar_keys.CHECKPOINT] = run.model.checkpoint
        st.session_state[sidebar_keys.TAU_ORIGIN] = (run.model.backbone, run.model.checkpoint)
    st.session_state[sidebar_keys.VARIANT] = run.variant
    st.session_state[sidebar_keys.TAU] = float(run.tau)
    st.session_state[OPEN_FLAG] = True


def _open_selected(table_key: str, rows: list[tuple[str, AppRun]], chat: bool) -> None:
    selection = st.session_state.get(table_key)
    try:
        picked = selection["selection"]["rows"]
    except (KeyError, TypeError):
        return
    if picked and 0 <= picked[0] < len(rows):
        open_in_explorer(*rows[picked[0]], chat)


def item_table(result: SweepResult, runs: list[AppRun], *, chat: bool, prefix: str) -> None:
    """The sortable per-item table; selecting a row (or the picker below it) opens the item in Route explorer."""
    by_label = {r.label: r for r in runs}
    own = result.items[result.items.matched_to == ""].reset_index(drop=True)
    view = own[["item", "id", "domain", "run", "n_tokens", "param_skip", "param_skip_excluding_first_token",
                "ffn_per_token", "perplexity_ratio", "mean_kl", "top1_agreement", "prompt"]].copy()
    view["prompt"] = view["prompt"].str.slice(0, 120)
    rows = [(text, by_label[run]) for text, run in zip(own.prompt, own.run, strict=True)]
    table_key = f"{prefix}_table"
    st.dataframe(view, hide_index=True, key=table_key, on_select=lambda: _open_selected(table_key, rows, chat),
                 selection_mode="single-row",
                 column_config={**QUALITY_COLUMNS, "perplexity_ratio": number_column("ppl ratio", "%.3f")})
    cols = st.columns([4, 1], vertical_alignment="bottom")
    choice = cols[0].selectbox("Open an item in Route explorer", range(len(rows)), key=f"{prefix}_pick",
                               format_func=lambda i: f"item {own.item[i]} · {own.run[i]} · {own.prompt[i][:60]!r}")
    cols[1].button("Open →", key=f"{prefix}_open", on_click=_open_picked, args=(f"{prefix}_pick", rows, chat),
                   disabled=not rows or choice is None)


def _open_picked(pick_key: str, rows: list[tuple[str, AppRun]], chat: bool) -> None:
    """Callback: open the row chosen in the picker at click time (not the one shown when the button was drawn)."""
    index = st.session_state.get(pick_key)
    if isinstance(index, int) and 0 <= index < len(rows):
        open_in_explorer(*rows[index], chat)
