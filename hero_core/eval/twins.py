"""Which checkpoints the headline reports, each one's local twin, and the twin's tau at matched compute.

A checkpoint ``<kind>-<budget>[-<tag>...]`` (``hero-10``, ``hero-10-s1``, ``hero-10-r2``, ``no_memread-10-r2``)
has the local twin ``local-<budget>`` with the same stage tags and without a recipe tag (``r2`` to ``r5``): the
no_history router trained with the first recipe's schedule (``hero-10-r2`` -> ``local-10``, ``hero-10-r2-s1`` ->
``local-10-s1``). Comparing the two at their own tau would mix a better router with a different amount of
skipping, so the twin is also run at **matched compute**: the tau at which its param skip on calibration text
(:func:`hero_core.eval.calibration.calibration_blocks`, train-split blocks of every domain) equals the skip the
checkpoint realises there at its own tau (:func:`match_twin`; the search of
:meth:`hero_core.method.model.HeroModel.tau_for_param_skip`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

LOCAL = "local"
RECIPE_TAGS = ("r2", "r3", "r4", "r5", "r7")  # tags of a later training recipe: its twin is the first recipe's local
# router. Recipe 7 (the sized router) has its own local twin in the recipes, local-10-r7, not trained yet; until it is
# bundled, hero-10-r7 is read against local-10 (the paper-width local router), as hero-10-r4 was.
HEADLINE_KINDS = ("hero", "local")  # every bundled checkpoint of these kinds is a headline row ...
RECIPE_KINDS = ("no_memread",)  # ... and of these only under a recipe tag (recipe 2's own ablation twin)
_ROLE = {"hero": 0, "no_memread": 1, LOCAL: 2}  # row order within a budget and stage
# Rows the headline shows even before their checkpoint is bundled (then as "not measured"): the paper-budget
# checkpoints, their twins, and recipe 2 with its ablation twin, trained by `make checkpoints`.
ALWAYS_SHOWN = ("hero-10", "local-10", "hero-25", "local-25", "hero-40", "local-40", "hero-10-r2", "no_memread-10-r2")
# Trained controls whose own training went wrong or was unsteady, so a comparison with them is not about the component
# they lack alone; every page that reads a hero checkpoint against one of them says so (control_caveat). Here only
# what no record holds: why the control was trained again. Every figure of the caveat is read from its training record.
UNSTEADY_CONTROLS = {
    "no_memread-10-r4": "retrained under the degradation guard after the run it replaced had degraded unnoticed",
}
LACKS = {"no_memread": "the memory read", LOCAL: "history", "no_aux": "the auxiliary loss", "no_pos": "position"}
_SHARE_WORDS = {0.5: "half", 0.25: "a quarter of"}  # a rollback's learning-rate scale, as a reader says it


def _above(loss: float, best: float) -> str:
    return f"{100 * (loss / best - 1):.0f} %"


def _rollback_words(rollback: Mapping[str, Any]) -> str:
    scale = rollback["lr_scale"]
    lr = f"{_SHARE_WORDS[scale]} the" if scale in _SHARE_WORDS else f"{scale:g} times the"
    return (f"degraded (held-out loss {_above(rollback['loss'], rollback['best_loss'])} above its best at step "
            f"{rollback['at_step']}) and was rolled back to step {rollback['to_step']} with {lr} learning rate")


def _health_words(health: Mapping[str, Any]) -> str:
    """What the guard saw, from the health record: each rollback, then where the run ended against its best."""
    rollbacks = [r for r in health.get("rollbacks") or [] if r.get("to_step") is not None]
    said = "; then it ".join(_rollback_words(r) for r in rollbacks) if rollbacks else "was never rolled back"
    final, best, tolerance = health["final_loss"], health["best_loss"], health["rule"]["tolerance"]
    where = "inside" if final <= best * (1 + tolerance) else "beyond"
    kept = "" if health.get("kept") == "final" else f"; the checkpoint keeps the state of step {health['best_step']}"
    then = ", then drifted again and" if rollbacks and final > best else " and"
    return (f"under the guard it {said}{then} ended {_above(final, best)} above its best, {where} the guard's "
            f"{100 * tolerance:.0f} % tolerance{kept}")


def _seeds_words(kind: str, seeds: Mapping[str, Any] | None) -> str:
    """Where the across-seed summary measures the same two arms: how many seeds, and whether they separate."""
    row = ((seeds or {}).get("differences") or {}).get(f"hero - {kind}")
    arms = (seeds or {}).get("arms") or {}
    if not row or "hero" not in arms or kind not in arms:
        return ""
    n = min(len(arms["hero"]["runs"]), len(arms[kind]["runs"]))
    apart = [m.split(":")[-1] for m, cell in row.items() if cell.get("verdict", "not separable") != "not separable"]
    verdict = f"they separate on {', '.join(apart)}" if apart else "the two arms are not separable"
    return f"; over {n} training seeds of the first stage {verdict} (docs/seeds.md)"


def control_caveat(name: str, training: Mapping[str, Any] | None, seeds: Mapping[str, Any] | None = None) -> str | None:
    """The caveat a page shows beside ``name`` when it is an unsteady control (None otherwise): its training
    record's ``health`` and, where given, the across-seed summary (``arms`` and ``differences``, as in
    hero_core/checkpoints/seeds.json) give every figure; a record that lacks one leaves its clause out."""
    health = (training or {}).get("health") or {}
    parsed = parse_name(name)
    if name not in UNSTEADY_CONTROLS or parsed is None:
        return None
    hero = "-".join(["hero", str(parsed.budget), *parsed.tags])
    guard = f"; {_health_words(health)}" if health.get("final_loss") is not None else ""
    return (f"{name} is an unsteady control: {UNSTEADY_CONTROLS[name]}{guard}. Part of {hero}'s "
            f"lead over it is that instability, not {LACKS.get(parsed.kind, 'the part it lacks')} alone"
            f"{_seeds_words(parsed.kind, seeds)}.")


def bundled_control_caveat(name: str) -> str | None:
    """:func:`control_caveat` of a bundled checkpoint, from its own hero_config.json and the shipped seed summary."""
    from hero_core.eval.study.bundled import load_shipped
    from hero_core.method.checkpoint import BUNDLED_DIR, CONFIG_FILE

    config = BUNDLED_DIR / name / CONFIG_FILE
    if name not in UNSTEADY_CONTROLS or not config.is_file():
        return None
    return control_caveat(name, json.loads(config.read_text(encoding="utf-8")).get("training"), load_shipped())


@dataclass(frozen=True)
class Name:
    """A checkpoint name read as ``<kind>-<budget>[-<tag>...]``."""

    kind: str
    budget: int
    tags: tuple[str, ...]

    @property
    def recipe(self) -> tuple[str, ...]:
        return tuple(t for t in self.tags if t in RECIPE_TAGS)

    @property
    def stage(self) -> tuple[str, ...]:
        return tuple(t for t in self.tags if t not in RECIPE_TAGS)


def parse_name(name: str) -> Name | None:
    """``hero-10-r2-s1`` -> Name("hero", 10, ("r2", "s1")); None for a name not of that form."""
    parts = name.split("-")
    if len(parts) < 2 or not parts[1].isdigit():
        return None
    return Name(parts[0], int(parts[1]), tuple(parts[2:]))


def is_headline(name: str) -> bool:
    """Every hero-/local- checkpoint, and recipe-tagged ablations (``no_memread-10-r2``)."""
    parsed = parse_name(name)
    return parsed is not None and (parsed.kind in HEADLINE_KINDS
                                   or (parsed.kind in RECIPE_KINDS and bool(parsed.recipe)))


def headline_order(name: str) -> tuple:
    """Rows by budget, then finished checkpoints before earlier stages, then hero, recipe-2, ablation, local."""
    parsed = parse_name(name)
    if parsed is None:
        return (10**6, (), 9, (), name)
    return (parsed.budget, parsed.stage, _ROLE.get(parsed.kind, 1), parsed.recipe, name)


def headline_checkpoints(names: Iterable[str] | None = None) -> list[str]:
    """The headline's checkpoints among ``names`` (default: every bundled checkpoint), in table order."""
    if names is None:
        from hero_core.method.checkpoint import bundled_names

        names = bundled_names()
    return sorted((n for n in names if is_headline(n)), key=headline_order)


def twin_name(name: str) -> str | None:
    """The local twin a checkpoint is compared with (None for a local checkpoint or an unparsed name)."""
    parsed = parse_name(name)
    if parsed is None or parsed.kind == LOCAL:
        return None
    return "-".join([LOCAL, str(parsed.budget), *parsed.stage])


def counterpart(hero: str, kind: str) -> str | None:
    """The checkpoint of ``kind`` that ``hero`` is compared with: the local twin for ``local`` (hero-10-r4 ->
    local-10), else the same budget and tags (hero-10-r4 -> no_memread-10-r4); None for a name not of that form."""
    parsed = parse_name(hero)
    if parsed is None:
        return None
    if kind == LOCAL:
        return twin_name(hero)
    return "-".join([kind, str(parsed.budget), *parsed.tags])


def counterparts(hero: str, names: Iterable[str]) -> list[str]:
    """Every checkpoint among ``names`` that ``hero`` (a hero-kind name) is read against at matched compute."""
    parsed = parse_name(hero)
    if parsed is None or parsed.kind != "hero":
        return []
    return [n for n in names if n != hero and (p := parse_name(n)) is not None and p.kind != "hero"
            and counterpart(hero, p.kind) == n]


def matched_method(checkpoint: str, twin: str) -> str:
    """The run name of ``twin`` at ``checkpoint``'s param skip, e.g. ``local-10@hero-10``."""
    return f"{twin}@{checkpoint}"


@dataclass(frozen=True)
class MatchedTwin:
    """A checkpoint's twin at matched compute: its tau and both skips on the calibration blocks."""

    checkpoint: str
    twin: str
    method: str  # the run's name in results (matched_method)
    target_skip: float  # the checkpoint's param skip on the calibration blocks at its own tau
    tau: float  # the twin's tau whose skip there came closest to it
    realised_skip: float  # the twin's param skip there at that tau

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def match_twin(hero, twin, blocks, *, iters: int = 12) -> MatchedTwin:
    """``twin`` (a HeroModel) at the tau whose param skip on ``blocks`` matches ``hero``'s at its own tau."""
    from hero_core.method.tau_search import realised_skip

    target = realised_skip(hero, blocks, hero.config.variant, hero.config.tau)
    tau, skip = twin.tau_for_param_skip(blocks, None, twin.config.variant, target, iters=iters)
    return MatchedTwin(hero.checkpoint_name, twin.checkpoint_name,
                       matched_method(hero.checkpoint_name, twin.checkpoint_name), float(target), float(tau),
                       float(skip))


def match_twins(models: Mapping[str, Any], blocks, load: Callable[[str], Any], available: Iterable[str],
                *, iters: int = 12) -> dict[str, MatchedTwin]:
    """:func:`match_twin` for every model of ``models`` (name -> HeroModel) whose twin is in ``available``;
    a twin not among ``models`` is loaded with ``load(name)``. Keyed by the checkpoint's name."""
    available = set(available)
    out = {}
    for name, hero in models.items():
        twin = twin_name(name)
        if twin is None or twin not in available:
            continue
        twin_model = models[twin] if twin in models else load(twin)
        out[name] = match_twin(hero, twin_model, blocks, iters=iters)
    return out
