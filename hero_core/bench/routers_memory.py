"""Resident memory of several router checkpoints on one backbone, each way measured in a fresh process:

* ``one``: one checkpoint (the app showing one page);
* ``shared``: four checkpoints on one shared backbone (the app's Compare with four runs, ``load_routers``);
* ``separate``: the same four, each loaded with its own backbone (what the app did before the backbone pool).

Each process loads, routes one prompt with every checkpoint it holds, and reports its resident set size.
Target (issue "One backbone, many routers"): shared ≤ 1.25 × one. Run ``python -m hero_core.bench.routers_memory``
(``make bench`` does, writing docs/routers_memory.json); it prints one line per way and the ratios.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hero_core.bench.fresh_process import bench_main, child_result

CHECKPOINTS = ("hero-10-r7", "local-10", "hero-25-r7", "hero-40-r7")
PROMPT = "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n"
WAYS = ("one", "shared", "separate")
TARGET = 1.25
MARKER = "HERO_ROUTERS_MEMORY"


def _rss_bytes() -> int:
    import psutil  # a dependency of accelerate, which hero_core requires

    return int(psutil.Process().memory_info().rss)


def measure(way: str, checkpoints: tuple[str, ...]) -> dict:
    """In this (fresh) process: load ``checkpoints`` the given way, trace the prompt with each, report memory."""
    from hero_core.backbones.pool import SHARED_BACKBONES
    from hero_core.backbones.threads import set_threads
    from hero_core.method.model import load_hero, load_routers

    set_threads(1)
    before = _rss_bytes()
    if way == "one":
        heroes = load_routers(checkpoints[:1], device="cpu")
    elif way == "shared":
        heroes = load_routers(checkpoints, device="cpu")
    else:
        heroes = [load_hero(name, device="cpu") for name in checkpoints]
    skips = [round(hero.trace(PROMPT).param_skip, 4) for hero in heroes]
    return {"way": way, "checkpoints": [h.checkpoint_name for h in heroes], "param_skip": skips,
            "rss_bytes": _rss_bytes(), "rss_added_bytes": _rss_bytes() - before,
            "backbone_loads": SHARED_BACKBONES.loads if way != "separate" else len(heroes),
            "distinct_backbones": len({id(h.model) for h in heroes})}


def held_bytes(heroes) -> int:
    """Bytes of every parameter and buffer the models hold, each storage counted once (a shared backbone once)."""
    seen, total = set(), 0
    for hero in heroes:
        for module in (hero.model, hero.router):
            for tensor in [*module.parameters(), *module.buffers()]:
                key = (tensor.device, tensor.untyped_storage().data_ptr())
                if key not in seen:
                    seen.add(key)
                    total += tensor.untyped_storage().nbytes()
    return total


def routers_on_one_backbone(backbone, n: int = 4, workdir: str | Path | None = None) -> dict:
    """Compare's case on an already loaded backbone (a GPU check's NF4 model): ``n`` router checkpoints, saved and
    loaded back through the checkpoint path the app uses (fingerprint checked), held side by side on ``backbone``.
    Reports the bytes held with one and with all ``n`` (storages counted once), CUDA's allocated memory where the
    backbone is on a GPU, and how many distinct backbones the models point at (1 is the point)."""
    import tempfile

    import torch

    from hero_core.method.checkpoint import save_checkpoint
    from hero_core.method.model import fresh_router, hero_on_backbone, spread_gates

    cuda = backbone.device.type == "cuda"
    allocated = (lambda: torch.cuda.memory_allocated(backbone.device)) if cuda else (lambda: None)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for seed in range(n):
            torch.manual_seed(seed)
            save_checkpoint(Path(tmp) / f"router-{seed}", spread_gates(fresh_router(backbone)), backbone.fingerprint,
                            backbone.name)
        heroes, rows = [], []
        for seed in range(n):
            heroes.append(hero_on_backbone(Path(tmp) / f"router-{seed}", backbone))
            skip = heroes[-1].trace(PROMPT).param_skip
            rows.append({"routers": seed + 1, "held_bytes": held_bytes(heroes), "cuda_allocated_bytes": allocated(),
                         "param_skip": round(float(skip), 4)})
    one, all_n = rows[0], rows[-1]
    ratio = all_n["held_bytes"] / one["held_bytes"]
    cuda_ratio = (all_n["cuda_allocated_bytes"] / one["cuda_allocated_bytes"]) if cuda else None
    return {"backbone": backbone.name, "quantization": backbone.quantization, "device": str(backbone.device),
            "rows": rows, "distinct_backbones": len({id(h.model) for h in heroes}),
            "ratio_held": round(ratio, 3), "ratio_cuda_allocated": None if cuda_ratio is None else round(cuda_ratio, 3),
            "target": TARGET, "target_met": (cuda_ratio if cuda else ratio) <= TARGET}


def run_all(checkpoints: tuple[str, ...] = CHECKPOINTS) -> dict:
    """Every way in its own fresh process; the ratios of resident memory to one checkpoint's."""
    results = {}
    for way in WAYS:
        results[way] = child_result(__spec__.name, ["--way", way, "--checkpoints", *checkpoints], MARKER)
    one = results["one"]["rss_bytes"]
    ratios = {way: round(results[way]["rss_bytes"] / one, 3) for way in WAYS}
    return {"ways": results, "ratio_to_one": ratios, "target": TARGET,
            "target_met": ratios["shared"] <= TARGET, "checkpoints": list(checkpoints)}


def summary(report: dict) -> list[str]:
    """One line per way and the target's verdict."""
    lines = [f"{way:>9}: {len(row['checkpoints'])} checkpoint(s), {row['distinct_backbones']} backbone(s) in memory, "
             f"RSS {row['rss_bytes'] / 2**30:.2f} GiB = x{report['ratio_to_one'][way]:.2f} of one checkpoint"
             for way, row in report["ways"].items()]
    return [*lines, f"target: four checkpoints on one backbone <= x{TARGET:.2f} of one: "
                    f"{'met' if report['target_met'] else 'MISSED'}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--way", choices=WAYS, help="measure one way in this process (used by the full run)")
    parser.add_argument("--checkpoints", nargs="+", default=list(CHECKPOINTS), help="bundled checkpoints to load")
    return bench_main(parser, MARKER, summary=summary,
                      child=lambda args: measure(args.way, tuple(args.checkpoints)) if args.way else None,
                      run=lambda args: run_all(tuple(args.checkpoints)))


if __name__ == "__main__":
    sys.exit(main())
