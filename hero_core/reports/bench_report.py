"""Render docs/performance.md from the JSON written by ``python -m hero_core bench``.

    python -m hero_core bench --out bench.json
    python scripts/bench_report.py bench.json --out docs/performance.md

The page is a pure function of the JSON (see :func:`render`): rerun both commands to refresh it. Every
precision the run measured (fp32 and bf16 by default) gets a column group in the targets, summary and README
tables and a sub-table in each detail section; a single-precision file of the older schema reads as fp32.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from hero_core.bench.targets import (
    SCHEMA,
    SINGLE_PRECISION_NAME,
    SINGLE_PRECISION_SCHEMA,
    target_unit,
)
from hero_core.files import say_wrote
from hero_core.reports.app_latency_report import latency_lines, load_latency, summary_words
from hero_core.reports.app_load_report import load_lines, load_result
from hero_core.reports.pages import Label, Rows, grouped_table, markdown_table
from hero_core.reports.readme_block import refresh_block


def _num(x: Any, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return f"{x:.{digits}f}"


def _spread(s: dict | None, digits: int = 3, unit: str = "") -> str:
    """``median [p25–p75]`` of a stats dict."""
    if not s:
        return "—"
    return f"{s['median']:.{digits}f}{unit} [{s['p25']:.{digits}f}–{s['p75']:.{digits}f}]"


def _pct(x: float | None, digits: int = 1) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{100 * x:.{digits}f} %"


def _mib(n: float | None) -> str:
    return "—" if n is None else f"{n / 2**20:.0f} MiB"


# -- the result, whichever schema wrote it ---------------------------------------------------------------------
def router_precision(block: dict) -> str:
    """How one precision's routers computed: fp32 weights, and (runs since it was recorded) the precision their
    prefill decisions ran in."""
    kinds = sorted({r["prefill_decisions"] for r in block.get("routers", {}).values() if "prefill_decisions" in r})
    return "routers float32" + (f", prefill decisions {' / '.join(kinds)}" if kinds else "")


def precision_blocks(result: dict) -> dict[str, dict]:
    """Precision name -> its sections. A schema-1 file measured one precision (fp32) at its top level."""
    schema = result.get("schema")
    if schema == SCHEMA:
        return result["precisions"]
    if schema == SINGLE_PRECISION_SCHEMA:
        return {SINGLE_PRECISION_NAME: result}
    raise ValueError(f"not a HeRo Lens bench file (schema {schema!r}, expected {SCHEMA!r} or the single-precision "
                     f"{SINGLE_PRECISION_SCHEMA!r})")


def result_targets(result: dict) -> list[dict]:
    """The targets, each with its precision (schema-1 targets carry none: they are fp32's)."""
    return [{"precision": SINGLE_PRECISION_NAME, **t} for t in result.get("targets", [])]


# -- targets ------------------------------------------------------------------------------------------------
def _status(target: dict) -> str:
    return {True: "met", False: "**not met**", None: "not measured"}[target["met"]]


def _target_value(target: dict) -> str:
    value, unit = target["value"], target_unit(target["key"])
    if value is None:
        return "—"
    if unit == "of_ideal":
        return _pct(value)
    if unit == "speedup":
        return f"x{value:.2f}"
    return f"{100 * value:+.1f} %"


def _threshold(target: dict) -> str:
    unit, threshold, direction = target_unit(target["key"]), target["threshold"], target["direction"]
    if unit == "of_ideal":
        return f"{direction} {100 * threshold:.0f} % of ideal"
    if unit == "speedup":
        return f"{direction} x{threshold:.2f}"
    return f"{direction} +{100 * threshold:.0f} %"


def targets_table(result: dict, *, notes: bool = True) -> list[str]:
    """Each target once, its measured value and status in one column per precision."""
    per: dict[str, Rows] = {name: [] for name in precision_blocks(result)}
    for t in result_targets(result):
        text = t["description"] + (f" ({t['note']})" if notes and t.get("note") else "")
        per.setdefault(t["precision"], []).append(((text, _threshold(t)), [f"{_target_value(t)} · {_status(t)}"]))
    return grouped_table(["target", "threshold"], per, [""])


def warnings(result: dict) -> list[str]:
    """Reasons to read the figures with care, from the JSON alone (the end load less the run's own torch threads)."""
    out = []
    cfg, machine, load = result.get("config", {}), result.get("machine", {}), result.get("load", {})
    if cfg.get("quick"):
        out.append("**Quick mode**: small shapes and few repetitions — a smoke test, not the reference figures.")
    cores = machine.get("available_cores") or machine.get("logical_cores") or 1
    threads = machine.get("torch_threads") or 1
    others = [x[0] - own for x, own in ((load.get("start"), 0), (load.get("end"), threads)) if x]
    if others and max(others) > max(0.5, cores - threads):
        out.append(f"**Busy machine**: 1-minute load average {load.get('start', ['?'])[0]} at the start and "
                   f"{(load.get('end') or ['?'])[0]} at the end on {cores} cores with {threads} torch thread(s): "
                   "other processes shared the CPU, so wall times are inflated and noisy (CPU-time ratios are "
                   "given alongside).")
    synthetic = list(dict.fromkeys(n for block in precision_blocks(result).values()
                                   for n, r in block.get("routers", {}).items() if r.get("source") == "synthetic"))
    if synthetic:
        out.append(f"**Synthetic routers** for {', '.join(synthetic)}: the trained checkpoints were not available, "
                   "so random routers with a calibrated threshold stood in. Speed figures are real for the skip "
                   "they realise; their output quality is meaningless.")
    return out


# -- one precision's rows -------------------------------------------------------------------------------------
def _speedup_cells(figures: dict) -> list[str]:
    """A routed configuration against dense: wall-clock speedup [spread], CPU-time speedup, the ideal (from the
    FLOPs skipped) and the share of the ideal reached."""
    return [_spread(figures["speedup"]), _num(figures["speedup_cpu"]["median"]), _num(figures["ideal_speedup"]),
            _pct(figures["efficiency"], 0)]


def _ratio_cells(section: dict, key: str, *, cpu: bool = True) -> list[str]:
    """A measured ratio with no ideal to set it against: wall clock [spread], and the CPU-time median where the
    section timed one (``<key>_cpu``)."""
    return [_spread(section[key]), _num(section[f"{key}_cpu"]["median"]) if cpu else "—", "—", "—"]


# The sections' measured ratios without an ideal: section -> (row label, a str.format of the section's fields;
# the ratio's key), in the table's order.
RATIO_ROWS = {
    "recording": (("record=True / record=False ({router}, {batch}x{tokens})", "record_ratio"),
                  ("record + trace assembly / record=False", "assemble_ratio")),
    "overhead": (("dense variant / bare backbone ({batch}x{tokens})", "dense_over_bare"),
                 ("wrapped, no call active / bare", "no_call_over_bare")),
    "training": (("routed train step (straight-through) / dense fwd+bwd ({router}, {batch}x{tokens})",
                  "routed_over_dense"),
                 ("routed train step (hard branch) / dense fwd+bwd", "paper_over_dense")),
}
WALL_ONLY = ("assemble_ratio", "no_call_over_bare")  # ratios timed by the wall clock alone (no <key>_cpu)


def summary_rows(block: dict) -> Rows:
    """The ratios of one precision: (ratio,) -> [wall, CPU, ideal, of ideal]."""
    rows: Rows = []
    for row in block.get("prefill") or []:
        for name, f in row["routed"].items():
            rows.append(((f"prefill {row['batch']}x{row['tokens']}: dense / {name}",), _speedup_cells(f)))
    for row in block.get("decode") or []:
        for name, f in row["routed"].items():
            rows.append(((f"decode batch {row['batch']}: dense / {name}",), _speedup_cells(f)))
        if row.get("router_overhead") is not None:
            rows.append(((f"decode batch {row['batch']}: router only (τ = 0) / dense",),
                         [_num(1.0 + row["router_overhead"]), "—", "1", "—"]))
    for name, ratios in RATIO_ROWS.items():
        section = block.get(name)
        for label, key in ratios if section else ():
            if key in section:  # training sections written before the hard-branch step was timed lack it
                rows.append(((label.format(**section),), _ratio_cells(section, key, cpu=key not in WALL_ONLY)))
    return rows


def precision_time_rows(block: dict, *, routed: bool = True) -> list[tuple[Label, float]]:
    """Median seconds of each timed run of one precision, for comparing precisions: (run, config) -> s."""
    rows = []
    for row in block.get("prefill") or []:
        rows += [((f"prefill {row['batch']}x{row['tokens']}", k), s["median"]) for k, s in row["time_s"].items()
                 if routed or k == "dense"]
    for row in block.get("decode") or []:
        rows += [((f"decode batch {row['batch']} ({row['new_tokens']} tokens)", k), s["median"])
                 for k, s in row["time_s"].items() if routed or k == "dense"]
    if block.get("training"):
        t = block["training"]
        rows += [((f"training step {t['batch']}x{t['tokens']}", k), s["median"]) for k, s in t["time_s"].items()
                 if routed or k == "dense"]
    return rows


def precisions_table(blocks: dict[str, dict], *, routed: bool = True) -> list[str]:
    """Seconds of every run in each precision, and each later precision's speed-up over the first one
    (a ratio of medians: the precisions ran one after the other, not interleaved)."""
    names = list(blocks)
    times = {name: precision_time_rows(block, routed=routed) for name, block in blocks.items()}
    reference = dict(times[names[0]])

    def cells(name: str, label: Label, seconds: float) -> list[str]:
        if name == names[0]:
            return [_num(seconds)]
        base = reference.get(label)
        return [_num(seconds), f"x{base / seconds:.2f}" if base and seconds > 0 else "—"]

    per = {name: [(label, cells(name, label, seconds)) for label, seconds in rows] for name, rows in times.items()}
    headers = {name: ["time (s)"] if name == names[0] else ["time (s)", f"speed-up over {names[0]}"]
               for name in names}
    return grouped_table(["run", "config"], per, headers)


# -- one precision's detail tables ----------------------------------------------------------------------------
def prefill_table(block: dict) -> list[str]:
    rows = []
    for row in block["prefill"]:
        shape = f"{row['batch']}x{row['tokens']}"
        rows.append([shape, "dense", _spread(row["time_s"]["dense"]), "1", "1", "—", "100 %", "0 %", "0 %"])
        for name, f in row["routed"].items():
            rows.append([shape, name, _spread(row["time_s"][name]), _num(f["speedup"]["median"]),
                         _num(f["ideal_speedup"]), _pct(f["efficiency"], 0), _pct(f["ffn_executed_share"], 0),
                         _pct(f["param_skip"]), _pct(f["flop_share_saved"])])
    return markdown_table(["shape", "config", "time (s)", "speed-up", "ideal", "of ideal", "FFNs run", "param skip",
                           "FLOPs saved"], rows)


def decode_table(block: dict) -> list[str]:
    rows = []
    for row in block["decode"]:
        label = f"{row['batch']} ({row['prompt_tokens']}+{row['new_tokens']})"
        rows.append([label, "dense", _spread(row["tokens_per_s"]["dense"], 1), "1", "1", "—", "1", "—", "100 %",
                     "0 %"])
        for name, f in row["routed"].items():
            rows.append([label, name, _spread(row["tokens_per_s"][name], 1), _num(f["speedup"]["median"]),
                         _num(f["ideal_speedup"]), _pct(f["efficiency"], 0), _num(f.get("weight_read_ideal")),
                         _num(f.get("overhead_bound")), _pct(f["ffn_executed_share"], 0),
                         _pct(f.get("param_skip"))])
        only = next((k for k in row["tokens_per_s"] if k.startswith("router only")), None)
        if only is not None:
            rows.append([label, only, _spread(row["tokens_per_s"][only], 1),
                         _num(1.0 / (1.0 + row["router_overhead"])), "1", "—", "—", "—", "100 %", "0 %"])
    return markdown_table(["batch (prompt+new)", "config", "tokens/s", "speed-up", "ideal", "of ideal",
                           "weight-read ideal", "bound", "FFNs run", "param skip (decoded tokens)"], rows)


def recording_table(block: dict) -> list[str]:
    r = block["recording"]
    return [f"{r['router']} on {r['batch']}x{r['tokens']} tokens.", "",
            *markdown_table(["run", "time (s)"], [[k.replace("_", " "), _spread(s)] for k, s in r["time_s"].items()])]


def overhead_table(block: dict) -> list[str]:
    o = block["overhead"]
    return [f"{o['batch']}x{o['tokens']} tokens; largest |logit difference| dense variant vs bare: "
            f"{o['max_abs_logit_diff']:.2e}.", "",
            *markdown_table(["run", "time (s)"], [[k.replace("_", " "), _spread(s)] for k, s in o["time_s"].items()])]


def training_table(block: dict) -> list[str]:
    t = block["training"]
    return [f"{t['batch']}x{t['tokens']} tokens, {t['router']}'s router.", "",
            *markdown_table(["step", "time (s)", "tokens/s"],
                            [[k, _spread(t["time_s"][k]), _spread(t["tokens_per_s"][k], 0)] for k in t["time_s"]])]


def per_precision(blocks: dict[str, dict], key: str, table) -> list[str]:
    """``table(block)`` under a sub-heading for every precision that ran section ``key``."""
    lines = []
    for name, block in blocks.items():
        if block.get(key):
            lines += [f"### {name}", "", *table(block)]
    return lines


PREFILL_TEXT = ("Seconds per batch (median [IQR]); FFN share, param skip and FLOPs saved are those the routed pass "
                "realised on this batch.")
DECODE_TEXT = ("Greedy decoding with a KV cache from equal-length prompts; tokens/s over the decode steps only "
               "(prefill excluded), every row decoding the same number of tokens. *ideal* is the FLOP ideal (the "
               "target's); *weight-read ideal* is the speed-up if a step cost the weights it reads, as small-batch "
               "decoding roughly does: a block's FFN is read when any row of the batch runs it, so at batch > 1 "
               "only blocks every row skips save anything. *router only (τ = 0)* runs the router with every FFN "
               "executed: its cost over dense is the router's per-step overhead, which the FLOP ideal does not see "
               "(at one token a step the router's small operations per block cost their launch latency, not their "
               "FLOPs); *bound* is the FLOP ideal with that overhead added back, what a perfect gather/scatter "
               "could reach with this router (the router's FLOPs are in both terms, so the bound errs a few "
               "percent low).")
OVERHEAD_TEXT = "*bare* is the same model with the routing wrappers and pass hook taken off."
TRAINING_TEXT = ("*routed*: forward with a copy of the router, LM loss + alpha * usage penalty, backward, clip, "
                 "AdamW step, as `hero_core/train/train.py` with its default straight-through gate gradient (both "
                 "branches run on every token: training skips no compute); *routed_paper*: the same with the hard "
                 "branch (`--gate-gradient paper`). *dense*: forward + backward to the input embeddings (the "
                 "backbone is frozen).")
MEMORY_TEXT = ("One fresh process per configuration, after every import loading needs: resident memory added by "
               "loading the backbone (tokenizer included) and by a {shape} forward. *Weights* are the bytes of the "
               "model's tensors. Safetensors weights are memory-mapped, so full-precision weights count as *file* "
               "pages once a forward has touched them; NF4 on CPU reads the whole full-precision file to quantise "
               "it, and those (reclaimable) file pages stay in the resident set while the mapping lives, which is "
               "why its peak RSS can exceed its weights by far. Measured once (not per precision).")


def memory_lines(mem: dict) -> list[str]:
    lines = ["## Memory", "", MEMORY_TEXT.format(shape=f"{mem['forward_shape'][0]}x{mem['forward_shape'][1]}"), ""]
    rows = []
    for key, c in mem.get("configs", {}).items():
        if "skipped" in c:
            rows.append([key, "—", "—", "—", "—", "—", c["skipped"]])
        else:
            rows.append([key, _mib(c["weight_bytes"]), _mib(c["peak_delta_forward"]), _mib(c.get("anon_delta_forward")),
                         _mib(c.get("file_delta_forward")), f"{c['forward_s']:.3f}",
                         "" if c.get("peak_is_exact", True) else "peak since process start (no /proc reset)"])
    lines += markdown_table(["config", "weights", "peak RSS (load + forward)", "anon after forward",
                             "file after forward", "forward (s)", "note"], rows)
    if "nf4_over_fp32_weights" in mem:
        lines += [f"NF4 / fp32 weight bytes {_num(mem['nf4_over_fp32_weights'], 2)}, peak RSS (load + forward) "
                  f"{_num(mem['nf4_over_fp32_peak'], 2)}.", ""]
    return lines


def conditions_lines(result: dict, blocks: dict[str, dict]) -> list[str]:
    m, cfg, model = result["machine"], result["config"], result["model"]
    v = m.get("versions", {})
    return ["## Conditions", "", *markdown_table(["", ""], [
        ["machine", f"{m['platform']} · {m['cpu']}"],
        ["cores", f"{m['available_cores']} available of {m['logical_cores']} logical"],
        ["torch threads", f"{m['torch_threads']} (interop {m['torch_interop_threads']}; "
                          f"OMP_NUM_THREADS={m.get('omp_num_threads_env')})"],
        ["device", m["device"] + (f" ({m['gpu']})" if m.get("gpu") else "")],
        ["load average (1, 5, 15 min)", f"start {result['load'].get('start')} · end {result['load'].get('end')}"],
        ["versions", " · ".join(f"{k} {val}" for k, val in v.items() if val)],
        ["model", f"{model['backbone']}{' (' + model['quantization'] + ')' if model.get('quantization') else ''} · "
                  f"{model['n_layers']} blocks, {model['n_routed']} routed · "
                  f"{model['profile']['total_params']:,} parameters"],
        ["precisions", " · ".join(f"{name} (backbone {block.get('dtype', 'float32')}, {router_precision(block)})"
                                  for name, block in blocks.items())],
        ["repetitions", f"{cfg['reps']} timed after {cfg['warmup']} warm-up, interleaved; "
                        f"whole run {result.get('wall_s', '?')} s"],
    ])]


def render(result: dict, app_latency: dict | None = None, app_load: dict | None = None) -> str:
    """The page; ``app_latency`` / ``app_load``: docs/app_latency.json's / docs/app_load.json's content, each drawn as
    its own section."""
    blocks = precision_blocks(result)
    lines = ["# Performance", "",
             f"Generated by `scripts/bench_report.py` from the output of `python -m hero_core bench` "
             f"({result.get('created', '?')}); do not edit by hand, rerun both to refresh.", ""]
    for w in warnings(result):
        lines += [f"> {w}", ">"]
    if lines[-1] == ">":
        lines[-1] = ""
    lines += conditions_lines(result, blocks)
    lines += ["## Targets", "", "Each target in each precision (a column per precision).", ""]
    lines += targets_table(result)
    lines += decode_reading(result)
    if len(blocks) > 1:
        lines += ["## Precisions side by side", "",
                  f"Median seconds of each run in each precision, and the speed-up over {next(iter(blocks))} "
                  "(a ratio of medians: the precisions ran one after the other, so machine drifts do not cancel as "
                  "in the paired ratios elsewhere).", ""]
        lines += precisions_table(blocks)
    lines += ["## Summary of ratios", "",
              "Medians of paired per-repetition ratios, with their interquartile range; *ideal* is the speed-up "
              "the FLOPs actually skipped would give (router and adapter work charged).", ""]
    lines += grouped_table(["ratio"], {name: summary_rows(b) for name, b in blocks.items()},
                           ["wall: median [IQR]", "CPU time", "ideal", "of ideal"])
    for key, heading, text, table in (("prefill", "Prefill", PREFILL_TEXT, prefill_table),
                                      ("decode", "Decode", DECODE_TEXT, decode_table),
                                      ("recording", "Trace recording", "", recording_table),
                                      ("overhead", "Wrapper overhead", OVERHEAD_TEXT, overhead_table),
                                      ("training", "Training step", TRAINING_TEXT, training_table)):
        body = per_precision(blocks, key, table)
        if body:
            lines += [f"## {heading}", "", *([text, ""] if text else []), *body]
    if result.get("memory"):
        lines += memory_lines(result["memory"])
    lines += ["## Routed configurations", ""]
    lines += markdown_table(["precision", "name", "source", "variant", "tau", "note"],
                            [[p, n, r["source"], r["variant"], _num(r["tau"], 4), r.get("note", "")]
                             for p, block in blocks.items() for n, r in block.get("routers", {}).items()])
    lines += ["## How this is measured", "",
              "* One process, one backbone per precision: dense, routed and bare runs share weights, threads and "
              "load. Each precision loads its backbone in that dtype (router weights stay in fp32; the conditions "
              "say which precision prefill decisions ran in) and runs every section in turn; memory runs once.",
              "* After warm-up, the configurations of a section run interleaved in rotating order; a ratio is "
              "the median of the per-repetition ratios of adjacent runs, so slow load drifts cancel.",
              "* *Ideal* speed-up = sum of the tokens' dense FLOPs / sum of (dense - saved) FLOPs, from the "
              "executed matrix of the same inputs (`hero_core.measures.accounting`: 2 FLOPs per weight of every matmul "
              "including the LM head, causal attention, router, adapter and memory-read costs).",
              "* Wall time is the headline; process CPU time is shown alongside because it is far less sensitive "
              "to other processes when torch runs one thread.",
              f"* Load average before each section: {json.dumps(result['load'].get('sections', {}))}.", "",
              "## The app in a browser, page by page", "",
              *(["In short: <!-- app-latency-words:start -->", "", *summary_words(app_latency), "",
                 "<!-- app-latency-words:end -->", ""] if app_latency else []),
              "<!-- app-latency:start -->", "",
              *(latency_lines(app_latency) if app_latency else ["Not measured yet: `python scripts/app_latency.py`."]),
              "", "<!-- app-latency:end -->", "",
              "What each page spends its time on (the server's profile and Chromium's): "
              "[experiments/app-latency](experiments/app-latency/README.md).", "",
              "## Many visitors at once", "", "<!-- app-load:start -->", "",
              *load_lines(app_load or {}), "", "<!-- app-load:end -->", "",
              "## Measured elsewhere", "",
              "* Training throughput of the recipe against fp32 on one core: `python scripts/bench_training.py`, "
              "[experiments/training-throughput.json](experiments/training-throughput.json).",
              "* The router's decode-step cost split into the decision and the work around it, and `torch.compile`: "
              "[experiments/router-compile](experiments/router-compile/README.md).", ""]
    return "\n".join(lines)


def decode_reading(result: dict) -> list[str]:
    """Sentences, computed from the run, on how far the router's own latency explains the decode gap."""
    out = []
    for precision, block in precision_blocks(result).items():
        for row in block.get("decode") or []:
            overhead = row.get("router_overhead")
            if overhead is None:
                continue
            for name, f in row["routed"].items():
                achieved, bound = f["speedup"]["median"], f.get("overhead_bound")
                out.append(f"* {precision}, decode batch {row['batch']}, {name}: the router alone (every FFN run) "
                           f"costs {100 * overhead:+.1f} % of a dense step; with that latency added back the FLOP "
                           f"ideal x{f['ideal_speedup']:.2f} becomes x{bound:.2f}, and x{achieved:.2f} was achieved "
                           f"({100 * achieved / bound:.0f} % of that bound).")
    return ["Reading the decode targets:", "", *out, ""] if out else []


def speed_rows(block: dict) -> Rows:
    """The README's speed-ups of one precision: (run, router) -> [speed-up, FLOP ideal, bound]."""
    rows: Rows = [((f"prefill {r['batch']}x{r['tokens']}", name),
                   [_num(f["speedup"]["median"], 2), _num(f["ideal_speedup"], 2), "—"])
                  for r in block.get("prefill") or [] for name, f in r["routed"].items()]
    rows += [((f"decode batch {r['batch']}", name),
              [_num(f["speedup"]["median"], 2), _num(f["ideal_speedup"], 2), _num(f.get("overhead_bound"), 2)])
             for r in block.get("decode") or [] for name, f in r["routed"].items()]
    return rows


def readme_lines(result: dict) -> list[str]:
    """The README's speed block: speed-ups and targets, a column group per precision; where the full page is."""
    m, blocks = result["machine"], precision_blocks(result)
    lines = [f"Measured by `make bench` on {m['cpu']} ({m['available_cores']} cores, {m['torch_threads']} torch "
             f"thread(s), {m['device']}) in {', '.join(blocks)}; full page: "
             "[docs/performance.md](docs/performance.md).", ""]
    per = {name: speed_rows(block) for name, block in blocks.items()}
    if any(per.values()):
        lines += ["Speed-up over dense in each precision (wall time, median), next to the FLOP ideal and, for "
                  "decoding, the bound left once the router's measured per-step latency is added back:", ""]
        lines += grouped_table(["run", "router"], per, ["speed-up", "FLOP ideal", "bound"])
    if len(blocks) > 1:
        lines += ["The dense backbone in each precision (median seconds of the same work):", ""]
        lines += precisions_table(blocks, routed=False)
    lines += targets_table(result, notes=False)
    return lines[:-1] if lines and lines[-1] == "" else lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("bench", nargs="?", type=Path, default=Path("bench.json"),
                        help="bench JSON (default bench.json)")
    parser.add_argument("--out", type=Path, default=Path("docs/performance.md"))
    parser.add_argument("--readme", type=Path, default=None,
                        help="also refresh this README's <!-- performance:start/end --> block")
    args = parser.parse_args(argv)
    try:
        result = json.loads(args.bench.read_text())
        text = render(result, load_latency(args.out.parent / "app_latency.json"),
                      load_result(args.out.parent / "app_load.json"))
        block = readme_lines(result)
    except (OSError, json.JSONDecodeError, ValueError, KeyError) as err:
        print(f"error: cannot render {args.bench}: {err}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    say_wrote(args.out)
    if args.readme is not None:
        refresh_block(args.readme, "performance", block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
