"""What a sweep over the threshold tau shows on one text, in words computed from the sweep itself.

Why: the Learn page said "a higher τ skips more" under a curve that, on its own example text, went up between two
thresholds. Each gate is stricter at a higher tau, but a skip at one block changes the hidden state every later block
sees, so later gates can open: compute need not fall monotonically on one short text. The page now says what its
curve does, including where it does not fall, and what the quality did.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

RISE_TOLERANCE = 0.05  # FFNs per token: a rise smaller than this is rounding, not a rise


def rises(taus: Sequence[float], ffn_per_token: Sequence[float],
          tolerance: float = RISE_TOLERANCE) -> list[tuple[float, float, float, float]]:
    """(tau_a, tau_b, ffn_a, ffn_b) for each step of the sweep where compute went UP as tau rose."""
    points = sorted(zip(taus, ffn_per_token))
    return [(t0, t1, f0, f1) for (t0, f0), (t1, f1) in zip(points, points[1:]) if f1 > f0 + tolerance]


def tau_sweep_words(taus: Sequence[float], ffn_per_token: Sequence[float], n_routed: int,
                    perplexity_ratio: Sequence[float] | None = None) -> str:
    """Two or three sentences: how compute moved over the sweep (and where it rose), and what quality paid."""
    points = sorted(zip(taus, ffn_per_token, perplexity_ratio or [math.nan] * len(taus)))
    (t_lo, f_lo, q_lo), (t_hi, f_hi, q_hi) = points[0], points[-1]
    found = rises(taus, ffn_per_token)
    if f_hi >= f_lo - RISE_TOLERANCE:
        trend = (f"On this text compute does not fall from τ = {t_lo:g} to {t_hi:g} "
                 f"({f_lo:.1f} → {f_hi:.1f} of {n_routed} FFNs per token).")
    elif not found:
        trend = (f"On this text compute falls as τ rises: {f_lo:.1f} of {n_routed} FFNs per token at τ = {t_lo:g}, "
                 f"{f_hi:.1f} at τ = {t_hi:g}.")
    else:
        steps = "; ".join(f"from τ = {a:g} to {b:g} it rises from {fa:.1f} to {fb:.1f}" for a, b, fa, fb in found)
        trend = (f"On this text compute falls overall ({f_lo:.1f} of {n_routed} FFNs per token at τ = {t_lo:g}, "
                 f"{f_hi:.1f} at τ = {t_hi:g}) but not at every step: {steps}.")
    if found or f_hi >= f_lo - RISE_TOLERANCE:
        trend += (" A higher τ makes every gate stricter, but a skip at one block changes the hidden state each later "
                  "block sees, so later gates can open: on one short text compute need not fall steadily.")
    if math.isfinite(q_lo) and math.isfinite(q_hi):
        trend += (f" The quality paid: the perplexity ratio to the dense model goes from {q_lo:.3g} at τ = {t_lo:g} "
                  f"to {q_hi:.3g} at τ = {t_hi:g} (1 = the dense model's own).")
    return trend
