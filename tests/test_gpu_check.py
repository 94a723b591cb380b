"""scripts/gpu_check.py on its tiny shape, on CPU: every phase runs and the JSON holds its numbers."""

import json

import pytest

from scripts import gpu_check


# Marked slow until timed on an idle machine: the one full run so far (20 training steps) needed ~1 min of
# CPU time on a saturated machine, mostly reading the code corpus for the training steps.
@pytest.mark.slow
def test_gpu_check_runs_on_a_tiny_shape_on_cpu(tmp_path):
    out = tmp_path / "gpu_check.json"
    assert gpu_check.main(["--shape", "tiny", "--device", "cpu", "--precisions", "bf16,nf4", "--train-steps", "3",
                           "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["shape"] == "tiny" and report["device"] == "cpu"
    assert "nf4" in report["errors"] and "bf16" not in report["errors"]  # NF4 is quantised on CUDA only
    r = report["results"]["bf16"]
    assert r["trace"]["tokens"] > 0 and r["trace"]["finite_gates"]
    assert r["generate"]["new_tokens"] == gpu_check.WORK["tiny"]["generate"]
    assert [(p["batch"], p["tokens"]) for p in r["prefill"]] == gpu_check.WORK["tiny"]["prefill"]
    assert all(p["dense_s"] > 0 and p["hero_s"] > 0 and 0 <= p["executed_share"] <= 1 for p in r["prefill"])
    assert r["decode"]["dense_step_s"] > 0 and r["decode"]["hero_step_s"] > 0
    assert r["train"]["steps"] == 3 and r["train"]["finite"]
    assert r["backbone_params"] > 0 and r["router_params"] > 0


def test_llama_shape_is_llama_3_1_8b():
    s = gpu_check.SHAPES["llama-3.1-8b"]
    assert (s["hidden_size"], s["intermediate_size"], s["num_hidden_layers"], s["num_key_value_heads"],
            s["vocab_size"]) == (4096, 14336, 32, 8, 128256)
