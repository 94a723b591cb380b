"""Compare's held-out verdict: what the bundled held-out set measured about the runs on the page, at matched compute
with bootstrap intervals, beside the one prompt the page routes.

Why: one prompt gave three metrics pointing different ways (ΔNLL for no_history, KL and top-1 for hero) and no
interval. The verdict comes from ``hero_core/checkpoints/measured.json`` (derived from docs/results.json by
``python -m hero_core.eval.frontier.measured``); nothing is recomputed here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from hero_core.eval.frontier import measured as measured_results
from hero_core.eval.frontier.net_axis import net_curves, run_profiles
from hero_core.eval.study.bundled import load_shipped as load_seeds
from hero_core.eval.twins import bundled_control_caveat, counterpart, counterparts
from hero_core.measures.accounting import ComputeProfile, net_saving_for_param_skip
from hero_core.viz.frontier_figure import frontier_chart
from hero_core.words.ratio_text import ratio_text
from hero_core.words.reference_labels import REFERENCE_LABELS, REFERENCE_NOTES

from .charts import show_chart

# what a trained checkpoint's variant means, in words a label can carry
TRAINED_AS = {"hero": "with history", "no_history": "local router, no history",
              "no_memread": "without the memory read", "no_aux": "without the auxiliary loss",
              "no_pos": "without position"}
# the trained checkpoint that stands for an inference-time ablation of hero-N (same part switched off, but trained so)
TRAINED_COUNTERPART = {"no_history": "local", "no_memread": "no_memread", "no_aux": "no_aux", "no_pos": "no_pos"}


@dataclass(frozen=True)
class Pair:
    reference: str
    other: str
    stands_for: str = ""  # the inference-time ablation this trained pair stands in for ("" when it is the run)


def run_kind(checkpoint: str, trained: str, variant: str) -> str:
    """What a run is: the dense model, a router run as trained, or an inference-time ablation of one."""
    if variant == "dense":
        return "dense model (every FFN, no router)"
    if variant == trained:
        return f"trained router: {checkpoint} as trained ({TRAINED_AS.get(trained, trained)})"
    return f"inference-time ablation: {checkpoint} (trained as {trained}) run as {variant}"


def pairs_for(checkpoints: Sequence[str], variants: Sequence[str], trained: Sequence[str]) -> list[Pair]:
    """The measured pairs that speak to these runs (one per run i: ``checkpoints[i]`` run as ``variants[i]``,
    trained as ``trained[i]``): a hero checkpoint and one it is read against (hero_core.eval.twins.counterparts:
    hero-10 / local-10, hero-10-r4 / local-10 or no_memread-10-r4) directly; an inference-time ablation of a hero
    checkpoint through the checkpoint trained without that part (its trained counterpart)."""
    pairs: list[Pair] = []
    as_trained = [c for c, v, t in zip(checkpoints, variants, trained, strict=True) if v == t]
    for hero in as_trained:
        pairs += [Pair(hero, other) for other in counterparts(hero, as_trained)]
    for checkpoint, variant, was in zip(checkpoints, variants, trained, strict=True):
        other = counterpart(checkpoint, TRAINED_COUNTERPART[variant]) if variant in TRAINED_COUNTERPART else None
        if was == "hero" and other and all((p.reference, p.other) != (checkpoint, other) for p in pairs):
            pairs.append(Pair(checkpoint, other, variant))
    return pairs


def verdict_table(rows: list[dict]) -> pd.DataFrame:
    """The measured rows as a reader wants them: percentages, ratios with their intervals, the verdict."""
    return pd.DataFrame([{"domain": r["domain"], "param skip": f"{r['param_skip']:.1%}",
                          f"{r['reference']} ppl ratio [95 % CI]": ratio_text(r, "reference_"),
                          f"{r['other']} ppl ratio [95 % CI]": ratio_text(r, "other_"),
                          "verdict": f"{r['better']} better" if r["better"] else "no clear difference"}
                         for r in rows])


def render_verdict(pairs: list[Pair], measured: dict | None, *, what: str) -> None:
    """The held-out verdict of every pair (or why there is none), in a bordered box beside the prompt's table."""
    box = st.container(border=True)
    box.markdown("**What the held-out set says** (matched compute, 95 % bootstrap intervals)")
    if measured is not None:
        box.caption(measured_results.matched_method(measured))
    if measured is None:
        box.caption("No measured results ship with this install (hero_core/checkpoints/measured.json; "
                    "`make results` writes it).")
        return
    shown = False
    for pair in pairs:
        rows = measured_results.matched_between(measured, pair.reference, pair.other)
        if not rows:
            continue
        shown = True
        if pair.stands_for:
            box.caption(f"{pair.stands_for} here is an inference-time ablation of {pair.reference}: the held-out set "
                        f"measures the router **trained** that way, {pair.other}, which stands in for it below.")
        box.markdown(measured_results.matched_words(rows))
        if caveat := bundled_control_caveat(pair.other):
            box.warning(caveat)
        box.dataframe(verdict_table(rows), hide_index=True)
    if any(p.other.startswith("local-") for p in pairs):
        render_seeds_answer(box)
    measured_router = next(iter(measured.get("baselines") or []), {}).get("router")
    if measured_router and any(p.reference == measured_router for p in pairs):
        box.markdown(measured_results.baseline_words(measured) + " The frontier with every reference: Learn, "
                     "section 2.")
    if not shown:
        box.caption(f"The held-out set has no matched-compute measurement of {what}: it measures the bundled "
                    "checkpoints against hero-N of the same budget (docs/results.md). This page's figures are one "
                    "prompt: a small sample.")


def render_seeds_answer(where) -> None:
    """The memory question over training seeds (hero_core/checkpoints/seeds.json), or a word that one pair of
    checkpoints is one training run per arm."""
    seeds = load_seeds()
    if seeds is None:
        where.caption("Each checkpoint above is one training run: how far another training seed moves these numbers "
                      "is not measured in this install (`make study`).")
        return
    where.markdown("**Across training seeds** (first training stage of each arm, at "
                   f"{seeds['target_skip']:.0%} param skip): " + seeds["answer"].replace(
                       "**Does history help on this backbone?** ", ""))


def _frontier_figure(curves: dict, domains: list[str], mark: dict[str, float], router: str,
                     base: ComputeProfile | None, max_tokens: int | None) -> None:
    """The frontier at param skip (the paper's axis), or against FLOPs saved net where every run's cost is known: a
    router then pays its router and adapters, a fixed reference its adapters only (over texts of ``max_tokens``, the
    frontier's)."""
    profiles = _net_profiles(tuple((n, c.get("adapters_of")) for n, c in curves.items()), base) if base else {}
    axes = ["param skip (paper)", NET_AXIS] if router in profiles else ["param skip (paper)"]
    axis = st.radio("x axis", axes, horizontal=True, key="baselines_axis",
                    help="FLOPs saved net charges each run what it computes besides the FFNs it keeps: the router "
                         "at every routed block and the adapters of the FFNs it skips.") if len(axes) > 1 else axes[0]
    if axis == NET_AXIS:
        profile, n_routed = profiles[router]
        positions = np.arange(max_tokens)
        mark = {d: net_saving_for_param_skip(skip, profile, n_routed, positions) for d, skip in mark.items()}
        curves = net_curves(curves, domains, max_tokens, profiles)
    show_chart(st, frontier_chart(curves, domains, mark=mark, axis="net" if axis == NET_AXIS else "param"),
               key="baselines_frontier")


def baseline_table(rows: list[dict]) -> pd.DataFrame:
    """One row per domain: the router's perplexity ratio and each reference's at the router's own param skip."""
    table: dict[str, dict] = {}
    for r in rows:
        line = table.setdefault(r["domain"], {"domain": r["domain"], "param skip": f"{r['param_skip']:.1%}",
                                              f"{r['router']} (router)": ratio_text(r, "router_")})
        line[REFERENCE_LABELS[r["reference"]]] = ratio_text(r, "reference_")
    return pd.DataFrame(list(table.values()))


NET_AXIS = "FLOPs saved net"  # the frontier's second x axis: what each run saves with its router charged


@st.cache_data(show_spinner=False, max_entries=4)
def _net_profiles(runs: tuple[tuple[str, str | None], ...], base: ComputeProfile) -> dict:
    """What each run of the measured frontier is charged (``runs``: name and whose adapters it borrowed)."""
    return run_profiles({name: {"adapters_of": adapters} for name, adapters in runs}, base)


def render_baselines(measured: dict | None, base: ComputeProfile | None = None) -> None:
    """The held-out frontier of the default router among the fixed references (static pruning, random, MoD top-k,
    oracle), at matched param skip, with what each reference is and why two of them are not deployable; with
    ``base`` (the loaded model's compute profile) the same frontier can be read against FLOPs saved net."""
    st.subheader("On held-out text: the trained router against fixed baselines")
    rows = (measured or {}).get("baselines") or []
    st.markdown(measured_results.baseline_words(measured))
    if not rows:
        return
    curves = measured.get("frontier") or {}
    domains = list(dict.fromkeys(r["domain"] for r in rows))
    if curves:
        _frontier_figure(curves, domains, {r["domain"]: r["param_skip"] for r in rows}, rows[0]["router"],
                         base if measured.get("max_tokens") else None, measured.get("max_tokens"))
    st.dataframe(baseline_table(rows), hide_index=True, key="baselines_table")
    adapters = sorted({r["adapters_of"] for r in rows if r.get("adapters_of")})
    st.caption(f"Perplexity ratio to the dense model with its 95 % bootstrap interval, on "
               f"{measured.get('texts_per_domain') or '?'} held-out texts per domain; the dotted line is the "
               "router's own param skip, where the table reads every curve (on the net axis: what that point saves "
               "net, where a reference of the same net saving is read off its own curve, not the table). "
               + " ".join(f"**{REFERENCE_LABELS[n]}**: {REFERENCE_NOTES[n]}." for n in REFERENCE_LABELS)
               + (f" Every reference runs on {', '.join(adapters)}'s adapters, so against that router only the "
                  "skip decisions differ; against another router the adapters differ too." if adapters else "")
               + " A ratio below 1 on chat is not a gain over dense: those texts are the dense model's own replies "
                 "and the routers were distilled towards a sharpened copy of its distribution (docs/results.md).")
