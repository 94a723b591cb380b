"""The embedded SmolLM2-135M-Instruct: exactness of the dense path, real routing, the CLI."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.slow

PROMPT = "Question: Tom has 12 apples and buys 7 more. How many apples does he have?\nAnswer:"


def test_dense_logits_equal_the_unwrapped_backbone(embedded, embedded_backbone_reference):
    enc = embedded.encode([PROMPT])
    with torch.no_grad():
        expected = embedded_backbone_reference.model(input_ids=enc.input_ids).logits[0]
    got = embedded.logits(PROMPT, variant="dense")
    assert (got - expected).abs().max().item() <= 1e-4


def test_dense_greedy_generation_equals_backbone_generate(embedded, embedded_backbone_reference):
    ref_model, tok = embedded_backbone_reference.model, embedded_backbone_reference.tokenizer
    enc = embedded.encode([PROMPT])
    with torch.no_grad():
        ref = ref_model.generate(enc.input_ids, attention_mask=enc.attention_mask, max_new_tokens=20, do_sample=False,
                                 pad_token_id=tok.eos_token_id)[0, enc.input_ids.shape[1]:]
    text, trace = embedded.generate(PROMPT, max_new_tokens=20, variant="dense")
    assert text == tok.decode(ref, skip_special_tokens=True)
    assert trace.executed.all()


def test_routing_the_real_model_records_a_full_trace(embedded):
    trace = embedded.trace(PROMPT, variant="hero", record_states=True)
    assert trace.n_routed == 30 and trace.gate.shape == (30, trace.n_tokens)
    assert 0 < trace.executed.mean() < 1
    assert trace.states["router_state"].shape == (30, trace.n_tokens, 64)
    assert np.all(trace.memory_attention[:, 0] == 0)
    rows = trace.memory_attention[:, 1:].sum(-1)
    assert np.all(rows > 0.99) and np.all(rows <= 1.0 + 1e-6)  # every later read is a convex combination


def test_cli_trace_prints_summary_and_writes_json(tmp_path):
    out = tmp_path / "t.json"
    result = subprocess.run([sys.executable, "-m", "hero_core", "trace", "def add(a, b): return a + b",
                             "--variant", "dense", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "FFNs run" in result.stdout and "param skip" in result.stdout
    data = json.loads(out.read_text())
    assert data["variant"] == "dense" and data["param_skip"] == 0.0
    bad = subprocess.run([sys.executable, "-m", "hero_core", "trace", "  "], capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode == 2 and "empty" in bad.stderr
