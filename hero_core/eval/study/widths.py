"""The bundled width study: does a router sized to its backbone keep its quality at equal net compute? One instance of
``python -m hero_core study`` (``make study-widths``).

Its arms are the first training stage of recipe 2's HeRo at three router widths, each over the training seeds
bundled (hero_core.method.checkpoint_info.WIDTH_ARMS): the paper's widths (256-unit heads, 128-unit state encoder:
6.3 % of SmolLM2-135M a token), sized to the backbone (recipe 7: 32 / 32, ~1.4 %) and the narrowest (recipe 8:
16 / 16). They differ in the router's widths alone. Every run is measured at the tau that saves the same share of
a dense token's FLOPs *net* of its own router and adapters (``match="net"``), so a cheap router is not compared at
a param skip that costs it less; the references (static pruning, random skipping, the oracle) sit at the same net
saving, charged their adapters only. Only arms with at least two seeds trained enter, at the seeds every entered arm
has (the spec's one seed count); the report says which were left out.
"""

from __future__ import annotations

from pathlib import Path

from hero_core.eval.study.spec import StudySpec
from hero_core.method.checkpoint import BUNDLED_DIR, CONFIG_FILE
from hero_core.method.checkpoint_info import WIDTH_ARMS, seed_runs

ROOT = Path(__file__).resolve().parents[3]
STORE = ROOT / "docs" / "widths"  # the measurements and report, committed
ARM_NAMES = dict(zip(WIDTH_ARMS, ("paper widths", "sized", "narrowest"), strict=True))
NET_SAVING = 0.06  # the default's target: 6 % of a dense token's FLOPs saved after the router is charged
MIN_SEEDS = 2
WIDTH_LIMIT = 24  # held-out texts per domain: each run is also read with three references at its net saving


def trained_seeds(arm: str) -> list[str]:
    """The bundled runs of ``arm`` that are trained, seed 0 first, stopping at the first missing seed."""
    out = []
    for seed, name in enumerate(seed_runs(arm)):
        bundled = name if seed == 0 else f"seeds/{name}"
        if not (BUNDLED_DIR / bundled / CONFIG_FILE).is_file():
            break
        out.append(bundled)
    return out


def widths_spec(out: Path = STORE, **settings) -> tuple[StudySpec, list[str]]:
    """The width study over the seeds trained so far, and the arms left out (fewer than two seeds)."""
    available = {arm: trained_seeds(arm) for arm in WIDTH_ARMS}
    entered = {arm: runs for arm, runs in available.items() if len(runs) >= MIN_SEEDS}
    left_out = [f"{ARM_NAMES[arm]} ({arm}: {len(runs)} seed{'s' if len(runs) != 1 else ''} trained)"
                for arm, runs in available.items() if arm not in entered]
    if len(entered) < 2:
        raise ValueError(f"the width study needs two arms with {MIN_SEEDS}+ seeds trained; have "
                         f"{ {a: len(r) for a, r in available.items()} } (make checkpoints trains them)")
    seeds = min(len(runs) for runs in entered.values())
    existing = {f"{ARM_NAMES[arm]}/{seed}": runs[seed] for arm, runs in entered.items() for seed in range(seeds)}
    spec = StudySpec(out=str(out), arms=tuple(ARM_NAMES[a] for a in entered), seeds=seeds, skip=0.10, steps=750,
                     match="net", net_saving=NET_SAVING, existing=existing, measures_dir=str(out),
                     title="Router width at equal net compute, across training seeds", **settings)
    return spec, left_out
