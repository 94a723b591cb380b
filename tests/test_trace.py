"""Traces: exact JSON round trip without a model, schema checks, accounting."""

import json
import subprocess
import sys

import numpy as np
import pytest

from hero_core.measures.accounting import ComputeProfile, token_compute
from hero_core.method.trace import SCHEMA_VERSION, RoutingTrace, TraceFormatError

CONTRACT_FIELDS = ("schema_version", "backbone", "checkpoint", "variant", "tokens", "token_ids", "routed_layers",
                   "gate", "executed", "history_logit", "local_logit", "p_hist", "m_hist", "nu", "memory_attention",
                   "param_skip")


def test_round_trip_is_exact_and_needs_no_model(tiny, tmp_path):
    trace = tiny.trace("Round trip: 3 * 4 = 12", record_states=True)
    path = trace.save(tmp_path / "t.json")
    data = json.loads(path.read_text())
    assert all(field in data for field in CONTRACT_FIELDS)
    assert data["schema_version"] == SCHEMA_VERSION
    code = ("import sys; from hero_core.method.trace import RoutingTrace; t = RoutingTrace.load(sys.argv[1]); "
            "print(t.n_tokens, round(t.param_skip, 12))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert out.stdout.split()[0] == str(trace.n_tokens)
    loaded = RoutingTrace.load(path)
    assert loaded.equals(trace)
    assert np.array_equal(loaded.gate, trace.gate) and np.array_equal(loaded.memory_attention, trace.memory_attention)
    assert loaded.states["router_state"].shape == trace.states["router_state"].shape


def test_future_schema_and_broken_files(tiny, tmp_path):
    trace = tiny.trace("hello")
    data = trace.to_dict()
    data["schema_version"] = SCHEMA_VERSION + 1
    (tmp_path / "future.json").write_text(json.dumps(data))
    with pytest.raises(TraceFormatError, match="newer"):
        RoutingTrace.load(tmp_path / "future.json")
    (tmp_path / "half.json").write_text(json.dumps(trace.to_dict())[:200])
    with pytest.raises(TraceFormatError, match="not valid JSON"):
        RoutingTrace.load(tmp_path / "half.json")
    bad = trace.to_dict()
    bad["gate"] = bad["gate"][:-1]
    with pytest.raises(TraceFormatError):
        RoutingTrace.from_dict(bad)
    with pytest.raises(TraceFormatError, match="no trace file"):
        RoutingTrace.load(tmp_path / "missing.json")


def test_param_skip_follows_the_paper_definition():
    profile = ComputeProfile(total_params=1000, ffn_params=100, adapter_params=10, router_params=5, linear_params=800,
                             n_layers=4, attention_width=8, d_memory=4)
    executed = np.array([[1, 0, 1], [0, 0, 1], [1, 0, 1], [1, 1, 1]], dtype=bool)  # (R=4, T=3)
    figures = token_compute(executed, profile)
    np.testing.assert_allclose(figures["param_skip"], [0.1, 0.3, 0.0])  # skipped FFNs x 100 / 1000
    np.testing.assert_allclose(figures["net_param_skip"], [(1 * 90 - 4 * 5) / 1000, (3 * 90 - 20) / 1000, -0.02])
    dense = token_compute(np.ones((4, 3), dtype=bool), profile, routed=False)
    assert np.all(dense["param_skip"] == 0) and np.all(dense["net_param_skip"] == 0)
    assert np.all(dense["flop_share_saved"] == 0)


def test_summary_and_frame_agree(tiny):
    trace = tiny.trace("The cat sat on the mat because it was warm.")
    frame = trace.to_frame()
    assert list(frame.columns[:5]) == ["token_index", "token", "token_id", "block", "layer"]
    per_token = frame.groupby("token_index")["executed"].sum().to_numpy()
    assert np.array_equal(per_token, trace.executed_per_token())
    assert trace.summary()["ffn_executed_per_token"] == pytest.approx(per_token.mean())
    assert trace.summary()["skip_rate"] == pytest.approx(1 - frame["executed"].mean())
