"""Plain words for what the depth memory does, computed from the data with stated thresholds.

The Memory and Learn pages describe the memory of whichever checkpoint is loaded. On the bundled checkpoints the
reads sit within a few per cent of uniform and rho never left its initial value, while a selective (softmax)
memory may draw almost all of a read from one block: the same page must say either, so every sentence here is
chosen by a rule on the numbers, never written for one checkpoint. Pure functions, no Streamlit, unit-tested.

The rules:

* a read is **close to uniform** when its normalised entropy (entropy / log of the number of earlier blocks;
  1 = uniform) is at least :data:`NEAR_UNIFORM`;
* a read draws **mostly** on one block only when that block's weight is at least :data:`MOSTLY_RATIO` x the
  uniform share *and* at least :data:`MOSTLY_WEIGHT` (with two earlier blocks, where 2x uniform would be all of
  the read, :data:`MOSTLY_CAP` of it is enough); a read between the rules leans but "no block dominates";
* a forgetting factor **did not move** when |rho - rho_init| < :data:`RHO_STILL`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hero_core.analysis.memory_stats import memory_row_stats
from hero_core.method.config import VARIANTS
from hero_core.method.trace import RoutingTrace

NEAR_UNIFORM = 0.95  # normalised entropy at or above which a read is called close to uniform
MOSTLY_RATIO = 2.0  # "mostly from L…" needs the top weight >= 2x the uniform share ...
MOSTLY_WEIGHT = 0.3  # ... and >= 0.3 of the read: with 3 earlier blocks 2x uniform is 0.67, with 29 it is 0.07
MOSTLY_CAP = 0.75  # ... but never more than 0.75 of it: 2x uniform over 2 blocks is 1.0, which only one-hot reaches
RHO_STILL = 0.005  # a forgetting factor within this of its initial value has not moved


@dataclass(frozen=True)
class Read:
    """One read alpha_{j, i<j} of the depth memory, reduced to what the words need."""

    n_read: int  # earlier blocks the read could draw on (j - 1)
    normalised_entropy: float  # 1 = uniform; NaN with fewer than two earlier blocks or no weight at all
    top_block: int | None  # 0-based index of the largest weight (None when nothing was read)
    top_weight: float  # its weight, of a read renormalised to sum 1
    uniform: float  # 1 / n_read, the uniform share

    @property
    def ratio(self) -> float:
        """The largest weight over the uniform share (1 = no preference)."""
        return self.top_weight / self.uniform if self.n_read else float("nan")

    @property
    def empty(self) -> bool:
        return self.top_block is None


def read_of(weights: Sequence[float] | np.ndarray) -> Read:
    """The :class:`Read` of one row of weights over the earlier blocks (renormalised: the read's eps leaves
    rows a hair under 1). An all-zero row (a variant without a memory read) is empty."""
    row = np.asarray(weights, dtype=np.float64).reshape(-1)
    n = int(row.size)
    mass = float(row.sum()) if n else 0.0
    if n == 0 or mass <= 1e-12:
        return Read(n, float("nan"), None, float("nan"), 1.0 / n if n else float("nan"))
    p = row / mass
    top = int(np.argmax(p))
    entropy = float(-np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)))
    normalised = entropy / math.log(n) if n >= 2 else float("nan")
    return Read(n, normalised, top, float(p[top]), 1.0 / n)


def is_near_uniform(read: Read) -> bool:
    return read.n_read >= 2 and not read.empty and read.normalised_entropy >= NEAR_UNIFORM


def mostly_weight(n_read: int) -> float:
    """The least top weight that lets a read of ``n_read`` earlier blocks be called "mostly" from one block."""
    return max(MOSTLY_WEIGHT, min(MOSTLY_RATIO / n_read, MOSTLY_CAP))


def is_mostly(read: Read) -> bool:
    """True when one block carries the read: only then may a page say "mostly"."""
    return read.n_read >= 2 and not read.empty and read.top_weight >= mostly_weight(read.n_read)


def _share(read: Read, layers: Sequence[int]) -> str:
    return (f"L{layers[read.top_block]} ({read.top_weight:.1%}, {read.ratio:.2f}× the uniform "
            f"{read.uniform:.1%})")


def describe_read(read: Read, layers: Sequence[int]) -> str:
    """One or two sentences on a single read; ``layers`` names the earlier blocks (``layers[i]`` for block i)."""
    if read.n_read == 0:
        return "There is no earlier block to read: the memory is still empty here."
    if read.empty:
        return "This read draws on nothing: the variant reads no depth memory."
    if read.n_read == 1:
        return f"It can read one earlier block only, L{layers[0]}, so it reads it with weight 1: there is no choice."
    entropy = f"normalised entropy {read.normalised_entropy:.3f}, 1 = uniform"
    if is_mostly(read):
        return f"This read is selective ({entropy}): it draws mostly on {_share(read, layers)}."
    if is_near_uniform(read):
        return (f"This read is close to uniform ({entropy}): the router weighs the {read.n_read} earlier blocks "
                f"almost equally — its largest weight, {read.top_weight:.1%} on L{layers[read.top_block]}, is "
                f"{read.ratio:.2f}× the uniform {read.uniform:.1%} — so it carries little information about which "
                "depth it looks back at.")
    return (f"This read leans on some blocks but no single block dominates ({entropy}): the largest weight is "
            f"{_share(read, layers)}, short of the {mostly_weight(read.n_read):.0%} a “mostly” needs here.")


def read_at(trace: RoutingTrace, token: int, block: int) -> Read:
    """The read of ``token`` at routed block ``block`` (0-based): row ``block`` of its memory map."""
    if not 0 <= block < trace.n_routed:
        raise ValueError(f"block must be between 0 and {trace.n_routed - 1}, got {block}")
    return read_of(trace.memory_attention[token, block, :block])


@dataclass(frozen=True)
class MemorySummary:
    """How selective a set of reads is: the mean normalised entropy over the reads with a choice (two or more
    earlier blocks), the share of those reads that are close to uniform, and the most selective one."""

    n_reads: int
    mean_entropy: float  # NaN when nothing was read
    near_uniform_share: float
    mostly_share: float  # share of the reads that draw mostly on one block (:func:`is_mostly`)
    most_selective: tuple[int, int] | None  # (token, block) of the lowest-entropy read
    largest_ratio: float  # the largest weight over its uniform share, over all these reads


def summarise(trace: RoutingTrace, token: int | None = None) -> MemorySummary:
    """The :class:`MemorySummary` of one token's reads, or of the whole prompt's (``token=None``)."""
    # vectorised (a 512-token prompt has ~15k reads and the page re-runs on every click); the same rules as Read
    entropy = memory_row_stats(trace)["normalised_entropy"]  # (T, R), NaN where no choice or no read
    R = trace.n_routed
    weights = np.where(np.tril(np.ones((R, R), dtype=bool), k=-1)[None], trace.memory_attention, 0.0)
    top = weights.max(axis=-1) / np.maximum(weights.sum(axis=-1), 1e-300)  # (T, R) renormalised top weight
    n_read = np.arange(R)
    if token is not None:
        entropy, top = entropy[token:token + 1], top[token:token + 1]
    found = np.isfinite(entropy)
    if not found.any():
        return MemorySummary(0, float("nan"), float("nan"), float("nan"), None, float("nan"))
    needed = np.array([mostly_weight(n) if n >= 2 else np.inf for n in n_read])
    rows, blocks = np.nonzero(found)
    values = entropy[found]
    lowest = int(np.argmin(values))
    first = 0 if token is None else token
    return MemorySummary(int(found.sum()), float(values.mean()), float(np.mean(values >= NEAR_UNIFORM)),
                         float(np.mean(top[found] >= needed[blocks])), (first + int(rows[lowest]), int(blocks[lowest])),
                         float(np.max(top[found] * n_read[blocks])))


def describe_memory(trace: RoutingTrace, token: int | None = None) -> str:
    """What the reads of ``token`` (or of the whole prompt) show, in plain words: close to uniform or not, and
    where a read is selective, which earlier block it draws on and by how much versus uniform."""
    who = "This prompt's tokens" if token is None else "This token"
    if trace.memory_read == "uniform":
        return ("This run replaced every read by the plain mean of the stored values (a uniform read), so the "
                "maps are uniform by construction: they show nothing the router chose.")
    summary = summarise(trace, token)
    if summary.n_reads == 0:
        return f"{who} made no read with a choice: the variant reads no depth memory, or there are too few blocks."
    mean = (f"Averaged over {summary.n_reads} reads with a choice, the normalised entropy is "
            f"{summary.mean_entropy:.3f} (1 = uniform)")
    t, j = summary.most_selective
    most = read_at(trace, t, j)
    where = f"at L{trace.routed_layers[j]}" + ("" if token is not None else f" (token {t})")
    verb = "draws mostly on" if is_mostly(most) else "puts its largest weight on"
    most_words = f"the most selective read, {where}, {verb} {_share(most, trace.routed_layers)}"
    mostly = (f"{summary.mostly_share:.0%} of these reads draw mostly on one block (at least "
              f"{MOSTLY_RATIO:g}× uniform and {MOSTLY_WEIGHT:.0%} of the read; {MOSTLY_CAP:.0%} of it with two "
              "earlier blocks)")
    if summary.mean_entropy >= NEAR_UNIFORM:
        text = (f"{mean}: close to uniform. The router weighs the earlier blocks almost equally, so the map "
                "carries little information about which depth it looks back at; no weight is more than "
                f"{summary.largest_ratio:.2f}× its uniform share.")
        if summary.mostly_share > 0:  # a few reads may still stand out from an even average
            text += f" Still, {mostly}: {most_words}."
        return text
    if summary.mostly_share > 0:
        return f"{mean}: selective. {mostly}; {most_words}."
    return f"{mean}: not uniform, but no read is carried by one block; {most_words}."


@dataclass(frozen=True)
class ForgettingChange:
    """How far training moved the forgetting factors from their initial value (``None`` when it is unknown)."""

    initial: float | None
    largest: float | None  # max |rho_j - rho_init| over the blocks
    block: int | None  # 0-based block of the largest change

    @property
    def moved(self) -> bool | None:
        return None if self.largest is None else self.largest >= RHO_STILL


def forgetting_change(rho: Sequence[float] | np.ndarray, initial: float | None) -> ForgettingChange:
    values = np.asarray(rho, dtype=np.float64).reshape(-1)
    if initial is None or values.size == 0:
        return ForgettingChange(initial, None, None)
    change = np.abs(values - initial)
    block = int(np.argmax(change))
    return ForgettingChange(float(initial), float(change[block]), block)


def describe_forgetting(rho: Sequence[float] | np.ndarray, initial: float | None, layers: Sequence[int]) -> str:
    """One sentence on how far each rho_j moved from its initial value during training."""
    values = np.asarray(rho, dtype=np.float64).reshape(-1)
    if values.size == 0:
        return "This router has no forgetting factors."
    span = f"ρ ranges from {values.min():.4f} to {values.max():.4f} over the {values.size} routed blocks"
    change = forgetting_change(values, initial)
    if change.initial is None:
        return (f"{span}. This trace does not record ρ's initial value (it was saved before that was kept), so how "
                "far training moved ρ is unknown.")
    if not change.moved:
        return (f"ρ did not move during training: every block's ρ is within {RHO_STILL:g} of its initial "
                f"{change.initial:g} (the largest change is {change.largest:.4f}). The forgetting factors are still "
                "where they started, so they show nothing training learned about how fast the memory fades.")
    return (f"ρ moved at most {change.largest:.3f} from its initial {change.initial:g} during training (at "
            f"L{layers[change.block]}, now {values[change.block]:.3f}); {span}.")


@dataclass(frozen=True)
class TourPlan:
    """Which variant the Learn page runs and which of its lessons the loaded checkpoint can support. A note is
    None when its lesson runs; else it says, for the page to show in the lesson's place, why it is left out."""

    variant: str  # the variant every section runs
    variant_note: str | None  # why the sidebar's variant was not used
    memory_note: str | None  # why "the depth memory fills up" is left out
    history_note: str | None  # why "switch the history off" is left out

    @property
    def memory(self) -> bool:
        return self.memory_note is None

    @property
    def history(self) -> bool:
        return self.history_note is None


def tour_plan(trained: str, chosen: str, checkpoint: str) -> TourPlan:
    """Plan the Learn tour for a checkpoint trained as ``trained`` with ``chosen`` picked in the sidebar.

    A lesson needs the part it teaches to have been trained: a local (``no_history``) checkpoint's history head
    ends in a zero-initialised layer it never trained (a = 0, so switching the history off flips nothing by
    construction) and it never trained a memory; a ``no_memread`` checkpoint never trained its memory (its read
    weights are where initialisation left them)."""
    spec = VARIANTS.get(trained, VARIANTS["hero"])
    picked = VARIANTS.get(chosen)
    variant_note = memory_note = history_note = None
    if picked is not None and picked.memory_read and spec.memory_read:
        variant = chosen
    else:  # run the checkpoint as what it was trained to be, not as a variant whose parts it never trained
        variant = trained if trained in VARIANTS else "hero"
        if chosen != variant:
            variant_note = (f"The sidebar's variant **{chosen}** does not fit this tour on **{checkpoint}** (trained "
                            f"as {trained}), so the tour runs it as **{variant}**.")
    if not spec.history:
        memory_note = (f"Left out: **{checkpoint}** was trained as the local router (`{trained}`), without a history "
                       "head or a memory read, so it has no trained depth memory to show. Choose a hero checkpoint "
                       "(hero-10, hero-25, hero-40) in the sidebar to follow this lesson.")
        history_note = (f"Left out: **{checkpoint}** is itself the local router. Its history head was never trained "
                        "and outputs a = 0, so switching the history off would flip no decision by construction — "
                        "a comparison that says nothing about what a history adds. Choose a hero checkpoint to "
                        "follow this lesson.")
    elif not spec.memory_read:
        memory_note = (f"Left out: **{checkpoint}** was trained without the memory read (`{trained}`): its read "
                       "weights are where initialisation left them, so a map of them would teach from noise. Its "
                       "history head was trained, so the next lesson runs.")
    return TourPlan(variant, variant_note, memory_note, history_note)
