"""The benchmark (hero_core/bench/), its report (scripts/bench_report.py) and the fast paths it measures."""

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from hero_core import accounting
from hero_core.bench import inputs, sections, targets, timing
from hero_core.bench.memory_probe import memory_probe
from hero_core.bench.sections import ROUTER_ONLY, overhead_bound
from hero_core.inject import RoutedFFN, unwrapped
from hero_core.memory import DepthMemory

ROOT = Path(__file__).resolve().parents[1]
TINY_ARGS = ["--quick", "--sizes", "2x16,1x24", "--reps", "2", "--warmup", "1", "--decode-batches", "1,3",
             "--decode-prompt", "6", "--decode-tokens", "3", "--train-shape", "2x12", "--record-shape", "2x16",
             "--overhead-shape", "2x16", "--no-memory", "--threads", "1", "--checkpoints", "hero-25,hero-40"]


def _report_module():
    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "scripts" / "bench_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _positive_finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


@pytest.fixture(scope="module")
def quick_result(tmp_path_factory, monkeypatch_module):
    """The CLI, in quick mode, on the tiny random Llama (HERO_LENS_TINY=1)."""
    from hero_core.cli import main

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


def test_quick_bench_json_has_every_section_and_sane_ratios(quick_result):
    r = quick_result
    assert r["schema"] == targets.SCHEMA and r["config"]["quick"] is True
    assert r["machine"]["torch_threads"] == 1 and r["machine"]["versions"]["torch"]
    assert len(r["load"]["start"]) == 3 and len(r["load"]["end"]) == 3
    assert set(r["routers"]) == {"hero-25", "hero-40"}
    assert all(c["source"] == "synthetic" and "not available" in c["note"] for c in r["routers"].values())

    assert [(row["batch"], row["tokens"]) for row in r["prefill"]] == [(2, 16), (1, 24)]
    for row in r["prefill"] + r["decode"]:
        assert set(row["time_s"]) - {ROUTER_ONLY} == {"dense", "hero-25", "hero-40"}
        for s in row["time_s"].values():
            assert s["n"] == 2 and s["min"] <= s["median"] <= s["max"] and all(map(_positive_finite, s["values"]))
        for f in row["routed"].values():
            for key in ("ideal_speedup", "efficiency", "ffn_executed_share"):
                assert _positive_finite(f[key]), key
            assert _positive_finite(f["speedup"]["median"]) and _positive_finite(f["speedup_cpu"]["median"])
            assert 0 <= f["param_skip"] < 1
    assert [row["batch"] for row in r["decode"]] == [1, 3]
    assert all(_positive_finite(f["weight_read_ideal"]) for row in r["decode"] for f in row["routed"].values())
    assert all(_positive_finite(s["median"]) for row in r["decode"] for s in row["tokens_per_s"].values())
    for row in r["decode"]:  # the router's own decode overhead, and the bound it leaves below the FLOP ideal
        assert ROUTER_ONLY in row["time_s"] and math.isfinite(row["router_overhead"])
        for f in row["routed"].values():
            assert 0 < f["overhead_bound"] <= f["ideal_speedup"] + 1e-12

    for key in ("record_ratio", "assemble_ratio"):
        assert _positive_finite(r["recording"][key]["median"])
    assert _positive_finite(r["overhead"]["dense_over_bare"]["median"])
    assert r["overhead"]["max_abs_logit_diff"] <= 1e-5  # the dense variant computes the bare backbone
    assert _positive_finite(r["training"]["routed_over_dense"]["median"])
    assert _positive_finite(r["training"]["paper_over_dense"]["median"])
    assert "memory" not in r  # --no-memory

    keys = [t["key"] for t in r["targets"]]
    assert keys == ["prefill_efficiency", "decode_efficiency", "decode_efficiency", "recording_overhead",
                    "wrapper_overhead"]
    assert all(isinstance(t["met"], bool) for t in r["targets"])
    assert "prefill 2x16" in r["targets"][0]["description"] and "4x512" in r["targets"][0]["note"]
    json.dumps(r, allow_nan=False)  # strict JSON


def test_report_renders_markdown_from_bench_json(quick_result, tmp_path):
    report = _report_module()
    text = report.render(quick_result)
    assert text.startswith("# Performance")
    for heading in ("## Conditions", "## Targets", "## Summary of ratios", "## Prefill", "## Decode",
                    "## Trace recording", "## Wrapper overhead", "## Training step", "## Routed configurations"):
        assert heading in text, heading
    assert "Quick mode" in text and "Synthetic routers" in text
    assert "prefill 2x16: dense / hero-40" in text and "decode batch 3: dense / hero-25" in text
    src = tmp_path / "bench.json"
    src.write_text(json.dumps(quick_result))
    out = tmp_path / "docs" / "performance.md"
    assert report.main([str(src), "--out", str(out)]) == 0
    assert out.read_text() == text
    src.write_text(json.dumps({"schema": "something-else"}))
    assert report.main([str(src), "--out", str(out)]) == 2


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
              "routers": {}, "targets": [],
              "memory": {"forward_shape": [1, 128], "nf4_over_fp32_peak": 0.4, "nf4_over_fp32_weights": 0.3,
                         "configs": {"fp32": probe, "nf4": {"skipped": "bitsandbytes is not installed"}}}}
    text = report.render(result)
    assert "## Memory" in text and "600 MiB" in text and "bitsandbytes is not installed" in text
    assert "NF4 / fp32 weight bytes" in text
    assert "Busy machine" not in text and "Quick mode" not in text


def test_ideal_speedup_follows_the_accounting():
    from hero_core.accounting import ComputeProfile

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
    from hero_core.accounting import ComputeProfile

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
    from hero_core.tiny import tiny_backbone

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
    speed, targets = block.split("| target | measured | threshold | status |")
    assert targets.count("\n| ") == len(quick_result["targets"])  # one row per target
    runs = sum(len(r["routed"]) for r in quick_result["prefill"] + quick_result["decode"])
    assert speed.count("\n| ") == runs + 1  # header + one row per (shape, router)
