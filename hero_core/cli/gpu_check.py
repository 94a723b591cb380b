"""GPU check: HeRo routing on a Llama-3.1-8B-shaped backbone with random weights, in NF4 and bf16, one JSON out.

    python -m scripts.gpu_check [--shape llama-3.1-8b|tiny] [--device cuda] [--precisions bf16,nf4]
                                [--out gpu_check.json]

No network: the backbone is built from a ``LlamaConfig`` on the device (random weights; the embedded
tokenizer stands in, its ids are a subset of the vocabulary) and wrapped with a fresh HeRo router whose
gates are spread around tau (as the bench's synthetic router), so both branches run. Per precision it records:
build time, a trace, a short generate, routed vs dense prefill and decode (timed with
``torch.cuda.synchronize``), Compare's case (four router checkpoints saved and loaded back onto the one backbone:
memory with four against one, target <= 1.25x, hero_core.bench.routers_memory), 20 training steps of
``hero_core.train`` (LM target, no warm start, on the local code corpus) and the peak memory of each phase.
``--shape tiny`` runs the same on CPU in seconds (tests/test_gpu_check.py). NF4 needs bitsandbytes; without it
the NF4 entry says so and the run goes on.

    python scripts/gpu_check.py --model-dir DIR [--data PATH] [--device cuda|cpu] [--train-steps N] [--out F]

runs instead the README's "Your own model" flow on a local Hugging Face directory: ``python -m hero_core train
--backbone DIR --data PATH --out TMP --recipe hero-10`` (through the CLI's own ``main``, its stages scaled to
``--train-steps`` steps in the last one), ``python -m hero_core trace … --backbone DIR --checkpoint TMP``, then the
app headless (``streamlit.testing`` on app/main.py, sidebar: Backbone → local directory DIR, Checkpoint →
directory… TMP). Each phase records its time, peak GPU memory and pass / fail with the error. Without ``--data`` a
small text file of standard-library source is written to a temporary folder; the checkpoint, the training caches
(``$HERO_LENS_CACHE``) and the app's prompt store live in that folder too and go with it.

This module is the random-shape check and the command line of ``scripts/gpu_check.py``; the --model-dir flow is
hero_core/cli/own_model_check.py and its app phase app/headless.py (hero_core never imports streamlit or the app, so
the script hands that phase in).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable

import torch

from hero_core.cli.gpu_device import PROMPT, device_info, peak_gib, reset_peak, sync, timed

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
def quantize_nf4(model: torch.nn.Module, device: torch.device) -> int:
    """Replace every decoder-block Linear by a bitsandbytes NF4 Linear4bit (bf16 compute), in place."""
    import bitsandbytes as bnb

    from hero_core.method.inject import decoder_layers

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

    from hero_core.backbones.loading import Backbone, embedded_model_dir
    from hero_core.method.model import HeroModel, fresh_router, spread_gates

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
    reset_peak(device)
    t0 = time.perf_counter()
    hero = build_hero(shape, precision, device)
    sync(device)
    out["build_s"] = time.perf_counter() - t0
    out["peak_gib_build"] = peak_gib(device)
    out["backbone_params"] = hero.profile.total_params
    out["router_params"] = sum(p.numel() for p in hero.router.parameters())

    # trace and generate
    t0 = time.perf_counter()
    trace = hero.trace(PROMPT)
    sync(device)
    out["trace"] = {"s": time.perf_counter() - t0, "tokens": len(trace.tokens),
                    "executed_share": float(trace.executed.mean()), "finite_gates": bool(torch.isfinite(
                        torch.as_tensor(trace.gate)).all())}
    t0 = time.perf_counter()
    _, gen = hero.generate(PROMPT, max_new_tokens=work["generate"])
    sync(device)
    out["generate"] = {"s": time.perf_counter() - t0, "new_tokens": work["generate"],
                       "executed_share_new": float(gen.executed[:, gen.n_prompt_tokens:].mean())
                       if gen.n_prompt_tokens is not None else None}
    out["peak_gib_inference"] = peak_gib(device)

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
            times[variant] = timed(fn, device, work["reps"])
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
    out["peak_gib_timing"] = peak_gib(device)
    # Compare with four checkpoints: four routers saved and loaded back onto this one backbone, as the app holds them
    from hero_core.bench.routers_memory import routers_on_one_backbone

    out["routers_on_one_backbone"] = routers_on_one_backbone(hero.backbone, n=4)

    # training steps (hero_core.train on a temporary directory: LM target, no warm start)
    from hero_core.train.train import train
    from hero_core.train.train_config import TrainConfig

    reset_peak(device)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = TrainConfig(out=f"{tmp}/ckpt", steps=train_steps, batch_size=2, seq_len=work["train_seq"], target="lm",
                          warm_start=False, gate_warm_start=False, data_mix={"code": 1.0}, data_blocks=8,
                          save_every=10**6, dtype="bf16" if device.type == "cuda" else "fp32")
        t0 = time.perf_counter()
        train(cfg, hero, progress=False)
        sync(device)
        elapsed = time.perf_counter() - t0
        log = [json.loads(line) for line in open(f"{tmp}/ckpt/train_log.jsonl") if line.strip()]
    out["train"] = {"steps": len(log), "s": elapsed, "batch": 2, "seq_len": work["train_seq"],
                    "first_loss": log[0]["loss"] if log else None, "last_loss": log[-1]["loss"] if log else None,
                    "finite": all(map(lambda r: r["loss"] == r["loss"], log)),
                    "tokens_per_s_last": log[-1]["tokens_per_s"] if log else None,
                    "peak_gib": peak_gib(device)}
    hero = None  # free the device memory before the next precision builds its model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def check_shapes(shape: str, precisions: list[str], device: torch.device, train_steps: int, out: str) -> int:
    """Every precision on the random ``shape``: one JSON report at ``out`` and one summary line per precision."""
    t_start = time.perf_counter()
    report: dict = {"shape": shape, "config": SHAPES[shape], "device": str(device),
                    "device_name": device_info(device),
                    "torch": torch.__version__, "results": {}, "errors": {}}
    for precision in precisions:
        if precision == "nf4" and importlib.util.find_spec("bitsandbytes") is None:
            report["errors"]["nf4"] = "bitsandbytes is not installed: pip install bitsandbytes to check NF4"
            print(report["errors"]["nf4"], file=sys.stderr)
            continue
        if precision == "nf4" and device.type != "cuda":
            report["errors"]["nf4"] = "skipped: this check quantises to NF4 on a CUDA device only"
            continue
        print(f"[{time.perf_counter() - t_start:6.1f} s] {shape} {precision} on {device} ...", flush=True)
        try:
            report["results"][precision] = check_precision(shape, precision, device, train_steps)
        except Exception as err:  # one failing precision must not hide the other's numbers
            report["errors"][precision] = f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=8)}"
            print(report["errors"][precision], file=sys.stderr)
    report["total_s"] = time.perf_counter() - t_start
    with open(out, "w") as f:
        json.dump(report, f, indent=2)
    for precision, r in report["results"].items():
        pre = " · ".join(f"{p['batch']}x{p['tokens']} x{p['speedup']:.2f}" for p in r["prefill"])
        four = r["routers_on_one_backbone"]
        held = four["ratio_cuda_allocated"] if four["ratio_cuda_allocated"] is not None else four["ratio_held"]
        print(f"{precision}: prefill {pre} · decode x{r['decode']['speedup']:.2f} · train {r['train']['steps']} steps "
              f"{r['train']['s']:.1f} s · peak {r['train']['peak_gib']} GiB · four routers on one backbone "
              f"x{held:.3f} of one ({four['distinct_backbones']} backbone, target <= x{four['target']:.2f})")
    print(f"wrote {out} ({report['total_s']:.0f} s)")
    return 0 if not report["errors"] or report["results"] else 1


def main(argv: list[str] | None = None, app_phase: Callable[..., dict] | None = None) -> int:
    """``scripts/gpu_check.py``'s command line; ``app_phase`` opens the app for --model-dir (app/headless.py)."""
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
        if app_phase is None:
            parser.error("--model-dir opens the app: run it as scripts/gpu_check.py, which hands in app/headless.py")
        # imported here: the random-shape check does not need the --model-dir flow
        from hero_core.cli.own_model_check import check_model_dir

        return check_model_dir(args, device, app_phase)
    return check_shapes(args.shape, [p.strip() for p in args.precisions.split(",") if p.strip()], device,
                        args.train_steps, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
