"""The study's statistics: each arm's spread over its seeds and the paired hierarchical bootstrap of an arm
difference, with the verdict it reads as.

A *unit* is one run's measurement on a set of items (held-out texts, multiple-choice questions) that every run of
the study measured on the same items in the same order. The bootstrap of a difference resamples both sources of
noise: per replicate each arm's seeds are drawn with replacement, and ONE draw of item indices is shared by every
run of every arm, so a difference between arms is never blurred by each arm reading other texts (paired).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from hero_core.measures.metrics import (
    bootstrap_picks,
    percentile_interval,
    pooled_perplexity_ratio,
    pooled_ratio_replicates,
    retain_replicates,
)

BOOTSTRAP = 4000  # replicates of a difference: the 2.5 / 97.5 % quantiles move by < 0.001 between reruns


@dataclass
class TextSums:
    """One run on one domain's held-out texts: per-text NLL sums (routed and dense) and prediction counts."""

    nll: np.ndarray
    nll_dense: np.ndarray
    n_pred: np.ndarray

    higher_is_better = False  # a perplexity ratio: lower is better

    @property
    def n_items(self) -> int:
        return len(self.nll)

    def point(self) -> float:
        return pooled_perplexity_ratio(self.nll, self.nll_dense, self.n_pred)

    def on(self, picks: np.ndarray) -> np.ndarray:
        """The pooled ratio on each row of item indices ``picks`` (n_boot, n)."""
        return pooled_ratio_replicates(self.nll, self.nll_dense, self.n_pred, picks)

    def to_json(self) -> dict:
        return {"nll": self.nll.tolist(), "nll_dense": self.nll_dense.tolist(), "n_pred": self.n_pred.tolist()}

    @classmethod
    def from_json(cls, data: dict) -> TextSums:
        return cls(*(np.asarray(data[k], dtype=float) for k in ("nll", "nll_dense", "n_pred")))


@dataclass
class ItemMeans:
    """A mean over items, e.g. a run's multiple-choice grades (1 / 0) as accuracy in %."""

    values: np.ndarray
    scale: float = 100.0

    higher_is_better = True

    @property
    def n_items(self) -> int:
        return len(self.values)

    def point(self) -> float:
        return float(self.scale * self.values.mean())

    def on(self, picks: np.ndarray) -> np.ndarray:
        return self.scale * self.values[picks].mean(-1)


@dataclass
class Retained:
    """Accuracy retained against dense on the same items: 100 x routed accuracy / dense accuracy (NaN where dense
    gets none right, so no replicate divides by zero)."""

    routed: np.ndarray
    dense: np.ndarray

    higher_is_better = True

    @property
    def n_items(self) -> int:
        return len(self.routed)

    def point(self) -> float:
        return float(self.on(np.arange(self.n_items)[None])[0])

    def on(self, picks: np.ndarray) -> np.ndarray:
        return retain_replicates([self.routed], [self.dense], [picks])  # Retain over this one task


@dataclass
class TaskRetain:
    """Retain over several tasks (BIG-bench): the mean over tasks of 100 x routed / dense accuracy on the same
    examples, tasks where dense gets none right left out. Its items are per task (strata): a resample draws each
    task's examples within that task, so every replicate keeps every task."""

    routed: list[np.ndarray]
    dense: list[np.ndarray]

    higher_is_better = True

    @property
    def n_items(self) -> tuple[int, ...]:
        return tuple(len(d) for d in self.dense)

    def point(self) -> float:
        return float(self.on([np.arange(n)[None] for n in self.n_items])[0])

    def on(self, picks: list[np.ndarray]) -> np.ndarray:
        return retain_replicates(self.routed, self.dense, picks)


def arm_spread(units: list) -> dict:
    """An arm's measure per seed, and their mean, standard deviation over seeds and range."""
    values = [float(u.point()) for u in units]
    return {"per_seed": values, "mean": float(np.mean(values)),
            "sd": float(np.std(values, ddof=1)) if len(values) > 1 else float("nan"),
            "min": float(min(values)), "max": float(max(values)), "seeds": len(values)}


def shared_picks(units: list, n_boot: int, rng: np.random.Generator):
    """The item indices every run of a comparison is resampled on: one (n_boot, n) draw for all of them (a list of
    draws, one per stratum, for units whose items come in strata). Refuses runs measured on different numbers of
    items, which cannot be the same items."""
    sizes = {u.n_items for u in units}
    if len(sizes) != 1:
        raise ValueError(f"a paired comparison needs every run measured on the same items; item counts {sorted(sizes)}")
    size = sizes.pop()
    if isinstance(size, tuple):
        return [bootstrap_picks(n, n_boot=n_boot, rng=rng) for n in size]
    return bootstrap_picks(size, n_boot=n_boot, rng=rng)


def paired_difference(arm_a: list, arm_b: list, *, n_boot: int = BOOTSTRAP, seed: int = 0) -> dict:
    """Mean over seeds of arm a's measure minus arm b's, with a 95 % interval from the paired hierarchical
    bootstrap: per replicate each arm's seeds drawn with replacement, the items drawn once for every run."""
    rng = np.random.default_rng(seed)
    picks = shared_picks(arm_a + arm_b, n_boot, rng)
    replicates = _arm_replicates(arm_a, picks, n_boot, rng) - _arm_replicates(arm_b, picks, n_boot, rng)
    kept = replicates[~np.isnan(replicates)]
    point = float(np.mean([u.point() for u in arm_a]) - np.mean([u.point() for u in arm_b]))
    low, high = percentile_interval(kept) if len(kept) else (float("nan"), float("nan"))
    seed_a, seed_b = [u.point() for u in arm_a], [u.point() for u in arm_b]
    t_low, t_high = welch_interval(seed_a, seed_b)
    better = arm_a[0].higher_is_better
    # the verdict needs both intervals clear of zero: with 3 seeds an arm's bootstrap has ten distinct seed draws and
    # reads narrower than the spread of seed means supports (seed_interval_coverage measures it)
    agreed = verdict(low, high, higher_is_better=better)
    if t_low == t_low and verdict(t_low, t_high, higher_is_better=better) != agreed:
        agreed = "not separable"
    return {"difference": point, "low": low, "high": high, "n_boot": n_boot, "t_low": t_low, "t_high": t_high,
            "seeds_needed": seeds_needed(seed_a, seed_b), "verdict": agreed}


def welch_interval(a: list[float], b: list[float], level: float = 0.95) -> tuple[float, float]:
    """A Welch t-interval for mean(a) - mean(b) over seed means: it keeps its coverage with a few seeds, where a
    percentile bootstrap over 3 seeds does not. NaN with fewer than two seeds in either arm."""
    from scipy.stats import t

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 2 or len(b) < 2:
        return float("nan"), float("nan")
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        d = float(a.mean() - b.mean())
        return d, d
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = float(t.ppf(0.5 + level / 2, df)) * se
    d = float(a.mean() - b.mean())
    return d - half, d + half


def seeds_needed(a: list[float], b: list[float], level: float = 0.95, most: int = 1000) -> int | None:
    """Seeds per arm at which a difference of the size seen, with the seed spread seen, would give a t-interval
    clear of zero (None: no spread or no difference measured, or more than ``most``)."""
    from scipy.stats import t

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 2 or len(b) < 2:
        return None
    d, sd = abs(a.mean() - b.mean()), math.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2)
    if d == 0 or sd == 0:
        return None
    for n in range(2, most + 1):
        if t.ppf(0.5 + level / 2, 2 * n - 2) * sd * math.sqrt(2 / n) < d:
            return n
    return None


def seed_interval_coverage(true_difference: float, seed_sd: float, seeds: int = 3, trials: int = 400,
                           n_boot: int = 1000, seed: int = 0) -> dict:
    """How often each interval over seed means holds a known difference: two arms of ``seeds`` runs, each run's
    measure the arm's mean plus N(0, seed_sd). Returns the coverage of the Welch t-interval and of the percentile
    bootstrap over seeds (the study's seed level) at 95 %."""
    rng = np.random.default_rng(seed)
    hit_t = hit_boot = 0
    for _ in range(trials):
        a = true_difference + rng.normal(0, seed_sd, seeds)
        b = rng.normal(0, seed_sd, seeds)
        t_low, t_high = welch_interval(list(a), list(b))
        hit_t += t_low <= true_difference <= t_high
        boot = (a[rng.integers(0, seeds, (n_boot, seeds))].mean(1) - b[rng.integers(0, seeds, (n_boot, seeds))].mean(1))
        low, high = percentile_interval(boot)
        hit_boot += low <= true_difference <= high
    return {"seeds": seeds, "trials": trials, "t_coverage": hit_t / trials, "bootstrap_coverage": hit_boot / trials}


def _arm_replicates(arm: list, picks, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot,) the arm's mean over its resampled seeds, every seed read on the shared item draw."""
    per_run = np.stack([u.on(picks) for u in arm])  # (runs, n_boot)
    drawn = rng.integers(0, len(arm), size=(n_boot, len(arm)))  # (n_boot, seeds)
    with warnings.catch_warnings():  # a replicate whose every value is NaN (dense none right) stays NaN, dropped later
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(per_run[drawn, np.arange(n_boot)[:, None]], axis=1)


def verdict(low: float, high: float, *, higher_is_better: bool) -> str:
    """``not separable`` when the interval holds 0, else which side of the comparison is ahead."""
    if not low <= 0 <= high and low == low:
        return "first ahead" if (low > 0) == higher_is_better else "second ahead"
    return "not separable"


def summarise(arms: dict[str, list[str]], units: dict[str, dict], measures: list[str], *,
              n_boot: int = BOOTSTRAP) -> dict:
    """Per arm the spread over seeds of each measure; per measure the first arm minus each other arm.
    ``units``: run name -> {measure: unit}; a measure enters only where every run has it."""
    measures = [m for m in measures if all(m in units[n] for names in arms.values() for n in names)]
    out = {"measures": measures, "arms": {}, "differences": {}}
    for arm, names in arms.items():
        out["arms"][arm] = {"runs": names, **{m: arm_spread([units[n][m] for n in names]) for m in measures}}
    first, *others = arms
    for other in others:
        out["differences"][f"{first} - {other}"] = {
            m: paired_difference([units[n][m] for n in arms[first]], [units[n][m] for n in arms[other]],
                                 n_boot=n_boot) for m in measures}
    return out
