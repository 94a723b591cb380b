"""The benchmark (hero_core/bench/), its report (scripts/bench_report.py) and the fast paths it measures."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from hero_core.bench import inputs, sections, targets, timing
from hero_core.bench import run as bench_run
from hero_core.bench.memory_probe import memory_probe
from hero_core.bench.sections import ROUTER_ONLY, overhead_bound
from hero_core.measures import accounting
from hero_core.method.inject import RoutedFFN, unwrapped
from hero_core.method.memory import DepthMemory
from hero_core.reports import bench_report

ROOT = Path(__file__).resolve().parents[1]
TINY_ARGS = ["--quick", "--sizes", "2x16,1x24", "--reps", "2", "--warmup", "1", "--decode-batches", "1,3",
             "--decode-prompt", "6", "--decode-tokens", "3", "--train-shape", "2x12", "--record-shape", "2x16",
             "--overhead-shape", "2x16", "--no-memory", "--threads", "1", "--checkpoints", "hero-25,hero-40"]


def _report_module():
    return bench_report


def _positive_finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


@pytest.fixture(scope="module")
def quick_result(tmp_path_factory, monkeypatch_module):
    """The CLI, in quick mode, on the tiny random Llama (HERO_LENS_TINY=1)."""
    from hero_core.cli.main import main

    monkeypatch_module.setenv("HERO_LENS_TINY", "1")
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    threads = torch.get_num_threads()
    assert main(["bench", *TINY_ARGS, "--out", str(out)]) == 0
    assert torch.get_num_threads() == threads  # the thread count is restored afterwards
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


PRECISION_TARGETS = ["prefill_efficiency", "prefill_efficiency", "decode_speedup", "decode_speedup",
                     "decode_efficiency", "decode_efficiency", "router_overhead", "recording_overhead",
                     "wrapper_overhead"]


def test_quick_bench_json_has_every_section_in_both_precisions(quick_result):
    r = quick_result
    assert r["schema"] == targets.SCHEMA and r["config"]["quick"] is True
    assert r["config"]["dtypes"] == ["fp32", "bf16"]  # the default: both side by side
    assert r["machine"]["torch_threads"] == 1 and r["machine"]["versions"]["torch"]
    assert len(r["load"]["start"]) == 3 and len(r["load"]["end"]) == 3
    assert list(r["precisions"]) == ["fp32", "bf16"]
    assert [b["dtype"] for b in r["precisions"].values()] == ["float32", "bfloat16"]  # really loaded that way
    assert {"fp32 prefill", "bf16 prefill", "fp32 training", "bf16 training"} <= set(r["load"]["sections"])
    for name, block in r["precisions"].items():
        _check_precision_block(block)
        assert set(block["section_wall_s"]) == {"prefill", "decode", "recording", "overhead", "training"}, name
    assert "memory" not in r  # --no-memory

    assert [(t["precision"], t["key"]) for t in r["targets"]] == \
        [("fp32", k) for k in PRECISION_TARGETS] + [("bf16", k) for k in PRECISION_TARGETS]
    assert all(isinstance(t["met"], bool) for t in r["targets"])
    prefill = [t for t in r["targets"] if t["key"] == "prefill_efficiency"]
    assert [t["router"] for t in prefill] == ["hero-25", "hero-40"] * 2  # both routers, in both precisions
    assert all("prefill 2x16" in t["description"] and "4x512" in t["note"] for t in prefill)
    bf16 = r["precisions"]["bf16"]
    speedup = next(t for t in r["targets"] if t["key"] == "decode_speedup" and t["precision"] == "bf16")
    assert speedup["value"] == bf16["decode"][0]["routed"]["hero-25"]["speedup"]["median"]
    # hero-25's budget leaves room for more than breaking even: its threshold is the raised one
    assert speedup["met"] == (speedup["value"] >= targets.DECODE_SPEEDUP_BY_ROUTER["hero-25"] == 1.25)
    overhead = next(t for t in r["targets"] if t["key"] == "router_overhead" and t["precision"] == "bf16")
    assert overhead["value"] == bf16["decode"][0]["router_overhead"]
    json.dumps(r, allow_nan=False)  # strict JSON


def _check_precision_block(b):
    assert set(b["routers"]) == {"hero-25", "hero-40"}
    assert all(c["source"] == "synthetic" and "not available" in c["note"] for c in b["routers"].values())
    assert [(row["batch"], row["tokens"]) for row in b["prefill"]] == [(2, 16), (1, 24)]
    for row in b["prefill"] + b["decode"]:
        assert set(row["time_s"]) - {ROUTER_ONLY} == {"dense", "hero-25", "hero-40"}
        for s in row["time_s"].values():
            assert s["n"] == 2 and s["min"] <= s["median"] <= s["max"] and all(map(_positive_finite, s["values"]))
        for f in row["routed"].values():
            for key in ("ideal_speedup", "efficiency", "ffn_executed_share"):
                assert _positive_finite(f[key]), key
            assert _positive_finite(f["speedup"]["median"]) and _positive_finite(f["speedup_cpu"]["median"])
            assert 0 <= f["param_skip"] < 1
    assert [row["batch"] for row in b["decode"]] == [1, 3]
    assert all(_positive_finite(f["weight_read_ideal"]) for row in b["decode"] for f in row["routed"].values())
    assert all(_positive_finite(s["median"]) for row in b["decode"] for s in row["tokens_per_s"].values())
    for row in b["decode"]:  # the router's own decode overhead, and the bound it leaves below the FLOP ideal
        assert ROUTER_ONLY in row["time_s"] and math.isfinite(row["router_overhead"])
        for f in row["routed"].values():
            assert 0 < f["overhead_bound"] <= f["ideal_speedup"] + 1e-12
    for key in ("record_ratio", "assemble_ratio"):
        assert _positive_finite(b["recording"][key]["median"])
    assert _positive_finite(b["overhead"]["dense_over_bare"]["median"])
    assert b["overhead"]["max_abs_logit_diff"] <= 1e-5  # the dense variant computes the bare backbone
    assert _positive_finite(b["training"]["routed_over_dense"]["median"])
    assert _positive_finite(b["training"]["paper_over_dense"]["median"])


def _markdown_table(text: str, header_start: str) -> list[dict[str, str]]:
    """The rows of the first table in ``text`` whose header line starts with ``header_start``."""
    lines = text.splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    header = [c.strip() for c in lines[i].strip("|").split("|")]
    rows = []
    for line in lines[i + 2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True)))
    return rows


def test_report_renders_markdown_from_bench_json(quick_result, tmp_path):
    report = _report_module()
    text = report.render(quick_result)
    assert text.startswith("# Performance")
    for heading in ("## Conditions", "## Targets", "## Precisions side by side", "## Summary of ratios",
                    "## Prefill", "## Decode", "## Trace recording", "## Wrapper overhead", "## Training step",
                    "## Routed configurations"):
        assert heading in text, heading
    for section in ("## Prefill", "## Decode", "## Training step"):  # a sub-table per precision, in order
        body = text.split(section, 1)[1].split("\n## ", 1)[0]
        assert body.index("### fp32") < body.index("### bf16"), section
    assert "Quick mode" in text and "Synthetic routers" in text
    assert "prefill 2x16: dense / hero-40" in text and "decode batch 3: dense / hero-25" in text
    # synthetic routers were never trained under bf16 autocast: their prefills decide in fp32 in both precisions
    assert ("fp32 (backbone float32, routers float32, prefill decisions fp32) · "
            "bf16 (backbone bfloat16, routers float32, prefill decisions fp32)") in text
    src = tmp_path / "bench.json"
    src.write_text(json.dumps(quick_result))
    out = tmp_path / "docs" / "performance.md"
    assert report.main([str(src), "--out", str(out)]) == 0
    assert out.read_text() == text
    src.write_text(json.dumps({"schema": "something-else"}))
    assert report.main([str(src), "--out", str(out)]) == 2


def test_report_puts_each_precision_in_its_own_columns(quick_result):
    report = _report_module()
    text = report.render(quick_result)
    rows = _markdown_table(text, "| target | threshold | fp32 | bf16 |")
    assert len(rows) == len(PRECISION_TARGETS)  # one row per target, its two precisions side by side
    for t in quick_result["targets"]:
        row = next(r for r in rows if r["target"].startswith(t["description"]))
        assert row[t["precision"]] == f"{report._target_value(t)} · {report._status(t)}"
    summary = _markdown_table(text, "| ratio | fp32 wall")
    fp32, bf16 = (quick_result["precisions"][p]["prefill"][0]["routed"]["hero-40"] for p in ("fp32", "bf16"))
    row = next(r for r in summary if r["ratio"] == "prefill 2x16: dense / hero-40")
    assert row["fp32 ideal"] == f"{fp32['ideal_speedup']:.3f}" and row["bf16 ideal"] == f"{bf16['ideal_speedup']:.3f}"
    assert row["bf16 CPU time"] == f"{bf16['speedup_cpu']['median']:.3f}"
    times = _markdown_table(text, "| run | config | fp32 time (s)")
    dense = next(r for r in times if r["run"] == "prefill 2x16" and r["config"] == "dense")
    seconds = {p: quick_result["precisions"][p]["prefill"][0]["time_s"]["dense"]["median"] for p in ("fp32", "bf16")}
    assert dense["bf16 speed-up over fp32"] == f"x{seconds['fp32'] / seconds['bf16']:.2f}"


def test_report_reads_a_single_precision_file_of_the_older_schema(quick_result):
    """Schema 1 (before both precisions were measured): the sections at the top level, fp32 only."""
    report = _report_module()
    fp32 = quick_result["precisions"]["fp32"]
    old = {k: v for k, v in quick_result.items() if k not in ("precisions", "targets")}
    load = quick_result["load"]
    old.update(fp32, schema=targets.SINGLE_PRECISION_SCHEMA,
               load={**load, "sections": {k: v for k, v in load["sections"].items() if not k.startswith("bf16")}},
               targets=[{k: v for k, v in t.items() if k != "precision"} for t in quick_result["targets"]
                        if t["precision"] == "fp32"])
    text = report.render(old)
    assert "| target | threshold | fp32 |\n" in text and "bf16" not in text
    assert "### fp32" in text and "## Precisions side by side" not in text
    assert "prefill 2x16: dense / hero-40" in text
    block = "\n".join(report.readme_lines(old))
    assert "| run | router | fp32 speed-up | fp32 FLOP ideal | fp32 bound |" in block
    with pytest.raises(ValueError, match="hero-lens-bench/1"):  # an unknown schema names the ones it reads
        report.render({**old, "schema": "hero-lens-bench/0"})


def test_report_names_the_precision_each_precisions_prefill_decisions_ran_in(tiny):
    router = tiny.router
    router.config.extra["compute_dtype"] = "bfloat16"  # as the bundled checkpoints were trained
    rc = inputs.RoutedConfig(name="hero-x", router=router, variant="hero", tau=0.5, source="checkpoint")
    blocks = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        describe = {**rc.describe(), "prefill_decisions": bench_run.prefill_decisions(router, dtype)}
        blocks[name] = bench_report.router_precision({"routers": {"hero-x": describe}})
    assert blocks == {"fp32": "routers float32, prefill decisions fp32",
                      "bf16": "routers float32, prefill decisions bf16 autocast"}
    assert bench_report.router_precision({"routers": {"hero-x": rc.describe()}}) == "routers float32"  # older runs


def test_report_renders_memory_section():
    report = _report_module()
    probe = {"quantization": "none", "baseline_rss": 1, "rss_after_load": 2, "loaded_delta": 500 * 2**20,
             "peak_delta_load": 550 * 2**20, "peak_delta_forward": 600 * 2**20, "weight_bytes": 540 * 2**20,
             "load_s": 0.1, "forward_s": 0.2, "forward_shape": [1, 128], "peak_is_exact": True}
    result = {"schema": targets.SCHEMA, "config": {"reps": 3, "warmup": 1, "quick": False},
              "machine": {"platform": "p", "cpu": "c", "available_cores": 2, "logical_cores": 2, "torch_threads": 1,
                          "torch_interop_threads": 1, "device": "cpu", "versions": {"torch": "2"}},
              "load": {"start": [0.1, 0.1, 0.1], "end": [0.2, 0.1, 0.1]},
              "model": {"backbone": "m", "n_layers": 2, "n_routed": 2, "profile": {"total_params": 10}},
              "precisions": {"fp32": {"dtype": "float32", "routers": {}}}, "targets": [],
              "memory": {"forward_shape": [1, 128], "nf4_over_fp32_peak": 0.4, "nf4_over_fp32_weights": 0.3,
                         "configs": {"fp32": probe, "nf4": {"skipped": "bitsandbytes is not installed"}}}}
    text = report.render(result)
    assert "## Memory" in text and "600 MiB" in text and "bitsandbytes is not installed" in text
    assert "NF4 / fp32 weight bytes 0.30" in text
    assert "Busy machine" not in text and "Quick mode" not in text


def test_a_machine_is_called_busy_by_the_load_beyond_the_runs_own_threads():
    """At the end the 1-minute load average includes the benchmark's own torch threads: a one-thread run on two cores
    ends near 1.0 by itself. Load from other processes, at the start or beyond the run's own at the end, is busy."""
    report = _report_module()
    machine = {"available_cores": 2, "torch_threads": 1}

    def busy(start, end):
        result = {"schema": targets.SCHEMA, "machine": machine, "load": {"start": [start], "end": [end]},
                  "precisions": {}}
        return any("Busy machine" in warning for warning in report.warnings(result))

    verdicts = [busy(start, end) for start, end in ((0.5, 1.07), (0.3, 1.9), (1.3, 1.0), (0.4, 2.3))]
    assert verdicts == [False, False, True, True]


def test_two_precisions_share_one_memory_run_and_leave_the_given_model_alone(tiny, monkeypatch):
    from hero_core.bench import run

    calls = []
    monkeypatch.setattr(run, "bench_memory", lambda *args, **kwargs: calls.append(args) or {"configs": {}})
    before = {k: v.clone() for k, v in tiny.model.state_dict().items()}
    cfg = inputs.BenchConfig.quick_preset(checkpoints=[], sections=("overhead", "memory"), reps=1, warmup=0,
                                          overhead_shape=(1, 8), threads=1)
    result = run.run_benchmark(cfg, tiny, say=lambda text: None)
    assert len(calls) == 1 and result["memory"] == {"configs": {}}  # once, not per precision
    assert {name: sorted(b) for name, b in result["precisions"].items()} == \
        {name: ["dtype", "overhead", "routers", "section_wall_s"] for name in ("fp32", "bf16")}
    assert result["precisions"]["bf16"]["dtype"] == "bfloat16"
    assert list(result["load"]["sections"]) == ["fp32 overhead", "bf16 overhead", "memory"]
    assert [(t["precision"], t["key"]) for t in result["targets"]] == [("fp32", "wrapper_overhead"),
                                                                        ("bf16", "wrapper_overhead")]
    after = tiny.model.state_dict()  # the bf16 run timed a converted copy
    assert all(after[k].dtype == torch.float32 and torch.equal(after[k], v) for k, v in before.items())


def test_precisions_resolve_auto_drop_duplicates_and_let_nf4_stand_alone():
    from hero_core.bench import run

    notes = []
    cpu = torch.device("cpu")
    assert run.resolve_precisions(("fp32", "bf16"), cpu, None, notes.append) == [("fp32", torch.float32),
                                                                                  ("bf16", torch.bfloat16)]
    auto = run.resolve_precisions(("auto", "fp32", "bf16"), cpu, None, notes.append)
    assert sorted(name for name, _ in auto) == ["bf16", "fp32"]  # auto is one of the two, timed once
    assert run.resolve_precisions(("fp32", "bf16"), cpu, "nf4", notes.append) == [("nf4", None)]
    assert notes and "--dtypes is ignored" in notes[0]
    with pytest.raises(ValueError, match="dtype"):
        inputs.BenchConfig(dtypes=("fp16",))
    with pytest.raises(ValueError, match="precision"):
        inputs.BenchConfig(dtypes=())


def test_dtypes_option_reaches_the_config():
    import argparse

    from hero_core.bench import run

    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    assert run.config_from_args(parser.parse_args([])).dtypes == ("fp32", "bf16")
    assert run.config_from_args(parser.parse_args(["--dtypes", " bf16 "])).dtypes == ("bf16",)


def _block(decode_speedups: dict[str, float], overhead: float, efficiency: float) -> dict:
    routed = {name: {"speedup": {"median": s}, "efficiency": efficiency} for name, s in decode_speedups.items()}
    return {"routers": {name: {} for name in decode_speedups},
            "prefill": [{"batch": 4, "tokens": 512, "n_tokens": 2048, "routed": routed}],
            "decode": [{"batch": 1, "routed": routed, "router_overhead": overhead}]}


def test_targets_are_evaluated_in_each_precision():
    result = {"precisions": {"fp32": _block({"hero-25": 0.95, "hero-40": 1.02}, 0.36, 0.91),
                             "bf16": _block({"hero-25": 1.26, "hero-40": 1.10}, 0.08, 0.89)}}
    met = {(t["precision"], t["key"], t["router"]): t["met"] for t in targets.evaluate_targets(result)}
    assert met[("fp32", "decode_speedup", "hero-25")] is False and met[("fp32", "decode_speedup", "hero-40")] is True
    assert met[("bf16", "decode_speedup", "hero-25")] is True
    assert met[("fp32", "router_overhead", None)] is False and met[("bf16", "router_overhead", None)] is True
    assert met[("fp32", "prefill_efficiency", "hero-25")] is True
    assert met[("bf16", "prefill_efficiency", "hero-40")] is False
    assert all(t["note"] == "" for t in targets.evaluate_targets(result))  # 4x512 was measured


def test_decode_step_seconds_times_the_decode_steps_of_hero_decode(tiny):
    """The router-step benchmark and the GPU check time decoding through this: a prefill, then ``steps``
    single-token passes under one call."""
    calls = []

    def make_call():
        calls.append(tiny.new_call("hero", record=True))
        return calls[-1]

    ids = tiny.encode(["Decoding is timed step by step."]).input_ids
    seconds = sections.decode_step_seconds(tiny, make_call, ids, 3)
    assert seconds > 0 and len(calls) == 1
    assert [p.records[0].executed.numel() for p in calls[0].passes] == [ids.shape[1], 1, 1, 1]


def test_ideal_speedup_follows_the_accounting():
    from hero_core.measures.accounting import ComputeProfile

    # SmolLM2-135M's profile with full-size routers (on the tiny model the router outweighs an FFN)
    profile = ComputeProfile(total_params=134_515_008, ffn_params=2_654_208, adapter_params=110_592,
                             router_params=283_762, linear_params=134_479_872, n_layers=30, attention_width=576,
                             d_memory=64)
    R, T = 30, 10
    positions = np.arange(T)
    everything = accounting.flop_ideal(np.ones((R, T), dtype=bool), positions, profile)
    nothing = accounting.flop_ideal(np.zeros((R, T), dtype=bool), positions, profile)
    assert everything["ideal_speedup"] < 1 < nothing["ideal_speedup"]  # the router is charged; skips pay
    assert everything["param_skip"] == 0 and nothing["ffn_executed_share"] == 0
    share = nothing["flop_share_saved"]
    assert nothing["ideal_speedup"] == pytest.approx(1 / (1 - share))


def test_weight_read_ideal_counts_a_block_when_any_row_runs_it():
    from hero_core.measures.accounting import ComputeProfile

    profile = ComputeProfile(total_params=100, ffn_params=10, adapter_params=1, router_params=0, linear_params=50,
                             n_layers=2, attention_width=4, d_memory=2)
    one_row_runs = np.array([[True, False], [False, False]])  # (R=2, 1 step x batch 2)
    # block 1: FFN read (row 0) and adapter read (row 1); block 2: adapter only -> 50 - 10 + 2 = 42
    assert sections.weight_read_ideal(one_row_runs, 2, profile) == pytest.approx(50 / 42)
    assert sections.weight_read_ideal(np.ones((2, 4), dtype=bool), 2, profile) == pytest.approx(1.0)


def test_stats_shapes_and_ratios():
    s = timing.stats([3.0, 1.0, 2.0])
    assert (s["median"], s["min"], s["max"], s["n"]) == (2.0, 1.0, 3.0, 3)
    assert timing.paired_ratio([2.0, 4.0, 9.0], [1.0, 2.0, 3.0])["median"] == 2.0
    assert inputs.parse_shape("4x512") == (4, 512)
    for bad in ("4by512", "0x8", "x"):
        with pytest.raises(ValueError, match="shape"):
            inputs.parse_shape(bad)
    assert inputs.target_param_skip("hero-40") == 0.40 and inputs.target_param_skip("mine") is None
    with pytest.raises(ValueError):
        inputs.BenchConfig(reps=0)


def test_memory_probe_reports_weights_and_peaks(tiny, tmp_path):
    """The probe the memory section runs in a subprocess, here in-process on a saved tiny backbone."""
    with unwrapped(tiny.model):
        tiny.model.save_pretrained(tmp_path)
    tiny.tokenizer.save_pretrained(tmp_path)
    threads = torch.get_num_threads()
    probe = memory_probe(str(tmp_path), None, 1, 8, threads)
    assert probe["weight_bytes"] == sum(p.numel() * 4 for p in tiny.model.parameters()) + \
        sum(b.numel() * b.element_size() for b in tiny.model.buffers())
    assert probe["peak_delta_forward"] >= probe["peak_delta_load"] > 0 and probe["forward_s"] > 0
    assert {"anon_delta_forward", "file_delta_forward"} <= set(probe)  # Linux: /proc/self/status


# -- the fast paths behind the numbers: same results as the reference forms ---------------------------------
def test_unwrapped_is_the_bare_backbone_and_restores_the_wrappers(tiny):
    from hero_core.method.tiny import tiny_backbone

    ids = tiny.encode(["Unwrapped models compute the backbone."]).input_ids
    with torch.no_grad():
        expected = tiny_backbone(seed=0).model(input_ids=ids).logits
        with unwrapped(tiny.model) as bare:
            assert not any(isinstance(m, RoutedFFN) for m in bare.modules())
            got = bare(input_ids=ids).logits
    assert torch.equal(got, expected)
    assert sum(isinstance(m, RoutedFFN) for m in tiny.model.modules()) == tiny.config.n_routed
    trace = tiny.trace("Unwrapped models compute the backbone.")  # the pass hook is back: routing still works
    assert trace.gate.shape[0] == tiny.config.n_routed and not trace.executed.all()


def test_preallocated_memory_equals_growing_memory_bit_for_bit():
    g = torch.Generator().manual_seed(0)
    n, r, d = 6, 9, 8
    q, k, v = (torch.randn(n, r, d, generator=g) for _ in range(3))
    rho = torch.sigmoid(torch.randn(r, generator=g))
    outputs = {}
    for capacity in (None, r):
        with torch.no_grad():
            memory = DepthMemory(n, d, 1e-6, device="cpu", dtype=torch.float32, capacity=capacity)
            assert memory._buffered == (capacity is not None)
            steps = []
            for j in range(r):
                steps.append(memory.read(q[:, j]))
                memory.write(k[:, j], v[:, j], rho[j])
            outputs[capacity] = (steps, memory.state_norm())
    for (c1, w1), (c2, w2) in zip(outputs[None][0], outputs[r][0], strict=True):
        assert torch.equal(c1, c2) and torch.equal(w1, w2)
    assert torch.equal(outputs[None][1], outputs[r][1])


def test_preallocated_memory_falls_back_when_a_graph_is_needed():
    with torch.no_grad():
        memory = DepthMemory(2, 4, 1e-6, device="cpu", dtype=torch.float32, capacity=3)
    k = torch.randn(2, 4, requires_grad=True)
    memory.write(k, torch.randn(2, 4), torch.tensor(0.9))
    context, _ = memory.read(torch.randn(2, 4))
    memory.write(torch.randn(2, 4), torch.randn(2, 4), torch.tensor(0.9))
    assert not memory._buffered and memory.keys.shape == (2, 2, 4)
    torch.autograd.grad(context.sum() + memory.keys.sum(), k)  # differentiable end to end


@pytest.mark.parametrize("run_ffn", [False, True])
def test_single_branch_fast_paths_equal_the_reference(tiny, monkeypatch, run_ffn):
    """Every token takes the adapter (no gather, no scatter), or every token runs the FFN."""
    def reference(self, u, gate, executed, active, adapter):
        out = torch.where(executed[:, None], gate[:, None] * self.base_layer(u), (1 - gate[:, None]) * adapter(u))
        return out if active is None else out * active[:, None]

    def same_branch(block, gate, fwd):
        return torch.full_like(gate, run_ffn, dtype=torch.bool), gate

    prompt = "Every token takes the same branch here."
    trace = tiny.trace(prompt, policy=same_branch)
    assert trace.executed.all() if run_ffn else not trace.executed.any()
    fast = tiny.logits(prompt, policy=same_branch)
    monkeypatch.setattr(RoutedFFN, "_branch", reference)
    assert (fast - tiny.logits(prompt, policy=same_branch)).abs().max() <= 1e-5


def test_overhead_bound_adds_the_router_latency_back_to_the_flop_ideal():
    assert overhead_bound(2.0, 0.0) == 2.0  # no overhead: the FLOP ideal itself
    assert overhead_bound(2.0, 0.5) == pytest.approx(1.0)  # half a dense step saved, half a step added back
    assert overhead_bound(1.5, -0.1) == 1.5  # a faster-than-dense "overhead" is measurement noise, not a gain


def test_report_refreshes_only_the_readme_performance_block(quick_result, tmp_path):
    report = _report_module()
    src = tmp_path / "bench.json"
    src.write_text(json.dumps(quick_result))
    readme = tmp_path / "README.md"
    readme.write_text("# T\n\nbefore\n<!-- performance:start -->\nstale\n<!-- performance:end -->\nafter\n")
    assert report.main([str(src), "--out", str(tmp_path / "perf.md"), "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert "stale" not in text and text.startswith("# T\n\nbefore\n") and text.endswith("after\n")
    block = text.split("<!-- performance:start -->")[1].split("<!-- performance:end -->")[0]
    speed = _markdown_table(block, "| run | router |")
    fp32 = quick_result["precisions"]["fp32"]
    assert len(speed) == sum(len(r["routed"]) for r in fp32["prefill"] + fp32["decode"])  # one row per run
    bf16_decode = quick_result["precisions"]["bf16"]["decode"][0]["routed"]["hero-40"]
    row = next(r for r in speed if (r["run"], r["router"]) == ("decode batch 1", "hero-40"))
    assert row["bf16 speed-up"] == f"{bf16_decode['speedup']['median']:.2f}"
    assert row["bf16 bound"] == f"{bf16_decode['overhead_bound']:.2f}"
    dense = _markdown_table(block, "| run | config | fp32 time (s)")
    assert {r["config"] for r in dense} == {"dense"} and len(dense) == 2 + 2 + 1  # prefill, decode, training
    target_rows = _markdown_table(block, "| target | threshold | fp32 | bf16 |")
    assert len(target_rows) == len(quick_result["targets"]) // 2  # one row per target, a column per precision


def test_the_default_must_pay_at_decode_and_hero_25_by_a_quarter():
    result = {"precisions": {"bf16": _block({"hero-10": 1.03, "hero-10-r7": 1.03, "hero-25": 1.2, "hero-25-r7": 1.3},
                                            0.05, 0.95)}}
    by_router = {t["router"]: t for t in targets.evaluate_targets(result) if t["key"] == "decode_speedup"}
    assert by_router["hero-10"]["met"] is True and by_router["hero-10"]["threshold"] == 1.0  # break-even elsewhere
    assert by_router["hero-10-r7"]["met"] is False and by_router["hero-10-r7"]["threshold"] == 1.05
    assert by_router["hero-25"]["met"] is False and by_router["hero-25"]["threshold"] == 1.25
    assert by_router["hero-25-r7"]["met"] is True


def test_the_bench_measures_the_default_checkpoint_first():
    import argparse

    from hero_core.bench import run
    from hero_core.method.model import DEFAULT_CHECKPOINT

    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    assert run.config_from_args(parser.parse_args([])).checkpoints[0] == DEFAULT_CHECKPOINT
    assert inputs.BenchConfig().checkpoints[0] == DEFAULT_CHECKPOINT
