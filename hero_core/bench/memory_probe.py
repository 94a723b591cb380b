"""The memory probe, one fresh process per configuration: load the backbone, run one forward, report the
resident memory it added. Run as ``python -m hero_core.bench.memory_probe '<json arguments>'``; it prints
one line ``HERO_BENCH_MEMORY <json>``. :func:`hero_core.bench.sections.bench_memory` starts it."""

from __future__ import annotations

import gc
import json
import sys
import time
from pathlib import Path

import torch

from hero_core.backbones.threads import set_threads
from hero_core.bench.sections import PROBE_MARKER
from hero_core.bench.timing import proc_lines, start_timer


def _rss_bytes() -> int:
    import psutil  # a dependency of accelerate, which hero_core requires

    return int(psutil.Process().memory_info().rss)


def _rss_split() -> dict[str, int]:
    """Resident anonymous and file-backed memory (bytes), Linux only: {} elsewhere. Weights loaded from
    safetensors are memory-mapped, so they show up as *file* pages."""
    return {line.split(":")[0]: int(line.split()[1]) * 1024
            for line in proc_lines("/proc/self/status", ("RssAnon:", "RssFile:"))}


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (Linux >= 4.0: ``5`` to ``/proc/self/clear_refs``)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _peak_rss_bytes() -> int:
    found = proc_lines("/proc/self/status", "VmHWM:")
    if found:
        return int(found[0].split()[1]) * 1024
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # since process start: includes imports
    return int(peak if sys.platform == "darwin" else peak * 1024)


def memory_probe(backbone: str | None, quantization: str | None, batch: int, length: int, threads: int,
                 device: str = "cpu") -> dict:
    """Run in a fresh process: load the backbone, run one forward, report resident memory (bytes).

    Everything loading needs is imported first (the model class, bitsandbytes), and the peak mark is
    reset, so the deltas are the backbone's weights and the forward's activations, not import costs."""
    set_threads(threads)
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from hero_core.backbones.loading import embedded_model_dir, load_backbone

    model_dir = embedded_model_dir() if backbone is None else Path(backbone)
    config = AutoConfig.from_pretrained(model_dir)
    AutoModelForCausalLM._model_mapping[type(config)]  # imports the modelling module
    AutoTokenizer.from_pretrained(model_dir)
    if quantization == "nf4":
        import bitsandbytes  # noqa: F401
        import transformers.integrations.bitsandbytes  # noqa: F401
    dev = torch.device(device)
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    base, base_split = _rss_bytes(), _rss_split()
    exact_peak = _reset_peak_rss()
    t0 = time.perf_counter()
    bb = load_backbone(backbone, quantization=quantization, device=device)
    load_s = time.perf_counter() - t0
    gc.collect()
    after_load, peak_load, load_split = _rss_bytes(), _peak_rss_bytes(), _rss_split()
    weights = sum(p.numel() * p.element_size() for p in bb.model.parameters())
    weights += sum(b.numel() * b.element_size() for b in bb.model.buffers())
    ids = torch.randint(0, bb.model.config.vocab_size, (batch, length), generator=torch.Generator().manual_seed(0))
    ids = ids.to(dev)
    with torch.no_grad():
        bb.model(input_ids=ids, use_cache=False)  # first forward (bitsandbytes may repack here)
        stop = start_timer(dev)
        bb.model(input_ids=ids, use_cache=False)
        forward_s = stop()[0]
    extra = {"device_peak_bytes": int(torch.cuda.max_memory_allocated(dev))} if dev.type == "cuda" else {}
    split = _rss_split()
    for key, name in (("RssAnon", "anon"), ("RssFile", "file")):
        if key in split and key in base_split:
            extra[f"{name}_delta_load"] = load_split[key] - base_split[key]
            extra[f"{name}_delta_forward"] = split[key] - base_split[key]
    return {**extra, "quantization": quantization or "none", "baseline_rss": base, "rss_after_load": after_load,
            "loaded_delta": after_load - base, "peak_delta_load": peak_load - base,
            "peak_delta_forward": _peak_rss_bytes() - base, "weight_bytes": int(weights), "load_s": load_s,
            "forward_s": forward_s, "forward_shape": [batch, length], "peak_is_exact": exact_peak}


def main(argv: list[str] | None = None) -> int:
    args = json.loads((sys.argv[1:] if argv is None else argv)[0])
    print(f"{PROBE_MARKER} " + json.dumps(memory_probe(**args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
