"""GPU check: HeRo routing on a Llama-3.1-8B-shaped backbone with random weights, in NF4 and bf16, one JSON out.

    python -m scripts.gpu_check [--shape llama-3.1-8b|tiny] [--device cuda] [--precisions bf16,nf4]
                                [--out gpu_check.json]

No network: the backbone is built from a ``LlamaConfig`` on the device (random weights; the embedded
tokenizer stands in, its ids are a subset of the vocabulary) and wrapped with a fresh HeRo router whose
gates are spread around tau (as the bench's synthetic router), so both branches run. Per precision it records:
build time, a trace, a short generate, routed vs dense prefill and decode (timed with
``torch.cuda.synchronize``), 20 training steps of ``hero_core.train`` (LM target, no warm start, on the
local code corpus) and the peak memory of each phase. ``--shape tiny`` runs the same on CPU in seconds
(tests/test_gpu_check.py). NF4 needs bitsandbytes; without it the NF4 entry says so and the run goes on.

    python scripts/gpu_check.py --model-dir DIR [--data PATH] [--device cuda|cpu] [--train-steps N] [--out F]

runs instead the README's "Your own model" flow on a local Hugging Face directory: ``python -m hero_core train
--backbone DIR --data PATH --out TMP --recipe hero-10`` (through the CLI's own ``main``, its stages scaled to
``--train-steps`` steps in the last one), ``python -m hero_core trace … --backbone DIR --checkpoint TMP``, then the
app headless (``streamlit.testing`` on app/main.py, sidebar: Backbone → local directory DIR, Checkpoint →
directory… TMP). Each phase records its time, peak GPU memory and pass / fail with the error. Without ``--data`` a
small text file of standard-library source is written to a temporary folder; the checkpoint, the training caches
(``$HERO_LENS_CACHE``) and the app's prompt store live in that folder too and go with it.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

SHAPES = {
    # Llama-3.1-8B: 32 blocks, d = 4096, FFN 14336, 32 heads with 8 KV heads, 128k vocabulary
    "llama-3.1-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                         num_key_value_heads=8, vocab_size=128256, rope_theta=500000.0, max_position_embeddings=8192,
                         tie_word_embeddings=False),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=49152, max_position_embeddings=2048, tie_word_embeddings=True),
}
# (prefill shapes, decode steps, generate tokens, timing reps) per shape
WORK = {"llama-3.1-8b": dict(prefill=[(1, 512), (4, 512)], decode_steps=32, generate=32, reps=3, train_seq=256),
        "tiny": dict(prefill=[(1, 32), (2, 32)], decode_steps=4, generate=4, reps=1, train_seq=32)}
PROMPT = "The history of the printing press begins in the fifteenth century, when movable type made books cheaper."


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn, device: torch.device, reps: int) -> list[float]:
    fn()  # warm-up
    times = []
    for _ in range(reps):
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return times


def _peak(device: torch.device) -> float | None:
    """Peak allocated device memory since the last reset, GiB (None on CPU)."""
    if device.type != "cuda":
        return None
    return torch.cuda.max_memory_allocated(device) / 2**30


def _reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def quantize_nf4(model: torch.nn.Module, device: torch.device) -> int:
    """Replace every decoder-block Linear by a bitsandbytes NF4 Linear4bit (bf16 compute), in place."""
    import bitsandbytes as bnb

    from hero_core.core.inject import decoder_layers

    count = 0
    for layer in decoder_layers(model):
        for parent in list(layer.modules()):  # attention and FFN projections, whatever the family calls them
            for name, child in list(parent.named_children()):
                if not isinstance(child, torch.nn.Linear):
                    continue
                q = bnb.nn.Linear4bit(child.in_features, child.out_features, bias=child.bias is not None,
                                      compute_dtype=torch.bfloat16, quant_type="nf4", device="meta")
                q.weight = bnb.nn.Params4bit(child.weight.data.to("cpu"), requires_grad=False,
                                             quant_type="nf4").to(device)
                if child.bias is not None:
                    q.bias = torch.nn.Parameter(child.bias.data, requires_grad=False)
                setattr(parent, name, q)
                del child
                count += 1
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return count


def build_hero(shape: str, precision: str, device: torch.device, seed: int = 0):
    """A random-weight backbone of ``shape`` on ``device`` with a fresh router (gates spread around tau)."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from hero_core.core.backbones import Backbone, embedded_model_dir
    from hero_core.core.model import HeroModel, fresh_router, spread_gates

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir())
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    dims = dict(SHAPES[shape])
    dims["vocab_size"] = max(dims["vocab_size"], len(tokenizer))
    config = LlamaConfig(**dims, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    dtype = torch.bfloat16 if precision in ("bf16", "nf4") and device.type == "cuda" else (
        torch.bfloat16 if precision == "bf16" else torch.float32)
    torch.manual_seed(seed)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(dtype).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    if precision == "nf4":
        quantize_nf4(model, device)
    backbone = Backbone(model=model, tokenizer=tokenizer, name=f"random-{shape}", device=device,
                        quantization="nf4" if precision == "nf4" else None)
    torch.manual_seed(seed + 1)
    router = spread_gates(fresh_router(backbone, gate_bias_init=0.0))  # gates around tau = 0.5: both branches run
    return HeroModel(backbone, router, "fresh-random")


def check_precision(shape: str, precision: str, device: torch.device, train_steps: int) -> dict:
    from hero_core.bench.sections import decode_step_seconds

    work = WORK[shape]
    out: dict = {"precision": precision}
    _reset_peak(device)
    t0 = time.perf_counter()
    hero = build_hero(shape, precision, device)
    _sync(device)
    out["build_s"] = time.perf_counter() - t0
    out["peak_gib_build"] = _peak(device)
    out["backbone_params"] = hero.profile.total_params
    out["router_params"] = sum(p.numel() for p in hero.router.parameters())

    # trace and generate
    t0 = time.perf_counter()
    trace = hero.trace(PROMPT)
    _sync(device)
    out["trace"] = {"s": time.perf_counter() - t0, "tokens": len(trace.tokens),
                    "executed_share": float(trace.executed.mean()), "finite_gates": bool(torch.isfinite(
                        torch.as_tensor(trace.gate)).all())}
    t0 = time.perf_counter()
    _, gen = hero.generate(PROMPT, max_new_tokens=work["generate"])
    _sync(device)
    out["generate"] = {"s": time.perf_counter() - t0, "new_tokens": work["generate"],
                       "executed_share_new": float(gen.executed[:, gen.n_prompt_tokens:].mean())
                       if gen.n_prompt_tokens is not None else None}
    out["peak_gib_inference"] = _peak(device)

    # routed vs dense prefill
    gen_ids = torch.Generator().manual_seed(0)
    vocab = len(hero.tokenizer)
    out["prefill"] = []
    for batch, length in work["prefill"]:
        ids = torch.randint(0, vocab, (batch, length), generator=gen_ids).to(device)
        times = {}
        for variant in ("dense", "hero"):
            def fn(v=variant, ids=ids):
                with torch.no_grad():
                    hero.forward(ids, None, hero.new_call(v, record=False), use_cache=False, logits_to_keep=1)
            times[variant] = _timed(fn, device, work["reps"])
        call = hero.new_call("hero")
        with torch.no_grad():
            hero.forward(ids, None, call, use_cache=False, logits_to_keep=1)
        executed = call.passes[-1].executed().float().mean().item()
        out["prefill"].append({"batch": batch, "tokens": length, "dense_s": statistics.median(times["dense"]),
                               "hero_s": statistics.median(times["hero"]), "executed_share": executed,
                               "speedup": statistics.median(times["dense"]) / statistics.median(times["hero"])})
    # routed vs dense decode, batch 1
    ids = torch.randint(0, vocab, (1, 64), generator=gen_ids).to(device)
    steps = work["decode_steps"]
    dense = [decode_step_seconds(hero, lambda: hero.new_call("dense", record=False), ids, steps)
             for _ in range(work["reps"])]
    routed = [decode_step_seconds(hero, lambda: hero.new_call("hero", record=False), ids, steps)
              for _ in range(work["reps"])]
    out["decode"] = {"batch": 1, "steps": steps, "dense_step_s": statistics.median(dense),
                     "hero_step_s": statistics.median(routed),
                     "speedup": statistics.median(dense) / statistics.median(routed)}
    out["peak_gib_timing"] = _peak(device)

    # training steps (hero_core.train on a temporary directory: LM target, no warm start)
    from hero_core.train.train import TrainConfig, train

    _reset_peak(device)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = TrainConfig(out=f"{tmp}/ckpt", steps=train_steps, batch_size=2, seq_len=work["train_seq"], target="lm",
                          warm_start=False, gate_warm_start=False, data_mix={"code": 1.0}, data_blocks=8,
                          save_every=10**6, dtype="bf16" if device.type == "cuda" else "fp32")
        t0 = time.perf_counter()
        train(cfg, hero, progress=False)
        _sync(device)
        elapsed = time.perf_counter() - t0
        log = [json.loads(line) for line in open(f"{tmp}/ckpt/train_log.jsonl") if line.strip()]
    out["train"] = {"steps": len(log), "s": elapsed, "batch": 2, "seq_len": work["train_seq"],
                    "first_loss": log[0]["loss"] if log else None, "last_loss": log[-1]["loss"] if log else None,
                    "finite": all(map(lambda r: r["loss"] == r["loss"], log)),
                    "tokens_per_s_last": log[-1]["tokens_per_s"] if log else None,
                    "peak_gib": _peak(device)}
    hero = None  # free the device memory before the next precision builds its model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


# --- the README's "Your own model" flow on a local directory: train -> trace -> app -----------------------------

RECIPE = "hero-10"  # the README's command
APP_MAIN = Path(__file__).resolve().parents[1] / "app" / "main.py"
CORPUS_MODULES = ("textwrap", "string", "json", "argparse", "fractions", "calendar")  # ~0.4 MB of source
CORPUS_CHARS = 60_000  # ~15k tokens: enough blocks for the default batch and sequence length, quick to tokenise


def write_corpus(folder: Path) -> Path:
    """A small ``.txt`` of standard-library source (paragraphs split at blank lines), standing in for --data."""
    import importlib

    texts, total = [], 0
    for name in CORPUS_MODULES:
        module = importlib.import_module(name)
        source = Path(module.__file__).read_text(encoding="utf-8")
        texts.append(source[:CORPUS_CHARS - total])
        total += len(texts[-1])
        if total >= CORPUS_CHARS:
            break
    path = folder / "corpus.txt"
    path.write_text("\n\n".join(texts), encoding="utf-8")
    return path


@contextlib.contextmanager
def _environ(**changes: str | None):
    """Set (or with None remove) environment variables for the block, then put them back."""
    before = {name: os.environ.get(name) for name in changes}
    try:
        _set_environ(changes)
        yield
    finally:
        _set_environ(before)


def _set_environ(values: dict[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _phase(report: dict, name: str, device: torch.device, fn) -> bool:
    """Run one phase: its time, peak GPU memory and pass / fail (with the error) go to report['phases'][name]."""
    _free(device)
    _reset_peak(device)
    entry: dict = {"ok": False}
    report["phases"][name] = entry
    t0 = time.perf_counter()
    try:
        entry.update(fn())
        entry["ok"] = True
    except Exception as err:  # the report must say which phase failed and why, and the run must end cleanly
        report["errors"][name] = f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=8)}"
        print(report["errors"][name], file=sys.stderr)
    _sync(device)
    entry["s"] = time.perf_counter() - t0
    entry["peak_gib"] = _peak(device)
    return entry["ok"]


def _train_log(folder: Path) -> list[dict]:
    path = folder / "train_log.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def phase_train(model_dir: Path, data: Path, out: Path, device: torch.device, steps: int,
                batch_size: int | None, seq_len: int | None) -> dict:
    """``python -m hero_core train --backbone DIR --data PATH --out OUT --recipe hero-10``, a few steps."""
    from hero_core.cli import main as hero_main
    from hero_core.core.checkpoint import CONFIG_FILE
    from hero_core.train.recipes import RUNS, stages

    scale = steps / RUNS[RECIPE].steps  # the last stage runs `steps` steps, the earlier ones in proportion
    argv = ["train", "--backbone", str(model_dir), "--data", str(data), "--out", str(out), "--recipe", RECIPE,
            "--steps-scale", repr(scale), "--device", device.type]
    if batch_size:
        argv += ["--batch-size", str(batch_size)]
    if seq_len:
        argv += ["--seq-len", str(seq_len)]
    code = hero_main(argv)
    if code != 0:
        raise RuntimeError(f"python -m hero_core {' '.join(argv)} exited with {code}")
    if not (out / CONFIG_FILE).is_file():
        raise RuntimeError(f"training wrote no {CONFIG_FILE} in {out}")
    chain = stages(RECIPE)
    logs = {name: _train_log(out if name == chain[-1] else out / "stages" / name) for name in chain}
    losses = [r["loss"] for log in logs.values() for r in log]
    if not losses or not all(map(lambda x: x == x and abs(x) != float("inf"), losses)):
        raise RuntimeError(f"training losses are missing or not finite: {losses[:8]}")
    meta = json.loads((out / CONFIG_FILE).read_text())
    last = logs[chain[-1]]
    return {"argv": argv, "stages": {name: len(log) for name, log in logs.items()},
            "first_loss": losses[0], "last_loss": losses[-1], "tau": meta["router"].get("tau"),
            "data_card_source": meta.get("training", {}).get("data_card", {}).get("source"),
            "tokens_per_s_last": last[-1].get("tokens_per_s") if last else None}


def phase_trace(model_dir: Path, checkpoint: Path, device: torch.device, out: Path) -> dict:
    """``python -m hero_core trace PROMPT --backbone DIR --checkpoint OUT --out trace.json``, then its checks."""
    from hero_core.cli import main as hero_main
    from hero_core.core.trace import RoutingTrace

    argv = ["trace", PROMPT, "--backbone", str(model_dir), "--checkpoint", str(checkpoint), "--device", device.type,
            "--out", str(out)]
    code = hero_main(argv)
    if code != 0:
        raise RuntimeError(f"python -m hero_core {' '.join(argv[:1])} … exited with {code}")
    trace = RoutingTrace.load(out)
    gates = torch.as_tensor(trace.gate)
    result = {"argv": argv, "tokens": len(trace.tokens), "routed_layers": trace.n_routed,
              "backbone": trace.backbone, "checkpoint": trace.checkpoint, "tau": trace.tau,
              "executed_share": float(trace.executed.mean()), "finite_gates": bool(torch.isfinite(gates).all())}
    problems = [text for ok, text in (
        (result["tokens"] > 0, "no tokens"), (result["finite_gates"], "gates not finite"),
        (trace.checkpoint == checkpoint.name, f"checkpoint recorded as {trace.checkpoint!r}, not {checkpoint.name!r}"),
    ) if not ok]
    if problems:
        raise RuntimeError("trace: " + "; ".join(problems))
    return result


def _plotly_values(obj) -> list[float]:
    """A plotly array as sent to the browser: a list, or base64 'bdata' with its dtype."""
    if isinstance(obj, dict) and "bdata" in obj:
        import base64

        import numpy as np

        return np.frombuffer(base64.b64decode(obj["bdata"]), dtype=np.dtype(obj["dtype"])).tolist()
    return list(obj)


def phase_app(model_dir: Path, checkpoint: Path, device: torch.device, trace_file: Path, timeout: float) -> dict:
    """app/main.py headless: sidebar Backbone -> local directory DIR, Checkpoint -> directory… OUT, the device;
    the Route explorer must load that model and checkpoint and draw its skip map of the traced prompt."""
    from streamlit.testing.v1 import AppTest

    from hero_core.core.trace import RoutingTrace
    from hero_core.viz.figures import CELLS_NAME

    if str(APP_MAIN.parent) not in sys.path:
        sys.path.insert(0, str(APP_MAIN.parent))
    from components.settings import CUSTOM_CHECKPOINT

    at = AppTest.from_file(str(APP_MAIN), default_timeout=timeout)
    at.session_state["sb_backbone_kind"] = "local directory"
    at.session_state["sb_backbone_path"] = str(model_dir)
    at.session_state["sb_checkpoint"] = CUSTOM_CHECKPOINT
    at.session_state["sb_checkpoint_path"] = str(checkpoint)
    at.session_state["sb_device"] = device.type
    at.session_state["shared_prompt"] = PROMPT
    at.run()
    problems = [f"exception: {e.value}" for e in at.exception] + [f"error: {e.value}" for e in at.error]
    captions = [c.value for c in at.sidebar.caption]
    loaded = next((c for c in captions if c.startswith("Loaded ")), "")
    charts = {}
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        charts[spec["layout"].get("title", {}).get("text", "")] = spec
    skip_map = next((spec for title, spec in charts.items() if title.startswith("Skip map")), None)
    expected = RoutingTrace.load(trace_file)
    result = {"sidebar": loaded, "charts": sorted(charts), "page_title": [t.value for t in at.title][:1]}
    if f"checkpoint **{checkpoint.name}**" not in loaded or f"**{expected.backbone}**" not in loaded:
        problems.append(f"the sidebar does not name {expected.backbone} with checkpoint {checkpoint.name}: "
                        f"{loaded or captions}")
    if skip_map is None:
        problems.append(f"no skip map on the page (charts: {sorted(charts)})")
    else:
        cells = next(d for d in skip_map["data"] if d.get("name") == CELLS_NAME)
        xs, ys = _plotly_values(cells["x"]), _plotly_values(cells["y"])
        gates = _plotly_values(cells["marker"]["color"])
        result |= {"skip_map_tokens": int(max(xs)) + 1, "skip_map_layers": int(max(ys))}
        if (result["skip_map_tokens"], result["skip_map_layers"]) != (expected.n_tokens, expected.n_routed):
            problems.append(f"skip map is {result['skip_map_tokens']} tokens x {result['skip_map_layers']} layers, "
                            f"the trace {expected.n_tokens} x {expected.n_routed}")
        elif len(gates) == expected.gate.size:
            result["max_gate_diff_vs_trace"] = float(abs(torch.as_tensor(gates, dtype=torch.float64)
                                                          - torch.as_tensor(expected.gate.reshape(-1),
                                                                            dtype=torch.float64)).max())
    import streamlit as st

    st.cache_resource.clear()  # let the app's cached model go
    st.cache_data.clear()
    if problems:
        raise RuntimeError("app: " + "; ".join(problems))
    return result


def check_model_dir(args, device: torch.device) -> int:
    """train -> trace -> app on a local model directory; one JSON report and one summary line."""
    model_dir = Path(args.model_dir).expanduser().resolve()
    t_start = time.perf_counter()
    report: dict = {"mode": "model-dir", "model_dir": str(model_dir), "recipe": RECIPE,
                    "train_steps": args.train_steps, "device": str(device),
                    "device_name": (torch.cuda.get_device_name(device) if device.type == "cuda"
                                    else platform.processor()),
                    "torch": torch.__version__, "phases": {}, "errors": {}}
    with tempfile.TemporaryDirectory(prefix="hero-gpu-check-") as tmp:
        tmp = Path(tmp)
        data = Path(args.data).expanduser().resolve() if args.data else write_corpus(tmp)
        report["data"] = str(data) if args.data else f"(standard-library source, {data.stat().st_size:,} bytes)"
        checkpoint = tmp / f"gpu-check-{RECIPE}"
        trace_file = tmp / "trace.json"
        # HERO_LENS_TINY=1 would swap the app's model for the tiny test one; the caches stay in the temp folder
        with _environ(HERO_LENS_CACHE=str(tmp / "cache"), HERO_LENS_TINY=None):
            steps = [("train", lambda: phase_train(model_dir, data, checkpoint, device, args.train_steps,
                                                   args.batch_size, args.seq_len)),
                     ("trace", lambda: phase_trace(model_dir, checkpoint, device, trace_file)),
                     ("app", lambda: phase_app(model_dir, checkpoint, device, trace_file, args.app_timeout))]
            for name, fn in steps:
                if report["errors"]:
                    report["phases"][name] = {"ok": False, "skipped": "an earlier phase failed"}
                    continue
                print(f"[{time.perf_counter() - t_start:6.1f} s] {name} on {model_dir.name} ({device}) ...",
                      flush=True)
                _phase(report, name, device, fn)
    report["total_s"] = time.perf_counter() - t_start
    report["ok"] = all(p.get("ok") for p in report["phases"].values())
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)

    def said(name: str, p: dict) -> str:
        if p.get("skipped"):
            return f"{name} skipped"
        peak = f", peak {p['peak_gib']:.1f} GiB" if p.get("peak_gib") is not None else ""
        return f"{name} {'ok' if p['ok'] else 'FAILED'} {p['s']:.1f} s{peak}"

    print(f"{model_dir.name} on {device}: " + " · ".join(said(n, p) for n, p in report["phases"].items())
          + f" · {'PASS' if report['ok'] else 'FAIL'} ({report['total_s']:.0f} s, {args.out})")
    return 0 if report["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="llama-3.1-8b")
    parser.add_argument("--device", default="auto", help="auto (cuda when present), cuda or cpu")
    parser.add_argument("--precisions", default="bf16,nf4")
    parser.add_argument("--train-steps", type=int, default=20)
    parser.add_argument("--out", default="gpu_check.json")
    own = parser.add_argument_group("your own model (README): train -> trace -> app on a local directory")
    own.add_argument("--model-dir", default=None, help="local Hugging Face model directory: run this flow instead "
                                                       "of the random-shape check")
    own.add_argument("--data", default=None, help="--data for training (default: standard-library source)")
    own.add_argument("--batch-size", type=int, default=None, help="training batch (default: the trainer's)")
    own.add_argument("--seq-len", type=int, default=None, help="training sequence length (default: the trainer's)")
    own.add_argument("--app-timeout", type=float, default=600.0, help="seconds the app's run may take")
    args = parser.parse_args(argv)
    device = torch.device(args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        print("no CUDA device visible: run with --device cpu --shape tiny to check the script itself", file=sys.stderr)
        return 2
    if args.model_dir is not None:
        return check_model_dir(args, device)
    t_start = time.perf_counter()
    report: dict = {"shape": args.shape, "config": SHAPES[args.shape], "device": str(device),
                    "device_name": (torch.cuda.get_device_name(device) if device.type == "cuda"
                                    else platform.processor()),
                    "torch": torch.__version__, "results": {}, "errors": {}}
    for precision in [p.strip() for p in args.precisions.split(",") if p.strip()]:
        if precision == "nf4" and importlib.util.find_spec("bitsandbytes") is None:
            report["errors"]["nf4"] = "bitsandbytes is not installed: pip install bitsandbytes to check NF4"
            print(report["errors"]["nf4"], file=sys.stderr)
            continue
        if precision == "nf4" and device.type != "cuda":
            report["errors"]["nf4"] = "skipped: this check quantises to NF4 on a CUDA device only"
            continue
        print(f"[{time.perf_counter() - t_start:6.1f} s] {args.shape} {precision} on {device} ...", flush=True)
        try:
            report["results"][precision] = check_precision(args.shape, precision, device, args.train_steps)
        except Exception as err:  # one failing precision must not hide the other's numbers
            report["errors"][precision] = f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=8)}"
            print(report["errors"][precision], file=sys.stderr)
    report["total_s"] = time.perf_counter() - t_start
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
    for precision, r in report["results"].items():
        pre = " · ".join(f"{p['batch']}x{p['tokens']} x{p['speedup']:.2f}" for p in r["prefill"])
        print(f"{precision}: prefill {pre} · decode x{r['decode']['speedup']:.2f} · train {r['train']['steps']} steps "
              f"{r['train']['s']:.1f} s · peak {r['train']['peak_gib']} GiB")
    print(f"wrote {args.out} ({report['total_s']:.0f} s)")
    return 0 if not report["errors"] or report["results"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
