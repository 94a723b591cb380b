"""Choosing the runs to compare (presets or custom) and tabulating them."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from types import MappingProxyType

import pandas as pd
import streamlit as st

from hero_core import RoutingTrace
from hero_core.analysis.spans import first_token_lift
from hero_core.eval.twins import twin_name
from hero_core.method.checkpoint import bundled_names, seed_names
from hero_core.method.config import INFERENCE_VARIANTS
from hero_core.method.model import DEFAULT_CHECKPOINT as BUNDLED_DEFAULT
from hero_core.method.side_by_side import each_side_by_side, passes_at_once

from .columns import PERCENT_1, number_columns
from .runtime import RunSpec, cached_model, equal_compute_tau, get_trace, load_model
from .settings import DEFAULT_CHOICE, PRECISIONS, Settings, checkpoint_options
from .verdict import run_kind
from .widgets import BIND

# Checkpoints first: the page opens on a fair pair (the default beside its local twin, at matched compute) where
# the install has trained checkpoints (the tiny test model has one random router: variants there).
PRESETS = ("checkpoints", "variants", "precision", "custom")
# Short labels: the chosen preset's label is what the link carries (?compare_preset=Checkpoints).
PRESET_LABELS = MappingProxyType({"variants": "Variants", "checkpoints": "Checkpoints", "precision": "Precision",
                                  "custom": "Custom"})
PRESET_HELP = ("Variants: the sidebar's checkpoint run as other variants, switched at inference time (an "
               "ablation of that router, not a router trained so). Checkpoints: trained routers side by side, "
               "e.g. hero-10 against the trained local router local-10. Precision: full vs bf16 vs NF4. "
               "Custom: any mix.")
RUN_COLUMNS = MappingProxyType(number_columns({
    "τ": ("τ", "%.3f"), "FFNs / token": ("FFNs / token", "%.1f"), "NLL": ("NLL", "%.3f"),
    "ΔNLL vs dense": ("ΔNLL vs dense", "%+.3f"), "KL vs dense": ("KL vs dense", "%.4f"),
    "param skip %": ("param skip", PERCENT_1), "net param skip %": ("net param skip", PERCENT_1),
    "w/o token 0 %": ("w/o token 0", PERCENT_1,
                      "Param skip over every token but the first (the attention sink, which skips most FFNs)."),
    "FLOPs saved net %": ("FLOPs saved net", PERCENT_1,
                          "Share of a dense token's FLOPs not spent, after the router and the adapters are charged "
                          "(0 or below: this run costs more than dense)."),
    "top-1 agreement %": ("top-1 agreement", PERCENT_1),
    "flips vs run 1 %": ("flips vs run 1", PERCENT_1),
}))
DEFAULT_VARIANTS = ("hero", "no_history", "no_memread")
MAX_RUNS = 6


def comparable_checkpoints() -> list[str]:
    """Every bundled checkpoint a run can use: the main list, then the extra training seeds (``seeds/…``), which the
    seeds question compares against each other and their first seed."""
    return bundled_names() + seed_names()


def custom_checkpoints(tiny: bool) -> list[str]:
    """The Custom preset's checkpoint choices: "default", then every bundled checkpoint and seed run, in the
    sidebar's order (a directory of your own is the sidebar's alone)."""
    comparable = set(comparable_checkpoints())
    return [o for o in checkpoint_options(tiny) if o in comparable or o == DEFAULT_CHOICE]


def default_checkpoints() -> list[str]:
    """The default checkpoint beside its local twin (hero-10-r7 / local-10), else the first hero-N / local-N pair."""
    names = bundled_names()
    pair = [BUNDLED_DEFAULT, twin_name(BUNDLED_DEFAULT)]
    if all(n in names for n in pair):
        return pair
    for target in ("10", "25", "40"):
        pair = [f"hero-{target}", f"local-{target}"]
        if all(n in names for n in pair):
            return pair
    return names[:2]


def _trained(run_model) -> tuple[str, str]:
    """(checkpoint name, the variant it was trained as) of a model."""
    hero = load_model(run_model)
    return hero.checkpoint_name, hero.config.variant


def _described(run: RunSpec, checkpoint: str, trained: str) -> RunSpec:
    return replace(run, checkpoint_name=checkpoint, trained=trained, kind=run_kind(checkpoint, trained, run.variant))


def _variant_label(variant: str, trained: str) -> str:
    """A variant's label that says whether it is the router as trained or switched at inference time."""
    if variant == "dense" or variant == trained:
        return variant if variant == "dense" else f"{variant} (as trained)"
    return f"{variant} (ablation)"


def _unique(labels: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return out


def build_runs(settings: Settings, prompt: str, chat: bool, *, prefix: str) -> list[RunSpec]:
    """Widgets that pick 1 to MAX_RUNS runs; returns them (first = reference)."""
    # a fair pair first (the default and its local twin) where trained checkpoints are there to pair
    pairable = not settings.model.tiny and len(bundled_names()) >= 2
    preset = st.radio("Compare", PRESETS, format_func=PRESET_LABELS.get, horizontal=True, key=f"{prefix}_preset",
                      index=PRESETS.index("checkpoints" if pairable else "variants"), bind=BIND, help=PRESET_HELP)
    chooser = {"variants": _variant_runs, "checkpoints": _chosen_checkpoint_runs,
               "precision": _precision_runs}.get(preset, _custom_runs)
    runs = chooser(settings, prompt, chat, prefix)
    labels = _unique([r.label for r in runs])
    return [replace(r, label=label) for r, label in zip(runs, labels, strict=True)]


def _variant_runs(settings: Settings, prompt: str, chat: bool, prefix: str) -> list[RunSpec]:
    """The Variants preset: the sidebar's checkpoint run as each chosen variant; the ablations said to be such."""
    variants = st.multiselect("Variants", INFERENCE_VARIANTS, default=list(DEFAULT_VARIANTS),
                              key=f"{prefix}_variants", max_selections=MAX_RUNS, bind=BIND)
    checkpoint, trained = _trained(settings.model)
    runs = [_described(RunSpec.from_settings(settings, prompt, chat, variant=v, label=_variant_label(v, trained)),
                       checkpoint, trained) for v in variants]
    ablations = [v for v in variants if v not in (trained, "dense")]
    if ablations:
        many = len(ablations) > 1
        st.caption(f"**{', '.join(ablations)}** here {'are' if many else 'is'} **inference-time "
                   f"ablation{'s' if many else ''}** of {checkpoint} (trained as {trained}): the same trained "
                   "router with a part switched off, not a router trained without it. The trained local router "
                   "(local-10 …) is under **Checkpoints**.")
    return runs


def _chosen_checkpoint_runs(settings: Settings, prompt: str, chat: bool, prefix: str) -> list[RunSpec]:
    """The Checkpoints preset: trained routers side by side, each as trained; none where there are not two."""
    if settings.model.tiny:
        st.info("The tiny test model has a single random router: comparing checkpoints needs the real "
                "backbone (unset HERO_LENS_TINY).")
        return []
    options = comparable_checkpoints()
    if len(options) < 2:
        st.info("Comparing checkpoints needs at least two bundled checkpoints (hero-10, local-10, …); "
                f"available: {', '.join(options) or 'none yet'}. Run `make checkpoints` to train them.")
        return []
    chosen = st.multiselect("Checkpoints", options, default=default_checkpoints(), key=f"{prefix}_checkpoints",
                            max_selections=MAX_RUNS, bind=BIND)
    st.caption("Each checkpoint runs as the variant it was trained as (hero-* with history, local-* as the "
               "trained local router, no_history), at its own τ.")
    for name in chosen:
        load_model(settings.with_model(checkpoint=name).model)  # with its spinner and a readable error
    return checkpoint_runs(settings, prompt, chat, chosen)


def _precision_runs(settings: Settings, prompt: str, chat: bool, prefix: str) -> list[RunSpec]:
    """The Precision preset: the sidebar's checkpoint and variant at every precision."""
    checkpoint, trained = _trained(settings.model)
    runs = []
    for precision in PRECISIONS:
        model = settings.with_model(precision=precision).model
        runs.append(_described(RunSpec.from_settings(settings, prompt, chat, model=model,
                                                     label=f"{settings.variant} · {precision}"),
                               checkpoint, trained))
    st.caption("Every run uses the sidebar's checkpoint and variant; quality is against the full-precision "
               "dense model. Gates near τ may flip under bf16 or 4-bit rounding: the margins tell.")
    return runs


def _custom_runs(settings: Settings, prompt: str, chat: bool, prefix: str) -> list[RunSpec]:
    """The Custom preset: N runs, each its own checkpoint, precision and variant."""
    n = st.number_input("Runs", 1, MAX_RUNS, 2, key=f"{prefix}_n_runs", bind=BIND)
    options = custom_checkpoints(settings.model.tiny)
    runs = []
    for i in range(int(n)):
        cols = st.columns(3)
        checkpoint = cols[0].selectbox(f"Run {i + 1} checkpoint", options, key=f"{prefix}_ckpt_{i}", bind=BIND)
        precision = cols[1].selectbox(f"Run {i + 1} precision", list(PRECISIONS), key=f"{prefix}_prec_{i}",
                                      bind=BIND)
        variant = cols[2].selectbox(f"Run {i + 1} variant", INFERENCE_VARIANTS, key=f"{prefix}_var_{i}",
                                    index=INFERENCE_VARIANTS.index(DEFAULT_VARIANTS[i % 3]), bind=BIND)
        model = settings.with_model(checkpoint=checkpoint, precision=precision).model
        name, trained = _trained(model)
        suffix = "" if variant in (trained, "dense") else " (ablation)"
        runs.append(_described(RunSpec.from_settings(settings, prompt, chat, model=model, variant=variant,
                                                     label=f"{checkpoint} · {precision} · {variant}{suffix}"),
                               name, trained))
    return runs


def checkpoint_runs(settings: Settings, prompt: str, chat: bool, names: list[str]) -> list[RunSpec]:
    """Each checkpoint of ``names`` as the variant it was trained as, at its own trained tau (the sidebar's tau
    belongs to the sidebar's checkpoint). Needs no page: the background warm-up builds the same runs."""
    runs = []
    for name in names:
        model = settings.with_model(checkpoint=name).model
        hero = cached_model(model)
        checkpoint, trained = hero.checkpoint_name, hero.config.variant
        runs.append(_described(RunSpec.from_settings(settings, prompt, chat, model=model, variant=trained,
                                                     tau=hero.config.tau, label=f"{name} (trained router)"),
                               checkpoint, trained))
    return runs


def routed_runs(runs: list[RunSpec], *, matched: bool, page: bool = True) -> tuple[list[RunSpec], list[RoutingTrace]]:
    """Every run traced; with ``matched``, every run after the first at the tau that realises the first run's param
    skip on this prompt (dense runs stay dense). Returns the runs (at the taus they ran at) and their traces.

    Why match: at one shared tau a router whose gates sit higher skips less, so its better quality is mostly the
    extra FFNs it ran (at tau = 0.62 no_history skipped 4.7 % against hero's 31 %). The runs after the first are
    independent of each other (each one's tau search, then its trace), so they run side by side on the cores torch
    leaves free (hero_core.method.side_by_side): on two cores a Compare of four checkpoints spends about half the time
    it did one after another. ``page``: with the page's spinners (the workers themselves show none)."""
    for run in runs:  # on this thread: the loads' spinners and readable errors come from here
        (load_model if page else cached_model)(run.model)
    reference = get_trace(runs[0], page=page)

    def route(run: RunSpec) -> tuple[RunSpec, RoutingTrace]:
        if matched and run.variant != "dense":
            run = replace(run, tau=equal_compute_tau(run, reference.param_skip, page=False))
        return run, get_trace(run, page=False)

    at_once = passes_at_once(cached_model(runs[0].model).device)
    with st.spinner("Matching compute and routing the runs …" if matched else "Routing the runs …") if page \
            else nullcontext():
        rest = each_side_by_side(route, runs[1:], at_once=at_once)
    return [runs[0], *(run for run, _ in rest)], [reference, *(trace for _, trace in rest)]


def run_table(traces: list[RoutingTrace], qualities: list[dict], labels: list[str],
              kinds: list[str] | None = None) -> pd.DataFrame:
    """One row per run: its tau, compute, quality against dense, and decision flips against the first run (numbers
    unrounded beyond 4 decimals; the page formats them through RUN_COLUMNS)."""
    rows = []
    ref = traces[0]
    for trace, quality, label in zip(traces, qualities, labels, strict=True):
        s = trace.summary()
        lift = first_token_lift(trace)
        rows.append({"run": label, "variant": trace.variant, "τ": trace.tau, "param skip %": 100 * s["param_skip"],
                     "w/o token 0 %": 100 * lift[0] if lift else float("nan"),
                     "net param skip %": 100 * s["net_param_skip"],
                     "FLOPs saved net %": 100 * s["flop_share_saved"], "FFNs / token": s["ffn_executed_per_token"],
                     "NLL": quality["mean_nll"], "ΔNLL vs dense": quality["mean_nll"] - quality["mean_nll_dense"],
                     "KL vs dense": quality["mean_kl"], "top-1 agreement %": 100 * quality["top1_agreement"],
                     "flips vs run 1 %": 100 * float((trace.executed != ref.executed).mean())})
    table = pd.DataFrame(rows).round(4)
    if kinds is not None:
        table["what it is"] = kinds
    # compute and quality first, so the comparison fits a 1,400 px window; the details after
    first = ["run", "FLOPs saved net %", "param skip %", "ΔNLL vs dense", "KL vs dense", "top-1 agreement %",
             "flips vs run 1 %", "τ"]
    return table[first + [c for c in table.columns if c not in first]]
