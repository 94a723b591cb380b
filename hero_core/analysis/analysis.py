"""Aggregate analyses of routing traces: which tokens skip, at which depths, what the history changes.

Everything here is a pure function of :class:`~hero_core.method.trace.RoutingTrace` objects and logits, returning
pandas DataFrames or dicts; notebooks and the app draw from these tables,
so every number a notebook states is computed here, not typed in.

Conventions:

* A **domain** is a named group of texts (``reasoning``, ``code``, ``chat`` …); most functions take
  ``{domain: [trace, ...]}``.
* Aggregates are **token-weighted**: all tokens (or next-token positions) of a domain are pooled, so a
  long text weighs more than a short one. Item-level bootstrap intervals
  (:func:`hero_core.measures.metrics.bootstrap_ci`) resample whole texts, which is the honest unit of independence.
* An :class:`ItemRun` holds one text run under several labelled configurations (``"hero"``,
  ``"no_history"``, ``"local"``, ``"dense"`` …); :func:`hero_core.eval.sweep.item_runs.run_items` runs the model to
  build them.
* Quality follows :mod:`hero_core.measures.metrics`: NLL of the next token at positions 0..T-2, KL(dense || routed)
  and top-1 agreement at every position.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from hero_core.analysis.token_categories import CATEGORIES, CATEGORY_LABELS, token_categories
from hero_core.analysis.trace_sets import TracesByDomain, check_domains, check_same_tokens, domains_with_traces
from hero_core.measures.metrics import bootstrap_ci, compare_to_dense, next_token_nll
from hero_core.method.trace import RoutingTrace


# -- skipping by token category and by depth -----------------------------------------------------
def token_table(traces_by_domain: TracesByDomain) -> pd.DataFrame:
    """One row per token: domain, item, token_index, token, category, ffn_executed, skip_rate.

    ``skip_rate`` is the share of the token's routed blocks whose FFN it skipped."""
    check_domains(traces_by_domain)
    frames = []
    for domain, traces in traces_by_domain.items():
        for item, trace in enumerate(traces):
            executed = trace.executed_per_token()
            frames.append(pd.DataFrame({
                "domain": domain, "item": item, "token_index": np.arange(trace.n_tokens),
                "token": list(trace.tokens), "category": token_categories(trace.tokens, domain),
                "ffn_executed": executed.astype(int), "skip_rate": 1.0 - executed / max(trace.n_routed, 1)}))
    columns = ["domain", "item", "token_index", "token", "category", "ffn_executed", "skip_rate"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def skip_by_category(traces_by_domain: TracesByDomain) -> pd.DataFrame:
    """Per (domain, category): n_tokens, share_of_tokens, skip_rate, ffn_executed_per_token, and
    ``skip_rate_vs_domain`` (the category's skip rate minus its domain's)."""
    tokens = token_table(traces_by_domain)
    grouped = tokens.groupby(["domain", "category"], sort=False)
    out = grouped.agg(n_tokens=("skip_rate", "size"), skip_rate=("skip_rate", "mean"),
                      ffn_executed_per_token=("ffn_executed", "mean")).reset_index()
    domain_tokens = tokens.groupby("domain")["skip_rate"].agg(["size", "mean"])
    out["share_of_tokens"] = out["n_tokens"] / out["domain"].map(domain_tokens["size"])
    out["skip_rate_vs_domain"] = out["skip_rate"] - out["domain"].map(domain_tokens["mean"])
    out["category_label"] = out["category"].map(CATEGORY_LABELS)
    order = {c: i for i, c in enumerate(CATEGORIES)}
    out = out.sort_values(["domain", "category"], key=lambda s: s.map(order) if s.name == "category" else s,
                          kind="stable")
    return out[["domain", "category", "category_label", "n_tokens", "share_of_tokens", "skip_rate",
                "skip_rate_vs_domain", "ffn_executed_per_token"]].reset_index(drop=True)


def layer_skip_profiles(traces_by_domain: TracesByDomain) -> pd.DataFrame:
    """Per (domain, routed block): skip_rate pooled over every token of the domain.

    Columns: domain, block (1-based), layer (backbone index), skip_rate, n_tokens."""
    rows = []
    for domain, traces in domains_with_traces(traces_by_domain):
        layers = list(traces[0].routed_layers)
        if any(list(t.routed_layers) != layers for t in traces):
            raise ValueError(f"domain {domain!r} mixes traces with different routed layers")
        skipped = sum((~t.executed).sum(axis=1) for t in traces)  # (R,)
        n = sum(t.n_tokens for t in traces)
        for j, layer in enumerate(layers):
            rows.append({"domain": domain, "block": j + 1, "layer": layer,
                         "skip_rate": float(skipped[j]) / n if n else float("nan"), "n_tokens": n})
    return pd.DataFrame(rows, columns=["domain", "block", "layer", "skip_rate", "n_tokens"])


# -- decision flips between two runs of the same tokens ---------------------------------------------
def decision_flips(trace_a: RoutingTrace, trace_b: RoutingTrace) -> dict:
    """Where two runs of the same tokens decide differently (FFN executed in one, skipped in the other).

    Returns counts and shares over all (block, token) decisions, the share of tokens with at least one
    flip, and arrays ``per_token`` (T,) flips per token and ``per_layer`` (R,) flip rate per block."""
    check_same_tokens(trace_a, trace_b)
    a, b = trace_a.executed, trace_b.executed
    flips = a != b  # (R, T)
    n = flips.size
    return {
        "n_decisions": int(n), "n_flips": int(flips.sum()), "flip_rate": float(flips.mean()) if n else 0.0,
        "only_a_executed": int((a & ~b).sum()), "only_b_executed": int((~a & b).sum()),
        "tokens_with_flip": float(flips.any(axis=0).mean()) if trace_a.n_tokens else 0.0,
        "mean_abs_gate_change": float(np.abs(trace_a.gate - trace_b.gate).mean()) if n else 0.0,
        "per_token": flips.sum(axis=0), "per_layer": flips.mean(axis=1) if trace_a.n_tokens else np.zeros(len(a)),
    }


def _as_logits(logits, n_tokens: int, name: str) -> torch.Tensor:
    tensor = torch.as_tensor(logits).float()
    if tensor.ndim != 2 or tensor.shape[0] != n_tokens:
        raise ValueError(f"{name} must be (tokens, vocab) = ({n_tokens}, V) logits of the traced prompt, "
                         f"got shape {tuple(tensor.shape)}")
    return tensor


def flip_cost(trace_a: RoutingTrace, trace_b: RoutingTrace, logits_a, logits_b) -> dict:
    """What the decisions that differ between run A and run B cost in next-token NLL (nats).

    ``delta_nll`` (T-1,) is NLL_B - NLL_A at each position t (predicting token t+1), ``flipped`` (T-1,)
    whether token t itself had at least one flipped decision. A flip at token t changes that token's
    logits directly and later positions through attention, so the split into flipped / unflipped
    positions is a locality proxy, not an exact attribution."""
    check_same_tokens(trace_a, trace_b)
    T = trace_a.n_tokens
    ids = torch.tensor(trace_a.token_ids, dtype=torch.long)
    nll_a = next_token_nll(_as_logits(logits_a, T, "logits_a"), ids).numpy().astype(np.float64)
    nll_b = next_token_nll(_as_logits(logits_b, T, "logits_b"), ids).numpy().astype(np.float64)
    delta = nll_b - nll_a
    flipped = (trace_a.executed != trace_b.executed).any(axis=0)[: max(T - 1, 0)]
    return {"delta_nll": delta, "flipped": flipped,
            "mean_delta_nll": float(delta.mean()) if len(delta) else 0.0,
            "mean_delta_nll_flipped": float(delta[flipped].mean()) if flipped.any() else float("nan"),
            "mean_delta_nll_unflipped": float(delta[~flipped].mean()) if (~flipped).any() else float("nan"),
            "n_positions": int(len(delta)), "n_flipped_positions": int(flipped.sum())}


# -- item runs: one text under several configurations ---------------------------------------------
@dataclass
class ItemRun:
    """One text of one domain, run under several labelled configurations.

    ``traces[label]`` and ``logits[label]`` (T, V) must describe the same tokens. A label may have
    logits only (``dense`` needs no trace)."""

    domain: str
    text: str
    traces: dict[str, RoutingTrace] = field(default_factory=dict)
    logits: dict[str, torch.Tensor] = field(default_factory=dict)
    token_ids: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.token_ids and self.traces:
            self.token_ids = list(next(iter(self.traces.values())).token_ids)
        for label, trace in self.traces.items():
            if list(trace.token_ids) != list(self.token_ids):
                raise ValueError(f"run {label!r} of a {self.domain} item routes other tokens than the rest")
        for label, logits in self.logits.items():
            if logits.ndim != 2 or logits.shape[0] != len(self.token_ids):
                raise ValueError(f"logits of run {label!r} have shape {tuple(logits.shape)}, expected "
                                 f"({len(self.token_ids)}, vocab)")

    @property
    def ids(self) -> torch.Tensor:
        return torch.tensor(self.token_ids, dtype=torch.long)


def traces_by_domain(runs: Sequence[ItemRun], label: str) -> dict[str, list[RoutingTrace]]:
    """``{domain: [trace of run `label`, ...]}`` in the order of ``runs``."""
    out: dict[str, list[RoutingTrace]] = {}
    for run in runs:
        if label not in run.traces:
            raise ValueError(f"no {label!r} trace in a {run.domain} item; traced labels: {sorted(run.traces)}")
        out.setdefault(run.domain, []).append(run.traces[label])
    return out


def _runs_by_domain(runs: Sequence[ItemRun]) -> dict[str, list[ItemRun]]:
    """The runs grouped by domain, domains in the order they first appear."""
    if not runs:
        raise ValueError("no item runs given")
    grouped: dict[str, list[ItemRun]] = {}
    for run in runs:
        grouped.setdefault(run.domain, []).append(run)
    return grouped


def _require(runs: Sequence[ItemRun], labels: Sequence[str], *, traces: bool) -> None:
    """Every run must hold logits (and, with ``traces``, a trace) for each label."""
    for run in runs:
        held = run.traces if traces else run.logits
        missing = [label for label in labels if label not in held]
        if missing:
            kind = "traces" if traces else "logits"
            raise ValueError(f"a {run.domain} item has no {kind} for {missing}; it has {sorted(held)}")


def flip_summary(runs: Sequence[ItemRun], a: str = "hero", b: str = "no_history", *,
                 seed: int = 0) -> pd.DataFrame:
    """Per domain, how often run ``b`` decides differently from run ``a`` and what it costs.

    Columns: n_items, n_tokens, flip_rate (share of decisions), tokens_with_flip, only_a_executed and
    only_b_executed (shares of decisions), skip_a / skip_b (skip rates), delta_nll (mean NLL_b - NLL_a,
    pooled over positions) with a 95 % item-bootstrap interval (delta_nll_lo, delta_nll_hi), and
    delta_nll_flipped / delta_nll_unflipped (positions whose token had a flip, or none)."""
    _require(runs, [a, b], traces=True)
    _require(runs, [a, b], traces=False)
    rows = []
    for domain, items in _runs_by_domain(runs).items():
        flips = [decision_flips(r.traces[a], r.traces[b]) for r in items]
        costs = [flip_cost(r.traces[a], r.traces[b], r.logits[a], r.logits[b]) for r in items]
        n_dec = sum(f["n_decisions"] for f in flips)
        n_tok = sum(r.traces[a].n_tokens for r in items)
        delta = np.concatenate([c["delta_nll"] for c in costs])
        flipped = np.concatenate([c["flipped"] for c in costs])
        lo, hi = bootstrap_ci([c["mean_delta_nll"] for c in costs], [c["n_positions"] for c in costs], seed=seed)
        rows.append({
            "domain": domain, "n_items": len(items), "n_tokens": n_tok,
            "flip_rate": sum(f["n_flips"] for f in flips) / max(n_dec, 1),
            "tokens_with_flip": sum(int((f["per_token"] > 0).sum()) for f in flips) / max(n_tok, 1),
            "only_a_executed": sum(f["only_a_executed"] for f in flips) / max(n_dec, 1),
            "only_b_executed": sum(f["only_b_executed"] for f in flips) / max(n_dec, 1),
            "skip_a": float(np.mean(np.concatenate([(~r.traces[a].executed).ravel() for r in items]))),
            "skip_b": float(np.mean(np.concatenate([(~r.traces[b].executed).ravel() for r in items]))),
            "delta_nll": float(delta.mean()) if len(delta) else float("nan"),
            "delta_nll_lo": lo, "delta_nll_hi": hi,
            "delta_nll_flipped": float(delta[flipped].mean()) if flipped.any() else float("nan"),
            "delta_nll_unflipped": float(delta[~flipped].mean()) if (~flipped).any() else float("nan"),
            "flipped_position_share": float(flipped.mean()) if len(flipped) else float("nan"),
        })
    return pd.DataFrame(rows)


def flip_layer_profile(runs: Sequence[ItemRun], a: str = "hero", b: str = "no_history") -> pd.DataFrame:
    """Per (domain, routed block): share of tokens whose decision there differs between runs a and b."""
    _require(runs, [a, b], traces=True)
    rows = []
    for domain, items in _runs_by_domain(runs).items():
        flips = sum((r.traces[a].executed != r.traces[b].executed).sum(axis=1) for r in items)
        n = sum(r.traces[a].n_tokens for r in items)
        for j, layer in enumerate(items[0].traces[a].routed_layers):
            rows.append({"domain": domain, "block": j + 1, "layer": layer, "flip_rate": float(flips[j]) / max(n, 1)})
    return pd.DataFrame(rows, columns=["domain", "block", "layer", "flip_rate"])


def quality_table(runs: Sequence[ItemRun], labels: Sequence[str], dense: str = "dense") -> pd.DataFrame:
    """Per (domain, label): quality against the dense run, pooled over positions.

    Columns: nll, nll_dense, delta_nll (nll - nll_dense), kl (KL(dense || routed)), top1_agreement, and
    param_skip (the paper's metric, token-weighted) where the label has a trace."""
    _require(runs, [*labels, dense], traces=False)
    rows = []
    for domain, items in _runs_by_domain(runs).items():
        for label in labels:
            per_item = [compare_to_dense(r.logits[dense], r.logits[label], r.ids) for r in items]
            nll = np.concatenate([q["nll"] for q in per_item])
            nll_dense = np.concatenate([q["nll_dense"] for q in per_item])
            kl = np.concatenate([q["kl"] for q in per_item])
            agree = np.concatenate([q["top1_agree"] for q in per_item]).astype(float)
            traced = [r.traces[label] for r in items if label in r.traces]
            skip = (sum(t.param_skip * t.n_tokens for t in traced) / max(sum(t.n_tokens for t in traced), 1)
                    if len(traced) == len(items) else float("nan"))
            rows.append({"domain": domain, "label": label, "n_items": len(items), "n_positions": len(nll),
                         "nll": float(nll.mean()), "nll_dense": float(nll_dense.mean()),
                         "delta_nll": float((nll - nll_dense).mean()), "kl": float(kl.mean()),
                         "top1_agreement": float(agree.mean()), "param_skip": skip})
    return pd.DataFrame(rows)


def quality_gap(runs: Sequence[ItemRun], hero: str = "hero", local: str = "local", dense: str = "dense", *,
                seed: int = 0) -> pd.DataFrame:
    """Per domain, the history-aware router against the local one, both measured against dense.

    Columns: ``<hero>_*`` and ``<local>_*`` for delta_nll, kl, top1_agreement and param_skip, then the
    gaps (local minus hero: positive = the local router is worse on NLL/KL, i.e. history helps):
    gap_delta_nll with a 95 % item-bootstrap interval, gap_kl, gap_top1 (hero minus local agreement), and
    gap_param_skip (hero minus local: positive = hero also skips more)."""
    table = quality_table(runs, [hero, local], dense)
    rows = []
    for domain, items in _runs_by_domain(runs).items():
        h = table[(table.domain == domain) & (table.label == hero)].iloc[0]
        lo_ = table[(table.domain == domain) & (table.label == local)].iloc[0]
        diffs, weights = [], []
        for r in items:
            ids = r.ids
            gap = (next_token_nll(r.logits[local], ids) - next_token_nll(r.logits[hero], ids)).double()
            diffs.append(float(gap.mean()) if len(gap) else 0.0)
            weights.append(len(gap))
        ci = bootstrap_ci(diffs, weights, seed=seed)
        row = {"domain": domain, "n_items": int(h.n_items), "n_positions": int(h.n_positions)}
        for prefix, src in ((hero, h), (local, lo_)):
            for name in ("delta_nll", "kl", "top1_agreement", "param_skip"):
                row[f"{prefix}_{name}"] = float(src[name])
        row.update({"gap_delta_nll": float(lo_.delta_nll - h.delta_nll), "gap_delta_nll_lo": ci[0],
                    "gap_delta_nll_hi": ci[1], "gap_kl": float(lo_.kl - h.kl),
                    "gap_top1": float(h.top1_agreement - lo_.top1_agreement),
                    "gap_param_skip": float(h.param_skip - lo_.param_skip)})
        rows.append(row)
    return pd.DataFrame(rows)
