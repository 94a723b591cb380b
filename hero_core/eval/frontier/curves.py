"""The skip-quality frontier: perplexity ratio against param skip on held-out text, per domain.

``python -m hero_core frontier --checkpoint hero-10 --checkpoint local-10 --oracle --random --out f.json``
sweeps each checkpoint's threshold tau, and optionally two reference policies built on the first
checkpoint's adapters:

* **oracle** (not deployable): runs both branches at every block and skips where replacing the FFN by the
  adapter changes the block output least, ``e = ||FFN(u) - Adapter(u)|| / ||hbar + FFN(u)||`` below a
  threshold; the threshold is swept like tau. It needs the FFN output to decide whether to skip the FFN,
  so it saves nothing. It is a greedy, block-local reference, not an upper bound: it ranks skips by their
  error at one block and cannot see how that error grows through the later blocks, which trained routers
  learn end to end (on the bundled checkpoints they beat it at every budget).
* **random**: every (token, block) skips with one probability, taking the adapter.

Every point is evaluated on the same held-out texts, with the dense model run once per batch
(:func:`hero_core.eval.engine.run_texts`), and
reports per domain the param skip, the perplexity ratio (routed / dense) with a bootstrap interval over
texts, top-1 agreement and KL(dense || routed).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from hero_core.eval.baselines import (
    block_influence,
    expert_choice,
    least_influential,
    oracle_skipping,
    random_skip_probability,
    random_skipping,
    static_pruning,
)
from hero_core.measures.accounting import token_compute
from hero_core.measures.metrics import ratio_interval

DEFAULT_TAUS = (0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 0.97)
DEFAULT_ORACLE_THRESHOLDS = (0.04, 0.08, 0.14, 0.25, 0.4, 0.6)
DEFAULT_RANDOM_SKIPS = (0.05, 0.10, 0.25, 0.40)  # param skip targets of the random policy
DEFAULT_STATIC_DROPS = (1, 2, 3, 5, 8, 13, 20)  # FFNs static pruning drops for every token (~2 % param skip each)
CALIBRATION_TEXTS = 4  # train-split texts per domain for static pruning's block influence (never evaluation text)


@dataclass
class _TextStats:
    """Sums over one text's positions, for pooled ratios and bootstrap resampling over texts."""

    nll: list[float] = field(default_factory=list)
    nll_dense: list[float] = field(default_factory=list)
    n_pred: list[int] = field(default_factory=list)
    agree: list[float] = field(default_factory=list)
    kl: list[float] = field(default_factory=list)
    n_pos: list[int] = field(default_factory=list)
    skip: list[float] = field(default_factory=list)  # sum over positions of the token's param skip


def _summarise(stats: _TextStats) -> dict:
    nll, dense, n_pred = (np.asarray(x, dtype=float) for x in (stats.nll, stats.nll_dense, stats.n_pred))
    ratio, low, high = ratio_interval(nll, dense, n_pred)
    n_pos = max(sum(stats.n_pos), 1)
    return {"texts": len(stats.nll), "tokens": int(sum(stats.n_pos)), "param_skip": sum(stats.skip) / n_pos,
            "perplexity_ratio": ratio, "ratio_low": low, "ratio_high": high,
            "top1_agreement": sum(stats.agree) / n_pos, "kl_from_dense": sum(stats.kl) / n_pos}


def evaluate_points(hero, methods: Sequence, texts_by_domain: dict[str, list[str]], *, max_tokens: int = 256,
                    batch_size: int = 2, progress: bool = False) -> dict[str, dict[str, dict]]:
    """Run every method (hero_core.eval.Method) on every text; returns {method: {domain: summary}}."""
    from hero_core.eval.engine import run_texts
    from hero_core.eval.methods import HeroMethod

    reference = HeroMethod(hero, "dense")
    out: dict[str, dict[str, dict]] = {m.name: {} for m in methods}
    for domain, texts in texts_by_domain.items():
        stats = {m.name: _TextStats() for m in methods}
        for text in run_texts(hero, methods, texts, reference, max_tokens=max_tokens, batch_size=batch_size,
                              desc=f"frontier {domain}", progress=progress):
            for m in methods:
                run, s = text.runs[m.name], stats[m.name]
                s.nll.append(run.nll_sum)
                s.nll_dense.append(run.dense_nll_sum)
                s.n_pred.append(run.n_pred)
                s.kl.append(run.kl_sum)
                s.agree.append(run.agree_sum)
                s.n_pos.append(run.n_tokens)
                s.skip.append(0.0 if run.executed is None else
                              float(token_compute(run.executed, m.profile)["param_skip"].sum()))
        for m in methods:
            out[m.name][domain] = _summarise(stats[m.name])
    return out


def frontier(models: dict, *, oracle: bool = False, random: bool = False, static: bool = False,
             expert: bool = False, taus: Sequence[float] | dict[str, Sequence[float]] = DEFAULT_TAUS,
             oracle_thresholds: Sequence[float] = DEFAULT_ORACLE_THRESHOLDS,
             random_skips: Sequence[float] = DEFAULT_RANDOM_SKIPS,
             static_drops: Sequence[int] = DEFAULT_STATIC_DROPS, limit: int = 40, max_tokens: int = 256,
             domains: Sequence[str] = ("chat", "code", "reasoning"), progress: bool = False) -> dict:
    """Sweep every model in ``models`` ({checkpoint name: HeroModel}) over ``taus`` (one list for all, or
    {name: list}; an empty list: no curve of its own), plus the references and baselines, which use the first
    model's adapters: the oracle (not deployable), random skipping, static pruning (the same least influential
    FFNs dropped for every token, ShortGPT's block influence measured on train-split text) and MoD-style top-k
    (expert choice: each block runs its FFN on the top share of a sequence's tokens by gate, which needs the whole
    sequence, so it is not causal: a reference, not a deployable router)."""
    from hero_core.data.texts import domain_texts, held_out_texts
    from hero_core.eval.methods import HeroMethod

    first = next(iter(models.values()))
    methods, curves = [], {}
    for name, hero in models.items():
        grid = taus.get(name, DEFAULT_TAUS) if isinstance(taus, dict) else taus
        if not grid:
            continue
        points = [HeroMethod(hero, hero.config.variant, tau=t, name=f"{name}@tau={t:g}") for t in grid]
        curves[name] = {"kind": "checkpoint", "variant": hero.config.variant, "tau": hero.config.tau,
                        "knob": "tau", "points": [(t, p.name) for t, p in zip(grid, points)]}
        methods += points
    def policy_curve(name: str, knobs: Sequence, policy_at, **info) -> None:
        """A reference curve: the first model's router (and adapters) with ``policy_at(knob)`` deciding."""
        points = [HeroMethod(first, "hero", name=f"{name}@{k:g}", policy=policy_at(k)) for k in knobs]
        curves[info.pop("curve", name)] = {**info, "adapters_of": first.checkpoint_name,
                                           "points": [(k, p.name) for k, p in zip(knobs, points)]}
        methods.extend(points)

    if oracle:
        policy_curve("oracle", oracle_thresholds, lambda e: oracle_skipping(first, e),
                     kind="reference (not deployable)", knob="relative adapter error")
    if random:
        policy_curve("random", random_skips,
                     lambda s: random_skipping(random_skip_probability(first, s), seed=0),
                     kind="baseline", knob="target param skip")
    if static:
        calibration = [t for d in domains for t in domain_texts(d, "train", CALIBRATION_TEXTS, hero=first)]
        influence = block_influence(first, calibration)
        policy_curve("static", static_drops, lambda n: static_pruning(least_influential(influence, n)),
                     kind="baseline", knob="FFNs dropped for every token", influence=influence,
                     influence_from=f"{CALIBRATION_TEXTS} train-split texts per domain")
    if expert:  # as many FFNs run as under random skipping, chosen by gate
        policy_curve("expert", random_skips,
                     lambda s: expert_choice(1 - random_skip_probability(first, s)),
                     curve="expert_choice", kind="reference (not causal)", knob="target param skip")
    texts = held_out_texts(limit, first, domains)
    results = evaluate_points(first, methods, texts, max_tokens=max_tokens, progress=progress)
    for curve in curves.values():
        curve["points"] = [{"knob": knob, **{d: results[name][d] for d in domains}} for knob, name in curve["points"]]
    return {"backbone": first.backbone.name, "limit": limit, "max_tokens": max_tokens, "domains": list(domains),
            "split": "eval (held out: see hero_core.data.texts)", "curves": curves}


def at_skip(curve: dict, domain: str, skip: float) -> dict | None:
    """The curve's perplexity ratio interpolated (log-linear in skip) at ``skip``; None outside its range."""
    pts = sorted((p[domain]["param_skip"], p[domain]) for p in curve["points"])
    for (x0, a), (x1, b) in zip(pts, pts[1:]):
        if x0 <= skip <= x1:
            w = 0.0 if x1 == x0 else (skip - x0) / (x1 - x0)
            interp = {k: math.exp((1 - w) * math.log(a[k]) + w * math.log(b[k]))
                      for k in ("perplexity_ratio", "ratio_low", "ratio_high")}
            interp["top1_agreement"] = (1 - w) * a["top1_agreement"] + w * b["top1_agreement"]
            return interp
    return None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", action="append", required=True, help="bundled name or directory (repeatable)")
    p.add_argument("--oracle", action="store_true", help="add the oracle reference (not deployable)")
    p.add_argument("--random", action="store_true", help="add random skipping with the first checkpoint's adapters")
    p.add_argument("--taus", default=",".join(f"{t:g}" for t in DEFAULT_TAUS),
                   help="gate thresholds to sweep, comma-separated (default: %(default)s)")
    p.add_argument("--limit", type=int, default=40, help="held-out texts per domain")
    p.add_argument("--max-tokens", type=int, default=256, help="tokens per text")
    p.add_argument("--domains", default="chat,code,reasoning", help="held-out domains, comma-separated")
    p.add_argument("--backbone", default=None, help="local HF model directory (default: the embedded model)")
    p.add_argument("--out", required=True, help="JSON file to write")


def run_cli(args) -> int:
    from hero_core.backbones.loading import load_backbone
    from hero_core.method.model import load_checkpoints

    try:
        taus = [float(t) for t in args.taus.split(",")]
    except ValueError:
        raise ValueError(f"--taus must be comma-separated numbers, got {args.taus!r}") from None
    loaded = load_checkpoints(args.checkpoint, load_backbone(args.backbone))
    models = {model.checkpoint_name: model for model in loaded.values()}  # a directory's curve is named by its name
    with torch.no_grad():
        result = frontier(models, oracle=args.oracle, random=args.random, taus=taus, limit=args.limit,
                          max_tokens=args.max_tokens, domains=args.domains.split(","), progress=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out}")
    return 0
