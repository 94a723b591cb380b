"""The benchmark's sections, each timing dense against routed configurations side by side: prefill,
decode (through :meth:`hero_core.method.model.HeroModel.decode`), trace recording, wrapper overhead, a training step,
and memory (fp32 vs NF4 in fresh processes, :mod:`hero_core.bench.memory_probe`)."""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from hero_core.bench.inputs import BenchConfig, RoutedConfig, batch_of, recorded_pass
from hero_core.bench.timing import measure, paired_ratio, paired_ratios, start_timer, stats, time_stats
from hero_core.measures.accounting import ComputeProfile, flop_ideal
from hero_core.method.call_state import RoutingCall, routing_call

PROBE_MODULE = "hero_core.bench.memory_probe"  # run with -m: one fresh process per configuration
PROBE_MARKER = "HERO_BENCH_MEMORY"  # prefixes the one line of JSON the probe prints


def weight_read_ideal(executed: np.ndarray, batch: int, profile: ComputeProfile) -> float:
    """Ideal decode speed-up if a step's time were the weights it reads (small-batch decoding is bound by
    memory bandwidth). ``executed``: (R, steps * batch), step-major. A block's FFN weights are read when
    *any* row of the batch runs it, its adapter when any row skips it; the shared router weights are
    counted once per step (they are small enough to stay in cache)."""
    R, n = executed.shape
    per_step = executed.reshape(R, n // batch, batch)
    ffn_read = per_step.any(axis=2).sum(axis=0)  # (steps,) blocks whose FFN some row ran
    adapter_read = (~per_step).any(axis=2).sum(axis=0)  # (steps,) blocks whose adapter some row ran
    p = profile
    dense = p.linear_params
    routed = (p.linear_params - R * p.ffn_params + ffn_read * p.ffn_params + adapter_read * p.adapter_params
              + p.router_params)
    return float(dense * len(ffn_read) / routed.sum())


def _dense_call(hero) -> RoutingCall:
    return hero.new_call("dense", record=False)


# -- sections ----------------------------------------------------------------------------------------
def bench_prefill(hero, routed: list[RoutedConfig], pool: torch.Tensor, cfg: BenchConfig,
                  say: Callable[[str], None]) -> list[dict[str, Any]]:
    rows = []
    for batch, length in cfg.sizes:
        ids = batch_of(pool, batch, length).to(hero.device)

        def run(make_call, ids=ids):
            def fn():
                with torch.no_grad():
                    hero.forward(ids, None, make_call(), use_cache=False)
            return fn

        fns = {"dense": run(lambda: _dense_call(hero))}
        for rc in routed:
            fns[rc.name] = run(lambda rc=rc: rc.call(record=False))
        times = measure(fns, cfg.reps, cfg.warmup, hero.device)
        positions = np.tile(np.arange(length), batch)
        row = {"batch": batch, "tokens": length, "n_tokens": batch * length, **time_stats(times), "routed": {}}
        for rc in routed:
            _, executed = recorded_pass(hero, rc, ids)
            figures = flop_ideal(executed.cpu().numpy(), positions, hero.profile)
            figures.update(paired_ratios(times, "speedup", "dense", rc.name))
            figures["efficiency"] = figures["speedup"]["median"] / figures["ideal_speedup"]
            row["routed"][rc.name] = figures
        rows.append(row)
        say(f"prefill {batch}x{length}: dense {row['time_s']['dense']['median']:.3f}s · " + " · ".join(
            f"{n} x{f['speedup']['median']:.2f} (ideal x{f['ideal_speedup']:.2f})" for n, f in row["routed"].items()))
    return rows


def decode_loop(hero, make_call: Callable[[], RoutingCall], prompts: torch.Tensor, n_new: int,
                on_done: Callable[[RoutingCall], None] | None = None) -> tuple[float, float]:
    """Greedy batched decoding (:meth:`hero_core.method.model.HeroModel.decode`) from equal-length prompts (B, P):
    ``n_new`` decode steps, no early stop, so every row does the same work.

    Returns the (wall, CPU) seconds of the decode steps only (the prefill is left out)."""
    call = make_call()
    out = hero.decode(prompts, call, n_new + 1, stop_at_eos=False, timer=lambda: start_timer(hero.device),
                      logits_to_keep=1)  # n_new + 1 picks: every step's token is fed, the last pick is not
    if on_done is not None:
        on_done(call)
    return out.elapsed


def decode_step_seconds(hero, make_call: Callable[[], RoutingCall], prompts: torch.Tensor, steps: int) -> float:
    """Wall seconds per decode step of :func:`decode_loop` (prefill excluded; synchronised on a GPU): the one
    decode timing the router-step benchmark and the GPU check share with this benchmark."""
    return decode_loop(hero, make_call, prompts, steps)[0] / steps


ROUTER_ONLY = "router only (τ = 0)"


def overhead_bound(ideal: float, overhead: float) -> float:
    """The speed-up the FLOP ideal leaves once the router's measured per-step overhead is added back:
    a routed step costs ``1 / ideal`` of a dense step in FLOPs plus ``overhead`` of one in latency."""
    return 1.0 / (1.0 / ideal + max(0.0, overhead))


def bench_decode(hero, routed: list[RoutedConfig], pool: torch.Tensor, cfg: BenchConfig,
                 say: Callable[[str], None]) -> list[dict[str, Any]]:
    rows = []
    for batch in cfg.decode_batches:
        prompts = batch_of(pool, batch, cfg.decode_prompt, offset=7).to(hero.device)
        fns = {"dense": lambda p=prompts: decode_loop(hero, lambda: _dense_call(hero), p, cfg.decode_tokens)}
        for rc in routed:
            fns[rc.name] = lambda rc=rc, p=prompts: decode_loop(hero, lambda: rc.call(record=False), p,
                                                                cfg.decode_tokens)
        if routed:  # the router and its bookkeeping with every FFN still run (tau = 0): its pure overhead
            every_ffn = dataclasses.replace(routed[0], tau=0.0)
            fns[ROUTER_ONLY] = lambda p=prompts, rc=every_ffn: decode_loop(hero, lambda: rc.call(record=False), p,
                                                                           cfg.decode_tokens)
        times = measure(fns, cfg.reps, cfg.warmup, hero.device)
        n = batch * cfg.decode_tokens
        row = {"batch": batch, "prompt_tokens": cfg.decode_prompt, "new_tokens": cfg.decode_tokens,
               "time_s": {k: stats(v["wall"]) for k, v in times.items()},
               "tokens_per_s": {k: stats([n / t for t in v["wall"]]) for k, v in times.items()}, "routed": {}}
        # The FLOP ideal charges the router its (tiny) FLOPs; at one token per step its cost is the latency
        # of about a hundred small operations per block instead. overhead = router-only / dense - 1, this run.
        overhead = (paired_ratio(times[ROUTER_ONLY]["wall"], times["dense"]["wall"])["median"] - 1.0
                    if routed else None)
        row["router_overhead"] = overhead
        for rc in routed:
            recorded: list[RoutingCall] = []
            decode_loop(hero, lambda rc=rc: rc.call(record=True), prompts, cfg.decode_tokens, on_done=recorded.append)
            steps = recorded[0].passes[1:]  # pass 0 is the prefill
            executed = np.concatenate([p.executed().cpu().numpy() for p in steps], 1)
            positions = np.repeat(cfg.decode_prompt + np.arange(len(steps)), batch)
            figures = flop_ideal(executed, positions, hero.profile)
            figures.update(paired_ratios(times, "speedup", "dense", rc.name))
            figures.update(efficiency=figures["speedup"]["median"] / figures["ideal_speedup"],
                           weight_read_ideal=weight_read_ideal(executed, batch, hero.profile),
                           overhead_bound=overhead_bound(figures["ideal_speedup"], overhead))
            row["routed"][rc.name] = figures
        rows.append(row)
        say(f"decode batch {batch}: dense {row['tokens_per_s']['dense']['median']:.1f} tok/s · " + " · ".join(
            f"{nm} {row['tokens_per_s'][nm]['median']:.1f} tok/s (x{f['speedup']['median']:.2f}, "
            f"ideal x{f['ideal_speedup']:.2f}, param skip {100 * f['param_skip']:.1f} %)"
            for nm, f in row["routed"].items()))
    return rows


def bench_recording(hero, rc: RoutedConfig, pool: torch.Tensor, cfg: BenchConfig,
                    say: Callable[[str], None]) -> dict[str, Any]:
    batch, length = cfg.record_shape
    ids = batch_of(pool, batch, length, offset=13).to(hero.device)
    def run(record: bool):
        def fn():
            with torch.no_grad():
                hero.forward(ids, None, rc.call(record=record), use_cache=False)
        return fn

    def assemble():  # forward with recording, then build one RoutingTrace per row (what hero.trace does)
        call = rc.call(record=True)
        with torch.no_grad():
            hero.forward(ids, None, call, use_cache=False)
        for b in range(batch):
            hero.trace_of(call, b, ids[b].tolist(), [])

    times = measure({"record_false": run(False), "record_true": run(True), "record_and_assemble": assemble},
                    cfg.reps, cfg.warmup, hero.device)
    out = {"router": rc.name, "batch": batch, "tokens": length, **time_stats(times),
           **paired_ratios(times, "record_ratio", "record_true", "record_false"),
           **paired_ratios(times, "assemble_ratio", "record_and_assemble", "record_false", cpu=False)}
    say(f"recording {batch}x{length}: record=True / record=False x{out['record_ratio']['median']:.3f}, "
        f"with trace assembly x{out['assemble_ratio']['median']:.3f}")
    return out


def bench_overhead(hero, pool: torch.Tensor, cfg: BenchConfig, say: Callable[[str], None]) -> dict[str, Any]:
    from hero_core.method.inject import unwrapped

    batch, length = cfg.overhead_shape
    ids = batch_of(pool, batch, length, offset=29).to(hero.device)

    def bare():
        with unwrapped(hero.model), torch.no_grad():
            hero.model(input_ids=ids, use_cache=False)

    def no_call():
        with torch.no_grad():
            hero.model(input_ids=ids, use_cache=False)

    def dense():
        with torch.no_grad():
            hero.forward(ids, None, _dense_call(hero), use_cache=False)

    with torch.no_grad():
        with unwrapped(hero.model):
            reference = hero.model(input_ids=ids, use_cache=False).logits
        diff = float((hero.forward(ids, None, _dense_call(hero), use_cache=False) - reference).abs().max())
    del reference
    times = measure({"bare": bare, "wrapped_no_call": no_call, "dense_variant": dense}, cfg.reps, cfg.warmup,
                    hero.device)
    out = {"batch": batch, "tokens": length, **time_stats(times),
           **paired_ratios(times, "dense_over_bare", "dense_variant", "bare"),
           **paired_ratios(times, "no_call_over_bare", "wrapped_no_call", "bare", cpu=False),
           "max_abs_logit_diff": diff}
    say(f"overhead {batch}x{length}: dense variant / bare x{out['dense_over_bare']['median']:.3f} "
        f"(max |logit diff| {diff:.2e})")
    return out


def bench_training(hero, rc: RoutedConfig, pool: torch.Tensor, cfg: BenchConfig,
                   say: Callable[[str], None]) -> dict[str, Any]:
    """One routed training step as ``train.py`` takes it (forward, LM loss + alpha * usage, backward, clip,
    AdamW) on a *copy* of the router, vs a dense forward + backward to the input embeddings.

    Two gate gradients, as ``train.py --gate-gradient`` offers: ``straight_through`` (its default: both
    branches run on every token, no compute is skipped in training) and ``paper`` (the hard branch)."""
    from hero_core.train.losses import usage_penalty

    batch, length = cfg.train_shape
    ids = batch_of(pool, batch, length, offset=41).to(hero.device)
    router = copy.deepcopy(rc.router).train()
    for p in router.parameters():
        p.requires_grad_(True)
    optimizer = torch.optim.AdamW(router.parameters(), lr=1e-4, weight_decay=0.01)
    embed = hero.model.get_input_embeddings()

    def lm_loss(logits):
        return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())

    def routed_step(straight_through: bool):
        def fn():
            call = rc.call(record=True, keep_gates=True, router=router, straight_through=straight_through)
            with torch.enable_grad():
                logits = hero.forward(ids, None, call, use_cache=False)
                loss = lm_loss(logits) + cfg.train_alpha * usage_penalty(call.passes[-1].gates)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(router.parameters(), 1.0)
                optimizer.step()
        return fn

    def dense_step():
        call = _dense_call(hero)
        with torch.enable_grad():
            inputs = embed(ids).detach().requires_grad_(True)
            with routing_call(call):
                logits = hero.model(inputs_embeds=inputs, use_cache=False).logits
            lm_loss(logits).backward()

    fns = {"dense": dense_step, "routed": routed_step(True), "routed_paper": routed_step(False)}
    times = measure(fns, cfg.reps, cfg.warmup, hero.device)
    out = {"router": rc.name, "batch": batch, "tokens": length, **time_stats(times),
           **paired_ratios(times, "routed_over_dense", "routed", "dense"),
           **paired_ratios(times, "paper_over_dense", "routed_paper", "dense"),
           "tokens_per_s": {k: stats([batch * length / t for t in v["wall"]]) for k, v in times.items()}}
    say(f"training {batch}x{length}: routed step / dense fwd+bwd x{out['routed_over_dense']['median']:.3f} "
        f"(straight-through), x{out['paper_over_dense']['median']:.3f} (hard branch)")
    return out


def bench_memory(backbone_dir: str | None, cfg: BenchConfig, threads: int, say: Callable[[str], None],
                 device: str = "cpu") -> dict:
    out: dict[str, Any] = {"forward_shape": list(cfg.memory_shape), "configs": {}}
    have_bnb = importlib.util.find_spec("bitsandbytes") is not None
    for quant in (None, "nf4"):
        key = quant or "fp32"
        if quant == "nf4" and not have_bnb:
            out["configs"][key] = {"skipped": "bitsandbytes is not installed"}
            continue
        args = {"backbone": backbone_dir, "quantization": quant, "batch": cfg.memory_shape[0],
                "length": cfg.memory_shape[1], "threads": threads, "device": device}
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        proc = subprocess.run([sys.executable, "-m", PROBE_MODULE, json.dumps(args)],
                              capture_output=True, text=True, env=env, timeout=1800)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(f"{PROBE_MARKER} ")), None)
        if proc.returncode != 0 or line is None:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            out["configs"][key] = {"skipped": f"probe failed (exit {proc.returncode}): {' | '.join(tail)}"}
        else:
            out["configs"][key] = json.loads(line.split(" ", 1)[1])
    fp, nf = out["configs"].get("fp32", {}), out["configs"].get("nf4", {})
    if "peak_delta_forward" in fp and "peak_delta_forward" in nf:
        out["nf4_over_fp32_peak"] = nf["peak_delta_forward"] / fp["peak_delta_forward"]
        out["nf4_over_fp32_weights"] = nf["weight_bytes"] / fp["weight_bytes"]
    mib = lambda c: f"{c['peak_delta_forward'] / 2**20:.0f} MiB" if "peak_delta_forward" in c else c.get("skipped")  # noqa: E731
    say(f"memory: fp32 peak {mib(fp)} · nf4 peak {mib(nf)}")
    return out
