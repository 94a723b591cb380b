"""One row per token of a routing trace: the table the sweep keeps per item, the position-skip measurement bins and
the app's explorer shows (:func:`token_summary`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hero_core.method.trace import RoutingTrace


def token_summary(trace: RoutingTrace) -> pd.DataFrame:
    """One row per token: its absolute index in the item, FFNs run and skipped, its param skip, mean gate, the
    decision closest to flipping and its quality vs dense.

    ``token_index`` counts from 0 (the first token, the attention sink) whatever the prompt's length, so
    tables of many items can be binned by absolute position; ``min_margin`` is g - tau of the token's decision
    nearest tau (signed: negative = skipped); ``nll`` and ``dense_nll`` score the next token (NaN at the last),
    ``delta_nll`` = nll - dense_nll."""
    margin = trace.margin()  # (R, T)
    if trace.n_routed:
        closest = np.abs(margin).argmin(axis=0)
        min_margin = margin[closest, np.arange(trace.n_tokens)]
    else:
        min_margin = np.full(trace.n_tokens, np.nan)
    out = pd.DataFrame({"token_index": np.arange(trace.n_tokens), "token": list(trace.tokens),
                        "ffn_executed": trace.executed_per_token().astype(int),
                        "ffn_skipped": (~trace.executed).sum(axis=0).astype(int),
                        "skip_rate": 1.0 - trace.executed.mean(axis=0) if trace.n_routed else 0.0,
                        "param_skip": trace.compute()["param_skip"],
                        "mean_gate": trace.gate.mean(axis=0), "min_margin": min_margin})
    quality = trace.quality or {}
    nan = np.full(trace.n_tokens, np.nan)
    out["nll"], out["dense_nll"] = quality.get("nll", nan), quality.get("dense_nll", nan)
    out["delta_nll"] = out["nll"] - out["dense_nll"]
    out["kl_to_dense"] = quality.get("kl_to_dense", nan)
    return out
