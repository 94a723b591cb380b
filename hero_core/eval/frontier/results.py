"""The quality results of the bundled checkpoints (``make results`` runs this first): docs/results.json.

* the **frontier**: every bundled hero-/local- checkpoint swept over tau on held-out text (40 texts per domain,
  192 tokens each), the oracle reference (not deployable) and random skipping with hero-10's adapters; the
  ablations at their own tau. Domains run in parallel processes (``--jobs``), one torch thread each.
* **greedy chat answers** of dense, hero-10 and local-10 on held-out chat prompts: the common prefix with the
  dense answer within its first 24 tokens, and five answers side by side;
* **memory-attention entropy** of each checkpoint (1 = uniform over the earlier blocks).

Then ``scripts/quality_report.py`` renders docs/results.md, docs/figures/frontier.png and the README block.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hero_core.backbones.threads import set_threads
from hero_core.data.texts import DOMAINS
from hero_core.eval.frontier.results_sections import (
    MAX_TOKENS,
    bf16_check,
    generations,
    memory_entropy,
    read_matters,
)
from hero_core.files import say_wrote
from hero_core.method.model import DEFAULT_CHECKPOINT

# This module is scripts/make_frontier.py's command line (its docstring is --help): the frontier in one process
# per domain (each runs this module with --part), merged, then the sections beside it (results_sections).
SELF = "hero_core.eval.frontier.results"  # what each domain's process runs

ROOT = Path(__file__).resolve().parents[3]

CURVES = ("hero-10", "local-10", "hero-25", "local-25", "hero-40", "local-40")
ABLATIONS = ("no_memread-10", "no_aux-10", "no_pos-10",
             "hero-10-r2", "no_memread-10-r2",  # recipe 2 (selective memory) and its twin: read like ablations
             "hero-10-r3", "no_memread-10-r3",  # recipe 3 (answer-weighted) and its twin
             "hero-10-r4", "no_memread-10-r4",  # recipe 4, the default, and its twin
             "hero-10-r5", "hero-13-r5",  # recipe 5: hero-10-r4 continued on mixed-length blocks
             "hero-10-r7",  # recipe 7, the default: recipe 4 with the router sized to the backbone
             "hero-25-r7", "hero-40-r7")  # the higher budgets at recipe 7's widths
# First stages, measured beside the finished checkpoints (the ablations at equal training tokens).
STAGE_ONE = ("hero-10-s1", "local-10-s1", "no_memread-10-s1", "no_aux-10-s1", "no_pos-10-s1", "hero-10-r2-s1",
             "no_memread-10-r2-s1")
TAUS = (0.35, 0.5, 0.65, 0.8)  # the -10 curves; the -25 and -40 checkpoints get FOLLOW_TAUS
# Checkpoints a full run also sweeps over TAUS, so the equal-skip tables can read them at another one's skip (the
# rest are read at their own tau only); what `--add NAME --sweep` does for one checkpoint.
SWEPT = ("no_memread-10", "no_aux-10", "no_pos-10", "local-10-s1", "no_memread-10-s1", "no_aux-10-s1",
         "no_pos-10-s1", "hero-10-r2-s1", "no_memread-10-r2-s1", "hero-10-r4", "no_memread-10-r4", "hero-10-r7")
FOLLOW_TAUS = (0.35, 0.5, 0.65)  # around the -25 / -40 checkpoints' own tau, enough to read them at equal skip
READ_TEXTS = 20  # held-out texts per domain for the read-matters ablation


def load_models(names):
    from hero_core.backbones.loading import load_backbone
    from hero_core.method import checkpoint as ckpt
    from hero_core.method.model import load_checkpoints

    bundled = ckpt.bundled_names()
    for name in names:
        if name not in bundled:
            print(f"{name}: not bundled, left out", flush=True)
    return load_checkpoints([name for name in names if name in bundled], load_backbone(device="cpu"))


def frontier_part(domain: str, limit: int, out: Path, only: list[str] | None = None, sweep: bool = False) -> None:
    """One domain of the frontier; with ``only``, just those checkpoints (no references), at their own tau or,
    with ``sweep``, over TAUS like the -10 curves."""
    import torch

    from hero_core.eval.frontier.curves import frontier

    set_threads(1)
    models = load_models(only or [*CURVES, *ABLATIONS, *STAGE_ONE])
    def taus_of(name: str) -> tuple[float, ...]:
        if name in CURVES:
            return TAUS if name.endswith("-10") else FOLLOW_TAUS
        own = models[name].config.tau
        swept = sweep or (not only and name in SWEPT)
        return tuple(sorted({*TAUS, own})) if swept else (own,)  # the own tau always: the tables read it

    taus = {name: taus_of(name) for name in models}
    with torch.no_grad():
        result = frontier(models, oracle=not only, random=not only, static=not only, expert=not only, taus=taus,
                          limit=limit, domains=(domain,), max_tokens=MAX_TOKENS, progress=True)
    out.write_text(json.dumps(result))


def run_parts(limit: int, jobs: int, only: list[str] | None, sweep: bool = False) -> dict:
    """Every domain in its own process (``jobs`` at a time, one torch thread each), merged."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        paths = {d: Path(tmp) / f"{d}.json" for d in DOMAINS}
        pending = list(DOMAINS)
        running: list[subprocess.Popen] = []
        while pending or running:
            while pending and len(running) < jobs:
                d = pending.pop(0)
                extra = (["--add", *only] if only else []) + (["--sweep"] if sweep else [])
                running.append(subprocess.Popen([sys.executable, "-m", SELF,
                                                 "--part", d, "--part-out", str(paths[d]), "--limit", str(limit),
                                                 *extra], env=env))
            for proc in list(running):
                if proc.poll() is not None:
                    running.remove(proc)
                    if proc.returncode:
                        raise SystemExit(f"frontier part failed ({proc.args})")
            time.sleep(1)
        return merge([json.loads(paths[d].read_text()) for d in DOMAINS])


def add_checkpoints(names: list[str], limit: int, jobs: int, out: Path, sweep: bool = False) -> int:
    """Evaluate checkpoints that landed after ``out`` was written and merge them into it (same texts and cut)."""
    part = run_parts(limit, jobs, names, sweep)
    models = load_models(names)
    import torch

    with torch.no_grad():
        entropy, read = memory_entropy(models, limit=10), read_matters(models, limit=READ_TEXTS)
    result = json.loads(out.read_text())  # read now, not before the run: another job may have written it since
    result["frontier"]["curves"].update(part["curves"])
    result.setdefault("memory_entropy", {}).update(entropy)
    result.setdefault("read_matters", {}).update(read)
    for n, m in models.items():
        result["checkpoints"][n] = {"variant": m.config.variant, "tau": m.config.tau,
                                    "branch_scaling": m.config.branch_scaling,
                                    "training": {k: v for k, v in m.training_info.items() if k != "train_config"}}
    out.write_text(json.dumps(result, indent=1))
    print(f"added {', '.join(names)} to {out}")
    return 0


def add_read_matters(names: list[str], out: Path) -> int:
    """The read-matters ablation of checkpoints already in ``out`` (their frontier stays as it is)."""
    import torch

    set_threads(1)
    with torch.no_grad():
        measured = read_matters(load_models(names), limit=READ_TEXTS)
    return merge_measure(out, "read_matters", measured)


def add_bf16_check(limit: int, out: Path) -> int:
    """Only the bf16 check (the default checkpoint on a bf16 backbone against fp32), merged into ``out``."""
    import torch

    set_threads(1)
    with torch.no_grad():
        measured = bf16_check(load_models([DEFAULT_CHECKPOINT]), limit=limit // 2)
    return merge_measure(out, "bf16", measured)


def add_baselines(limit: int, out: Path) -> int:
    """Only the static-pruning and MoD top-k baselines (with the first curve's adapters, as the references), merged
    into ``out``'s frontier beside the routers (same texts and cut)."""
    import torch

    from hero_core.eval.frontier.curves import frontier

    set_threads(1)
    models = load_models([CURVES[0]])
    with torch.no_grad():
        part = frontier(models, static=True, expert=True, taus={CURVES[0]: ()}, limit=limit, max_tokens=MAX_TOKENS,
                        progress=True)
    result = json.loads(out.read_text())  # read now, not before the run: another job may have written it since
    result["frontier"]["curves"].update(part["curves"])
    out.write_text(json.dumps(result, indent=1))
    print(f"added the static-pruning and top-k baselines to {out}")
    return 0


def merge_measure(out: Path, key: str, measured: dict) -> int:
    result = json.loads(out.read_text())  # read now, not before the run: another job may have written it since
    result.setdefault(key, {}).update(measured)
    out.write_text(json.dumps(result, indent=1))
    return 0


def merge(parts: list[dict]) -> dict:
    merged = json.loads(json.dumps(parts[0]))
    merged["domains"] = [d for p in parts for d in p["domains"]]
    for part in parts[1:]:
        for name, curve in part["curves"].items():
            if name not in merged["curves"]:  # a checkpoint that landed while the parts ran: keep what was measured
                merged["curves"][name] = curve
                continue
            for into, point in zip(merged["curves"][name]["points"], curve["points"]):
                into.update({d: point[d] for d in part["domains"]})
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=40, help="held-out texts per domain")
    parser.add_argument("--jobs", type=int, default=2, help="parallel domain processes")
    parser.add_argument("--generation-prompts", type=int, default=12)
    parser.add_argument("--part", choices=DOMAINS, help=argparse.SUPPRESS)
    parser.add_argument("--part-out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results.json")
    parser.add_argument("--add", nargs="+", help="only evaluate these checkpoints (own tau) and merge them into --out")
    parser.add_argument("--sweep", action="store_true",
                        help="with --add: sweep tau like the -10 curves, so they can be read at hero-10's skip")
    parser.add_argument("--read-matters", nargs="+", metavar="CHECKPOINT",
                        help="only run the read-matters ablation on these checkpoints and merge it into --out")
    parser.add_argument("--baselines", action="store_true",
                        help="only run static pruning and MoD top-k (hero-10's adapters) and merge them into --out")
    parser.add_argument("--bf16-check", action="store_true",
                        help=f"only rerun the bf16 check ({DEFAULT_CHECKPOINT}, the default checkpoint, --limit / 2 "
                             "texts a domain) and merge it into --out")
    args = parser.parse_args(argv)
    if args.read_matters:
        return add_read_matters(args.read_matters, args.out)
    if args.bf16_check:
        return add_bf16_check(args.limit, args.out)
    if args.baselines:
        return add_baselines(args.limit, args.out)
    if args.sweep and not args.add:
        parser.error("--sweep goes with --add")
    if args.part:
        frontier_part(args.part, args.limit, args.part_out, args.add, args.sweep)
        return 0
    if args.add:
        return add_checkpoints(args.add, args.limit, args.jobs, args.out, args.sweep)
    start = time.perf_counter()
    result = {"frontier": run_parts(args.limit, args.jobs, None)}
    import torch

    set_threads(max(1, args.jobs))
    models = load_models([*CURVES, *ABLATIONS, *STAGE_ONE])
    with torch.no_grad():
        result["generations"] = generations(models, args.generation_prompts, STAGE_ONE)
        result["memory_entropy"] = memory_entropy(models, limit=max(4, args.limit // 4))
        result["read_matters"] = read_matters(models, limit=READ_TEXTS)
        result["bf16"] = bf16_check(models, limit=args.limit // 2)
    result["checkpoints"] = {n: {"variant": m.config.variant, "tau": m.config.tau,
                                 "branch_scaling": m.config.branch_scaling,
                                 "training": {k: v for k, v in m.training_info.items() if k != "train_config"}}
                             for n, m in models.items()}
    result["wall_seconds"] = round(time.perf_counter() - start, 1)
    args.out.write_text(json.dumps(result, indent=1))
    return say_wrote(args.out, took_s=result["wall_seconds"])


if __name__ == "__main__":
    sys.exit(main())
