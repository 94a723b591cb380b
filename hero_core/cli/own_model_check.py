"""The README's "Your own model" flow on a local Hugging Face directory, as ``scripts/gpu_check.py --model-dir DIR``
runs it: train (``python -m hero_core train --recipe hero-10`` through the CLI's own ``main``, scaled to a few
steps) -> trace (``python -m hero_core trace``) -> the app headless, each phase timed with its peak GPU memory and
pass / fail, into one JSON report.

The app phase itself (streamlit.testing on app/main.py) is app/headless.py, handed in by the caller: hero_core
never imports streamlit or the app. :func:`check_app_page` checks what that page showed against the CLI's trace.
"""

from __future__ import annotations

import base64
import contextlib
import gc
import importlib
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from hero_core.cli.gpu_device import PROMPT, device_info, peak_gib, reset_peak, sync

RECIPE = "hero-10"  # the README's command
CORPUS_MODULES = ("textwrap", "string", "json", "argparse", "fractions", "calendar")  # ~0.4 MB of source
CORPUS_CHARS = 60_000  # ~15k tokens: enough blocks for the default batch and sequence length, quick to tokenise


def write_corpus(folder: Path) -> Path:
    """A small ``.txt`` of standard-library source (paragraphs split at blank lines), standing in for --data."""
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
    reset_peak(device)
    entry: dict = {"ok": False}
    report["phases"][name] = entry
    t0 = time.perf_counter()
    try:
        entry.update(fn())
        entry["ok"] = True
    except Exception as err:  # the report must say which phase failed and why, and the run must end cleanly
        report["errors"][name] = f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=8)}"
        print(report["errors"][name], file=sys.stderr)
    sync(device)
    entry["s"] = time.perf_counter() - t0
    entry["peak_gib"] = peak_gib(device)
    return entry["ok"]


def _train_log(folder: Path) -> list[dict]:
    path = folder / "train_log.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def phase_train(model_dir: Path, data: Path, out: Path, device: torch.device, steps: int,
                batch_size: int | None, seq_len: int | None) -> dict:
    """``python -m hero_core train --backbone DIR --data PATH --out OUT --recipe hero-10``, a few steps."""
    from hero_core.cli.main import main as hero_main
    from hero_core.method.checkpoint import CONFIG_FILE
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
    from hero_core.cli.main import main as hero_main
    from hero_core.method.trace import RoutingTrace

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
        return np.frombuffer(base64.b64decode(obj["bdata"]), dtype=np.dtype(obj["dtype"])).tolist()
    return list(obj)


def check_app_page(page: dict, checkpoint: Path, trace_file: Path) -> dict:
    """The app's Route explorer (``page`` from app/headless.py's ``open_route_explorer``) must name the model and
    checkpoint in the sidebar and draw the skip map of the traced prompt, gate for gate as the CLI's trace."""
    from hero_core.method.trace import RoutingTrace
    from hero_core.viz.figures import CELLS_NAME

    problems, captions, charts = list(page["problems"]), page["captions"], page["charts"]
    loaded = next((c for c in captions if c.startswith("Loaded ")), "")
    skip_map = next((spec for title, spec in charts.items() if title.startswith("Skip map")), None)
    expected = RoutingTrace.load(trace_file)
    result = {"sidebar": loaded, "charts": sorted(charts), "page_title": page["page_title"]}
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
    if problems:
        raise RuntimeError("app: " + "; ".join(problems))
    return result


def check_model_dir(args, device: torch.device, app_phase: Callable[..., dict]) -> int:
    """train -> trace -> app on a local model directory; one JSON report and one summary line. ``args`` are
    gpu_check's parsed flags; ``app_phase`` is app/headless.py's ``open_route_explorer``."""
    model_dir = Path(args.model_dir).expanduser().resolve()
    t_start = time.perf_counter()
    report: dict = {"mode": "model-dir", "model_dir": str(model_dir), "recipe": RECIPE,
                    "train_steps": args.train_steps, "device": str(device),
                    "device_name": device_info(device),
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
                     ("app", lambda: check_app_page(app_phase(model_dir, checkpoint, device.type, PROMPT,
                                                              args.app_timeout), checkpoint, trace_file))]
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
