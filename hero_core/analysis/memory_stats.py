"""Memory-attention statistics of traces: how selective each router's read over earlier depths is (entropy
against uniform, look-back distance, share on the previous block), per token, per domain and per depth."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hero_core.analysis.token_categories import token_categories
from hero_core.analysis.trace_sets import TracesByDomain, check_domains, domains_with_traces
from hero_core.method.trace import RoutingTrace

MEMORY_STATS = ("entropy", "normalised_entropy", "lookback", "previous_share")


def memory_row_stats(trace: RoutingTrace) -> dict[str, np.ndarray]:
    """Statistics of every memory-attention row alpha_{j, i<j}, as (T, R) arrays (NaN where undefined).

    * ``entropy``: -sum_i alpha log alpha (nats) of the row, renormalised to sum 1 (the eps in the read
      makes rows sum to slightly less);
    * ``normalised_entropy``: entropy / log(j-1 earlier blocks), 1 = uniform; defined from the third
      routed block on (two or more earlier blocks);
    * ``lookback``: mean distance j - i, weighted by alpha (1 = reads only the previous block);
    * ``previous_share``: alpha_{j, j-1}, the weight on the immediately previous block;
    * ``uniform_lookback`` / ``uniform_previous_share``: the same for uniform weights, a reference.

    Rows with no earlier block (j = 1) or zero weight (no memory read, e.g. ``no_history``) are NaN."""
    attention = trace.memory_attention  # (T, R, R)
    T, R, _ = attention.shape
    lower = np.tril(np.ones((R, R), dtype=bool), k=-1)  # i < j
    weights = np.where(lower[None], attention, 0.0)
    mass = weights.sum(axis=-1)  # (T, R)
    valid = mass > 1e-12
    p = np.divide(weights, mass[..., None], out=np.zeros_like(weights), where=valid[..., None])
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=-1)
    j = np.arange(R)[:, None]  # 0-based row index = number of earlier blocks
    i = np.arange(R)[None, :]
    distance = np.where(lower, j - i, 0)  # (R, R)
    lookback = (p * distance[None]).sum(axis=-1)
    previous = np.zeros((T, R))
    if R > 1:
        previous[:, 1:] = p[:, np.arange(1, R), np.arange(R - 1)]
    n_earlier = np.arange(R, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        normalised = np.where(n_earlier[None] >= 2, entropy / np.log(np.maximum(n_earlier, 2))[None], np.nan)
    nan = np.full((T, R), np.nan)
    return {
        "entropy": np.where(valid, entropy, nan),
        "normalised_entropy": np.where(valid, normalised, nan),
        "lookback": np.where(valid, lookback, nan),
        "previous_share": np.where(valid, previous, nan),
        "uniform_lookback": np.where(valid, (n_earlier[None] + 1) / 2, nan),
        "uniform_previous_share": np.where(valid, 1 / np.maximum(n_earlier, 1)[None], nan),
    }


def memory_token_stats(trace: RoutingTrace, domain: str | None = None) -> pd.DataFrame:
    """One row per token: the mean over its routed blocks of each :func:`memory_row_stats` figure
    (NaN for a token with no memory read at all), with its category."""
    rows = memory_row_stats(trace)
    frame = pd.DataFrame({name: _nanmean_rows(values) for name, values in rows.items()})
    frame.insert(0, "token_index", np.arange(trace.n_tokens))
    frame.insert(1, "token", list(trace.tokens))
    frame.insert(2, "category", token_categories(trace.tokens, domain))
    return frame


def _nanmean_rows(values: np.ndarray) -> np.ndarray:
    """Mean over axis 1 ignoring NaN; NaN (without a warning) where a row is all NaN."""
    present = ~np.isnan(values)
    count = present.sum(axis=1)
    total = np.where(present, values, 0.0).sum(axis=1)
    return np.divide(total, count, out=np.full(len(values), np.nan), where=count > 0)


def memory_stats(traces_by_domain: TracesByDomain) -> pd.DataFrame:
    """Per domain: token-weighted means of the per-token memory statistics, beside their uniform
    references, and the number of tokens that read the memory. Traces without a memory read
    (``no_history``, ``no_memread``, ``dense``) contribute no tokens."""
    check_domains(traces_by_domain)
    rows = []
    for domain, traces in traces_by_domain.items():
        frames = [memory_token_stats(t, domain) for t in traces]
        tokens = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["entropy"])
        tokens = tokens.dropna(subset=["lookback"])
        row = {"domain": domain, "n_tokens": int(len(tokens))}
        for name in (*MEMORY_STATS, "uniform_lookback", "uniform_previous_share"):
            row[name] = float(tokens[name].mean()) if len(tokens) else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def memory_depth_profile(traces_by_domain: TracesByDomain) -> pd.DataFrame:
    """Per (domain, routed block j): the memory statistics of row j averaged over the tokens that read
    the memory there. Shows at which depths the router reads far back and where only the previous block."""
    names = (*MEMORY_STATS, "uniform_lookback", "uniform_previous_share")
    rows = []
    for domain, traces in domains_with_traces(traces_by_domain):
        stats = [memory_row_stats(t) for t in traces]
        pooled = {name: _nanmean_rows(np.concatenate([s[name] for s in stats], axis=0).T) for name in names}
        for j, layer in enumerate(traces[0].routed_layers):
            rows.append({"domain": domain, "block": j + 1, "layer": layer,
                         **{name: float(pooled[name][j]) for name in names}})
    return pd.DataFrame(rows, columns=["domain", "block", "layer", *names])
