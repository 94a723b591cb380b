"""Benchmark routed against dense inference, decoding, tracing, training and memory (``python -m hero_core bench``).

Everything runs side by side in one process, so the comparisons share weights, threads and machine load.
Every section but memory runs once per backbone precision (``--dtypes``, default ``fp32,bf16``: the
backbone loaded in that dtype, routers in fp32), and the JSON keeps each precision's sections in
``result["precisions"][name]``; targets are evaluated in each precision and tagged with it. The sections:

* **prefill**: dense vs each routed configuration (the default, ``hero-25-r7``, ``hero-40-r7``) on batches of
  prompts; the achieved speed-up (dense time / routed time) next to the *ideal* one implied by the FLOPs the routed
  pass really skipped (its executed matrix through :mod:`hero_core.measures.accounting`):
  ``ideal = sum_t dense_flops_t / sum_t (dense_flops_t - saved_flops_t)``, router and adapter work charged.
* **decode**: greedy KV-cache decoding of equal-length prompts at batch 1 and 8, tokens/s, same ideal.
* **recording**: a routed forward with ``record=True`` vs ``record=False`` (and the trace assembly).
* **overhead**: the ``dense`` variant through the wrappers vs the bare backbone (wrappers taken off).
* **training**: a routed forward + backward + AdamW step on a copy of the router (as ``train.py`` does)
  vs a dense forward + backward to the input embeddings.
* **memory**: peak resident memory of the backbone in full precision vs NF4, one subprocess per config.

Timing: after warm-up, the configurations of a section run interleaved (rotating order) ``reps``
times; figures are medians with quartiles, min and max. A ratio is the median of the *paired* per-rep
ratios (the two runs of a pair are adjacent in time, so slow drifts of machine load cancel). Wall
time is the headline; process CPU time is kept too: with one thread it is much less sensitive to
other processes sharing the cores. The thread count is set explicitly and the load average is
recorded at the start, the end and before every section.

When a checkpoint named by ``--checkpoints`` is missing (or trained for another backbone), a
*synthetic* router stands in: a fresh router with spread gates whose threshold tau is calibrated on
the benchmark's prompt text so that it skips as many FFNs as the name's target param skip implies. The JSON and the
report say so: its speed figures are real, its quality is meaningless.

The FLOP ideal is :func:`hero_core.measures.accounting.flop_ideal`; decoding is
:meth:`hero_core.method.model.HeroModel.decode`. The modules behind it: :mod:`hero_core.bench`.

This module: the run (:func:`run_benchmark`: every section of a :class:`~hero_core.bench.inputs.BenchConfig` into one
JSON-ready dict) and its command line; this docstring is ``python -m hero_core bench --help``.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch

from hero_core.backbones.threads import threads_for_a_while
from hero_core.bench.inputs import (
    DEFAULT_BENCH_CHECKPOINTS,
    BenchConfig,
    batch_of,
    load_routed_configs,
    parse_shape,
    token_pool,
)
from hero_core.bench.sections import (
    bench_decode,
    bench_memory,
    bench_overhead,
    bench_prefill,
    bench_recording,
    bench_training,
)
from hero_core.bench.targets import SCHEMA, evaluate_targets
from hero_core.bench.timing import available_cores, load_average, machine_info, resolve_threads
from hero_core.method.inject import prefill_decides_in_bf16

PRECISION_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16"}


def _backbone_dir_for_probe(given_hero, backbone_arg: str | None, tmp: Path) -> str | None:
    """A directory the memory probe can load: the embedded model, the user's path, or a saved copy."""
    from hero_core.backbones.loading import EMBEDDED_NAME
    from hero_core.method.inject import unwrapped

    if backbone_arg:
        return str(backbone_arg)
    if given_hero is None or given_hero.backbone.name == EMBEDDED_NAME:
        return None
    with unwrapped(given_hero.model):  # e.g. the tiny test model: save it so a fresh process can load it
        given_hero.model.save_pretrained(tmp / "backbone")
    given_hero.tokenizer.save_pretrained(tmp / "backbone")
    return str(tmp / "backbone")


def resolve_precisions(names: tuple[str, ...], device: torch.device, quantization: str | None,
                       say: Callable[[str], None]) -> list[tuple[str, torch.dtype | None]]:
    """(name, torch dtype) of every precision to measure: ``auto`` resolved, duplicates dropped (``auto``
    next to ``fp32`` would time fp32 twice). An NF4 backbone is one precision of its own: its compute
    precision is the NF4 loader's, so the dtypes asked for do not apply."""
    if quantization:
        if len(names) > 1:
            say(f"note: --quantization {quantization} times one precision ({quantization}); --dtypes is ignored")
        return [(quantization, None)]
    from hero_core.backbones.precision import resolve_dtype

    resolved: dict[str, torch.dtype] = {}
    for name in names:
        dtype = resolve_dtype(name, device)
        resolved.setdefault(PRECISION_NAMES[dtype], dtype)
    return list(resolved.items())


def backbone_dtype(hero) -> torch.dtype:
    return next(hero.model.parameters()).dtype


def prefill_decisions(router, dtype: torch.dtype) -> str:
    """The precision ``router``'s multi-token passes decide in on a backbone in ``dtype`` (decode steps: fp32)."""
    return "bf16 autocast" if prefill_decides_in_bf16(router, dtype) else "fp32"


def in_dtype(hero, dtype: torch.dtype):
    """``hero`` with its backbone in ``dtype``: ``hero`` itself when it already is, else a converted copy
    that shares the (fp32) router. The copy keeps the caller's model untouched: casting it to bf16 and
    back would round its weights."""
    if backbone_dtype(hero) == dtype:
        return hero
    model = copy.deepcopy(hero.model).to(dtype)  # the routing wrappers and pass hook come along
    other = copy.copy(hero)
    other.backbone = replace(hero.backbone, model=model)
    other.model = model
    return other


def _hero_in_precision(dtype: torch.dtype | None, given_hero, *, backbone, quantization, device):
    """The model to time in one precision: the caller's (converted when needed) or a freshly loaded backbone
    with a fresh router (the routed configurations bring their own routers)."""
    if given_hero is not None:
        return given_hero if dtype is None else in_dtype(given_hero, dtype)
    from hero_core.backbones.loading import load_backbone
    from hero_core.method.model import HeroModel, fresh_router

    precision = {} if dtype is None else {"dtype": dtype}
    bb = load_backbone(backbone, quantization=quantization, device=device, **precision)
    return HeroModel(bb, fresh_router(bb), "bench")


def run_benchmark(cfg: BenchConfig, hero=None, *, backbone: str | None = None, quantization: str | None = None,
                  device: str = "auto", say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every section of ``cfg`` in every precision of ``cfg.dtypes``; return a JSON-ready dict.

    ``hero``: a :class:`~hero_core.method.model.HeroModel` to measure (e.g. ``tiny_hero()`` in tests; a converted
    copy is timed in each other precision); by default the backbone named by ``backbone`` (the embedded
    SmolLM2-135M) is loaded in each precision with a fresh router."""
    say = say or (lambda text: print(text, file=sys.stderr, flush=True))
    threads = resolve_threads(cfg.threads)
    with threads_for_a_while(threads):
        return _run(cfg, hero, threads, backbone=backbone, quantization=quantization, device=device, say=say)


def _run(cfg: BenchConfig, given_hero, threads: int, *, backbone, quantization, device, say) -> dict[str, Any]:
    from hero_core.backbones.loading import resolve_device

    load_start = load_average()
    started = time.time()
    dev = given_hero.device if given_hero is not None else resolve_device(device)
    cores = available_cores()
    if load_start and load_start[0] > max(0.5, cores - threads):
        say(f"warning: load average {load_start[0]} on {cores} cores before the benchmark: other processes "
            f"compete for the CPU, timings will be slow and noisy (process CPU time is recorded as well)")
    result: dict[str, Any] = {
        "schema": SCHEMA, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "config": _config_dict(cfg),
        "machine": machine_info(dev), "load": {"start": load_start, "sections": {}}, "precisions": {},
    }
    pool = None
    for name, dtype in resolve_precisions(cfg.dtypes, dev, quantization, say):
        hero = _hero_in_precision(dtype, given_hero, backbone=backbone, quantization=quantization, device=device)
        result.setdefault("model", _model_dict(hero))
        if pool is None:
            pool = token_pool(hero.tokenizer, max(max(b * t for b, t in cfg.sizes), 8 * cfg.decode_prompt, 2048))
        result["precisions"][name] = _run_precision(cfg, hero, pool, name, result["load"]["sections"],
                                                    lambda text, name=name: say(f"[{name}] {text}"))
        del hero  # before the next precision loads its backbone: one copy of the weights at a time
        gc.collect()
    if cfg.memory and "memory" in cfg.sections:  # fp32 vs NF4 weights: the same whatever precision was timed
        with tempfile.TemporaryDirectory(prefix="hero-bench-") as tmp:
            probe_dir = _backbone_dir_for_probe(given_hero, backbone, Path(tmp))
            result["load"]["sections"]["memory"] = load_average()
            t0 = time.perf_counter()
            result["memory"] = bench_memory(probe_dir, cfg, threads, say, device=str(dev))
            result["section_wall_s"] = {"memory": round(time.perf_counter() - t0, 2)}
    result["load"]["end"] = load_average()
    result["wall_s"] = round(time.time() - started, 2)
    result["targets"] = evaluate_targets(result)
    return result


def _model_dict(hero) -> dict[str, Any]:
    return {"backbone": hero.backbone.name, "quantization": hero.backbone.quantization,
            "n_layers": hero.profile.n_layers, "n_routed": hero.config.n_routed, "profile": hero.profile.to_dict()}


def _run_precision(cfg: BenchConfig, hero, pool: torch.Tensor, name: str, load_sections: dict[str, Any],
                   say: Callable[[str], None]) -> dict[str, Any]:
    """Every section but memory on ``hero`` in one precision: the block ``result["precisions"][name]``."""
    # Synthetic routers are calibrated on the prompt text the bench times (random routers react strongly to
    # the kind of text, and their names promise a param skip), in this precision, so each precision runs at
    # the skip the name asks for; trained checkpoints are never recalibrated.
    calibration = batch_of(pool, 2, 256)
    routed = load_routed_configs(hero, list(cfg.checkpoints), calibration, cfg.seed, say)
    dtype = backbone_dtype(hero)
    routers = {rc.name: {**rc.describe(), "prefill_decisions": prefill_decisions(rc.router, dtype)} for rc in routed}
    block: dict[str, Any] = {"dtype": str(dtype).removeprefix("torch."), "routers": routers, "section_wall_s": {}}

    def section(section_name: str, fn: Callable[[], Any]) -> None:
        if section_name not in cfg.sections:
            return
        load_sections[f"{name} {section_name}"] = load_average()
        t0 = time.perf_counter()
        block[section_name] = fn()
        block["section_wall_s"][section_name] = round(time.perf_counter() - t0, 2)

    first = routed[0] if routed else None
    section("prefill", lambda: bench_prefill(hero, routed, pool, cfg, say))
    section("decode", lambda: bench_decode(hero, routed, pool, cfg, say))
    if first is not None:
        section("recording", lambda: bench_recording(hero, first, pool, cfg, say))
    section("overhead", lambda: bench_overhead(hero, pool, cfg, say))
    if first is not None:
        section("training", lambda: bench_training(hero, first, pool, cfg, say))
    return block


def _config_dict(cfg: BenchConfig) -> dict[str, Any]:
    d = asdict(cfg)
    for key in ("sizes",):
        d[key] = [f"{b}x{t}" for b, t in d[key]]
    for key in ("record_shape", "overhead_shape", "train_shape", "memory_shape"):
        d[key] = f"{d[key][0]}x{d[key][1]}"
    d["sections"] = list(d["sections"])
    d["dtypes"] = list(d["dtypes"])
    return d


# -- command line ---------------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=Path("bench.json"), help="write the results here (JSON)")
    p.add_argument("--quick", action="store_true", help="small sizes and 3 reps: a smoke run of every section")
    p.add_argument("--sizes", default=None,
                   help="prefill shapes BATCHxTOKENS, comma-separated (default 4x128,4x512,1x2048)")
    p.add_argument("--reps", type=int, default=None, help="timed repetitions per configuration (default 5, quick 3)")
    p.add_argument("--warmup", type=int, default=None, help="untimed warm-up runs per configuration (default 1)")
    p.add_argument("--checkpoints", default=",".join(DEFAULT_BENCH_CHECKPOINTS),
                   help="routed configurations (bundled names or directories; default: the default checkpoint, "
                        "then hero-25-r7 and hero-40-r7); a missing one is replaced by a synthetic router calibrated "
                        "to its name's param skip")
    p.add_argument("--decode-batches", default=None, help="comma-separated decode batch sizes (default 1,8)")
    p.add_argument("--decode-tokens", type=int, default=None, help="tokens decoded per row (default 32)")
    p.add_argument("--decode-prompt", type=int, default=None, help="prompt tokens before decoding (default 64)")
    p.add_argument("--train-shape", default=None, help="training step shape BATCHxTOKENS (default 4x128)")
    p.add_argument("--record-shape", default=None, help="recording-cost shape (default 4x512)")
    p.add_argument("--overhead-shape", default=None, help="wrapper-overhead shape (default 4x512)")
    p.add_argument("--sections", default=None, help="comma-separated subset of: " + ",".join(BenchConfig().sections))
    p.add_argument("--no-memory", action="store_true", help="skip the fp32 vs NF4 memory subprocesses")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads (default: $OMP_NUM_THREADS, else the available cores)")
    p.add_argument("--backbone", default=None, help="local HF model directory (default: embedded SmolLM2-135M)")
    p.add_argument("--dtypes", default="fp32,bf16",
                   help="backbone precisions measured side by side, comma-separated: fp32, bf16, auto (bf16 where "
                        "a probe shows it faster); every section but memory runs in each (default fp32,bf16)")
    p.add_argument("--quantization", choices=["nf4"], default=None,
                   help="time the backbone in 4-bit NF4 (one precision: --dtypes is ignored)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic routers")


def config_from_args(args) -> BenchConfig:
    overrides: dict[str, Any] = {}
    if args.sizes:
        overrides["sizes"] = [parse_shape(s) for s in args.sizes.split(",") if s.strip()]
    for name in ("reps", "warmup", "decode_tokens", "decode_prompt", "threads", "seed"):
        if getattr(args, name, None) is not None:
            overrides[name] = getattr(args, name)
    if args.decode_batches:
        overrides["decode_batches"] = [int(x) for x in args.decode_batches.split(",") if x.strip()]
    for name in ("train_shape", "record_shape", "overhead_shape"):
        if getattr(args, name, None):
            overrides[name] = parse_shape(getattr(args, name))
    overrides["checkpoints"] = [c.strip() for c in args.checkpoints.split(",") if c.strip()]
    if args.sections:
        overrides["sections"] = tuple(s.strip() for s in args.sections.split(",") if s.strip())
    if args.no_memory:
        overrides["memory"] = False
    overrides["dtypes"] = tuple(d.strip() for d in args.dtypes.split(",") if d.strip())
    return BenchConfig.quick_preset(**overrides) if args.quick else BenchConfig(**overrides)


def run_cli(args, hero=None) -> int:
    cfg = config_from_args(args)
    if os.environ.get("HERO_LENS_TINY") == "1" and hero is None:
        from hero_core.method.tiny import tiny_hero

        hero = tiny_hero()
    result = run_benchmark(cfg, hero, backbone=args.backbone, quantization=args.quantization, device=args.device)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    met = [t for t in result["targets"] if t["met"] is not None]
    print(f"bench written to {args.out} ({result['wall_s']:.0f} s; precisions {', '.join(result['precisions'])}; "
          f"targets met {sum(t['met'] for t in met)}/{len(met)}; "
          f"load average {result['load']['start']} -> {result['load']['end']})")
    return 0
