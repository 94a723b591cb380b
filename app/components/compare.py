"""Choosing the runs to compare (presets or custom) and tabulating them."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import pandas as pd
import streamlit as st

from hero_core import RoutingTrace
from hero_core.checkpoint import bundled_names
from hero_core.config import INFERENCE_VARIANTS

from .runtime import RunSpec, load_model, matched_tau
from .settings import PRECISIONS, Settings, checkpoint_options

PRESETS = ("variants", "checkpoints", "precision", "custom")
PRESET_LABELS = MappingProxyType({"variants": "Variants (same checkpoint)",
                                  "checkpoints": "Checkpoints (e.g. hero vs local)",
                                  "precision": "Precision (full vs NF4)", "custom": "Custom"})
DEFAULT_VARIANTS = ("hero", "no_history", "no_memread")
MAX_RUNS = 4


def default_checkpoints() -> list[str]:
    names = bundled_names()
    for target in ("10", "25", "40"):
        pair = [f"hero-{target}", f"local-{target}"]
        if all(n in names for n in pair):
            return pair
    return names[:2]


def _trained_variant(run_model) -> str:
    return load_model(run_model).config.variant


def _unique(labels: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return out


def build_runs(settings: Settings, prompt: str, chat: bool, *, prefix: str) -> list[RunSpec]:
    """Widgets that pick 2-4 runs; returns them (first = reference)."""
    preset = st.radio("Compare", PRESETS, format_func=PRESET_LABELS.get, horizontal=True, key=f"{prefix}_preset")
    runs: list[RunSpec] = []
    if preset == "variants":
        variants = st.multiselect("Variants", INFERENCE_VARIANTS, default=list(DEFAULT_VARIANTS),
                                  key=f"{prefix}_variants", max_selections=MAX_RUNS)
        runs = [RunSpec.from_settings(settings, prompt, chat, variant=v, label=v) for v in variants]
    elif preset == "checkpoints":
        if settings.model.tiny:
            st.info("The tiny test model has a single random router: comparing checkpoints needs the real "
                    "backbone (unset HERO_LENS_TINY).")
            return []
        options = bundled_names()
        if len(options) < 2:
            st.info("Comparing checkpoints needs at least two bundled checkpoints (hero-10, local-10, …); "
                    f"available: {', '.join(options) or 'none yet'}. Run `make checkpoints` to train them.")
            return []
        chosen = st.multiselect("Checkpoints", options, default=default_checkpoints(), key=f"{prefix}_checkpoints",
                                max_selections=MAX_RUNS)
        st.caption("Each checkpoint runs as the variant it was trained as (hero-* as hero, local-* as no_history).")
        for name in chosen:
            model = settings.with_model(checkpoint=name).model
            # each at its own trained tau (the sidebar's tau belongs to the sidebar's checkpoint)
            runs.append(RunSpec.from_settings(settings, prompt, chat, model=model, variant=_trained_variant(model),
                                              tau=load_model(model).config.tau, label=name))
    elif preset == "precision":
        for precision in PRECISIONS:
            model = settings.with_model(precision=precision).model
            runs.append(RunSpec.from_settings(settings, prompt, chat, model=model,
                                              label=f"{settings.variant} · {precision}"))
        st.caption("Every run uses the sidebar's checkpoint and variant; quality is against the full-precision "
                   "dense model. Gates near τ may flip under bf16 or 4-bit rounding: the margins tell.")
    else:
        n = st.number_input("Runs", 2, MAX_RUNS, 2, key=f"{prefix}_n_runs")
        options = checkpoint_options(settings.model.tiny)
        options = [o for o in options if o in bundled_names() or o == "default"]
        for i in range(int(n)):
            cols = st.columns(3)
            checkpoint = cols[0].selectbox(f"Run {i + 1} checkpoint", options, key=f"{prefix}_ckpt_{i}")
            precision = cols[1].selectbox(f"Run {i + 1} precision", list(PRECISIONS), key=f"{prefix}_prec_{i}")
            variant = cols[2].selectbox(f"Run {i + 1} variant", INFERENCE_VARIANTS, key=f"{prefix}_var_{i}",
                                        index=INFERENCE_VARIANTS.index(DEFAULT_VARIANTS[i % 3]))
            model = settings.with_model(checkpoint=checkpoint, precision=precision).model
            runs.append(RunSpec.from_settings(settings, prompt, chat, model=model, variant=variant,
                                              label=f"{checkpoint} · {precision} · {variant}"))
    labels = _unique([r.label for r in runs])
    return [replace(r, label=label) for r, label in zip(runs, labels, strict=True)]


def match_compute(runs: list[RunSpec], reference: RoutingTrace) -> list[RunSpec]:
    """Every run after the first at the tau that realises the first run's param skip on this prompt.

    Why: at one shared tau a router whose gates sit higher skips less, so its better quality is mostly the extra
    FFNs it ran (at tau = 0.62 no_history skipped 4.7 % against hero's 31 %). Dense runs stay dense."""
    out = [runs[0]]
    for run in runs[1:]:
        out.append(run if run.variant == "dense" else replace(run, tau=matched_tau(run, reference.param_skip)))
    return out


def run_table(traces: list[RoutingTrace], qualities: list[dict], labels: list[str]) -> pd.DataFrame:
    """One row per run: its tau, compute, quality against dense, and decision flips against the first run."""
    rows = []
    ref = traces[0]
    for trace, quality, label in zip(traces, qualities, labels, strict=True):
        s = trace.summary()
        rows.append({"run": label, "τ": trace.tau, "param skip %": 100 * s["param_skip"],
                     "net param skip %": 100 * s["net_param_skip"],
                     "FLOPs saved %": 100 * s["flop_share_saved"], "FFNs / token": s["ffn_executed_per_token"],
                     "NLL": quality["mean_nll"], "ΔNLL vs dense": quality["mean_nll"] - quality["mean_nll_dense"],
                     "KL vs dense": quality["mean_kl"], "top-1 agreement %": 100 * quality["top1_agreement"],
                     "flips vs run 1 %": 100 * float((trace.executed != ref.executed).mean())})
    return pd.DataFrame(rows).round(4)
