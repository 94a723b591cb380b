"""Property-based tests: trace serialisation holds for any tokens and values."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hero_core.accounting import ComputeProfile
from hero_core.trace import RoutingTrace

PROFILE = ComputeProfile(total_params=10_000, ffn_params=300, adapter_params=20, router_params=15,
                         linear_params=8_000, n_layers=6, attention_width=16, d_memory=8)
finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@st.composite
def traces(draw):
    R = draw(st.integers(1, 6))
    T = draw(st.integers(1, 12))
    tokens = draw(st.lists(st.text(min_size=0, max_size=6), min_size=T, max_size=T))
    grid = lambda: np.array(draw(st.lists(finite, min_size=R * T, max_size=R * T))).reshape(R, T)  # noqa: E731
    gate = np.array(draw(st.lists(st.floats(0, 1), min_size=R * T, max_size=R * T))).reshape(R, T)
    attention = np.zeros((T, R, R))
    for j in range(1, R):
        attention[:, j, :j] = draw(st.floats(0, 1))
    return RoutingTrace(backbone="b", checkpoint="c", variant="hero", tau=0.5, tokens=tokens,
                        token_ids=list(range(T)), routed_layers=list(range(R)), gate=gate, executed=gate >= 0.5,
                        history_logit=grid(), local_logit=grid(), p_hist=gate, m_hist=gate, nu=grid(),
                        memory_attention=attention, forgetting=np.full(R, 0.98), profile=PROFILE)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_json_round_trip_is_exact(tmp_path_factory, trace):
    path = tmp_path_factory.mktemp("t") / "trace.json"
    loaded = RoutingTrace.load(trace.save(path))
    assert loaded.equals(trace)
    assert loaded.tokens == trace.tokens
    frame = loaded.to_frame()
    assert len(frame) == trace.n_routed * trace.n_tokens
    assert 0.0 <= loaded.param_skip <= trace.n_routed * PROFILE.ffn_params / PROFILE.total_params + 1e-12
