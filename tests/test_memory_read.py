"""The read-matters ablation: ``memory_read="uniform"`` flattens the memory map and keeps everything else."""

import numpy as np
import pytest

from hero_core.method.tiny import tiny_hero

PROMPT = "Seven apples and three pears make ten fruit."


@pytest.fixture(scope="module")
def sharp_hero():
    import torch

    hero = tiny_hero(seed=3, memory_kernel="softmax", memory_scale_init=8.0)
    with torch.no_grad():  # large queries: a fresh router's q.k are too small to pick an entry
        hero.router.to_q.weight.mul_(60.0)
    return hero


def test_a_uniform_read_draws_a_flat_map_and_is_recorded(sharp_hero, tmp_path):
    from hero_core.method.trace import RoutingTrace

    trace = sharp_hero.trace(PROMPT, memory_read="uniform")
    R = len(trace.routed_layers)
    for j in range(1, R):
        assert np.allclose(trace.memory_attention[:, j, :j], 1.0 / j)
    assert trace.memory_read == "uniform"
    assert RoutingTrace.load(trace.save(tmp_path / "t.json")).memory_read == "uniform"


def test_a_uniform_read_changes_the_decisions_of_a_selective_memory(sharp_hero):
    learned = sharp_hero.trace(PROMPT)
    uniform = sharp_hero.trace(PROMPT, memory_read="uniform")
    assert learned.memory_read == "learned"
    rows = learned.memory_attention[:, 2:, :]  # reads with >= 2 entries
    assert rows.max(-1).mean() > 0.6  # the learned map is selective here ...
    assert not np.allclose(learned.history_logit, uniform.history_logit)  # ... and flattening it moves a
    assert np.allclose(learned.local_logit[0], uniform.local_logit[0])  # block 1 reads nothing: unchanged


def test_uniform_read_applies_to_logits_and_generate_and_refuses_nonsense(sharp_hero):
    learned = sharp_hero.logits(PROMPT)
    uniform = sharp_hero.logits(PROMPT, memory_read="uniform")
    assert learned.shape == uniform.shape
    _, trace = sharp_hero.generate(PROMPT, max_new_tokens=3, memory_read="uniform")
    R = len(trace.routed_layers)
    assert np.allclose(trace.memory_attention[-1, R - 1, : R - 1], 1.0 / (R - 1))
    with pytest.raises(ValueError, match="memory_read"):
        sharp_hero.trace(PROMPT, memory_read="flat")
