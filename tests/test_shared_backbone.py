"""One backbone, many routers: the pool loads a backbone once per (path, precision, device, quantisation), routers
on it stay apart per call, the dense reference of a prompt is computed once for every router, and the plotting
API draws from ``from hero_core import …`` alone."""

import copy
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch

from hero_core.backbones import pool as backbone_pool
from hero_core.backbones.pool import BackboneKey, BackbonePool
from hero_core.method.model import HeroModel, fresh_router, spread_gates
from hero_core.method.tiny import tiny_backbone


@pytest.fixture
def counted_pool(monkeypatch):
    """A pool whose loader builds the tiny backbone (no model directory needed) and counts the loads."""
    loads = []

    def fake_load(path, *, quantization=None, device="cpu", dtype=torch.float32):
        loads.append((path, quantization, dtype))
        return tiny_backbone()

    monkeypatch.setattr(backbone_pool, "load_backbone", fake_load)
    return BackbonePool(capacity=2), loads


def test_a_backbone_is_loaded_once_per_key_and_shared(counted_pool):
    pool, loads = counted_pool
    a = pool.get(None, device="cpu")
    assert pool.get("embedded", device="cpu") is a and pool.get("", device="cpu") is a  # one key, three spellings
    b = pool.get(None, device="cpu", dtype="bf16")
    assert b is not a and pool.loads == len(loads) == 2
    pool.get("/models/x", device="cpu")  # a third key pushes out the least recently used (the fp32 one)
    assert len(pool) == 2 and pool.get(None, device="cpu", dtype="bf16") is b and pool.loads == 3
    assert BackboneKey.of(None, None, "cpu", "fp32") != BackboneKey.of(None, "nf4", "cpu", "fp32")


def test_concurrent_sessions_asking_for_one_backbone_load_it_once(counted_pool):
    pool, loads = counted_pool
    got = []
    threads = [threading.Thread(target=lambda: got.append(pool.get(None, device="cpu"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(loads) == 1 and all(g is got[0] for g in got)


def test_routers_on_one_backbone_keep_their_own_decisions_in_concurrent_calls():
    backbone = tiny_backbone()
    routers = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        routers.append(spread_gates(fresh_router(backbone, gate_bias_init=0.0), std=1.0))
    first = HeroModel(backbone, routers[0], "one")
    heroes = [first, first.with_router(routers[1], "other")]
    assert heroes[0].model is heroes[1].model  # one backbone in memory
    prompt = "Routers share the backbone but not their decisions."
    alone = [h.trace(prompt).executed for h in heroes]
    assert not np.array_equal(alone[0], alone[1])
    results = {}

    def run(i):
        for _ in range(3):
            results.setdefault(i, []).append(heroes[i].trace(prompt).executed)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(2):
        assert all(np.array_equal(e, alone[i]) for e in results[i])


def test_the_dense_reference_is_computed_once_per_prompt_for_every_router(tiny):
    backbone = copy.copy(tiny.backbone)
    backbone.dense_reference = type(tiny.backbone.dense_reference)()
    first = HeroModel(backbone, tiny.router, "a")
    second = first.with_router(copy.deepcopy(tiny.router), "b")
    prompt = "One dense pass serves every router on this prompt."
    q1 = first.trace(prompt, quality=True).quality
    q2 = second.trace(prompt, quality=True).quality
    assert backbone.dense_reference.computed == 1
    np.testing.assert_array_equal(q1["dense_nll"], q2["dense_nll"])
    dense = first.logits(prompt, variant="dense")
    expected = torch.log_softmax(dense.double(), -1)[:-1].gather(-1, torch.tensor(
        first.trace(prompt).token_ids[1:])[:, None]).squeeze(-1).neg().numpy()
    np.testing.assert_allclose(q1["dense_nll"][:-1], expected, rtol=1e-4, atol=1e-5)
    first.trace("Another prompt needs its own dense pass.", quality=True)
    assert backbone.dense_reference.computed == 2


def test_a_skip_map_in_three_lines_from_the_top_level_api():
    code = ("from hero_core import load_hero, plot\n"
            "hero = load_hero()\n"
            "fig = plot.skip_map(hero.trace('def add(a, b):\\n    return a + b'))\n"
            "assert fig.data and fig.layout.title.text.startswith('Skip map'), fig.layout.title.text\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]


def test_hero_vs_local_refuses_traces_of_different_tokens(tiny):
    from hero_core import plot

    with pytest.raises(ValueError, match="same prompt"):
        plot.hero_vs_local(tiny.trace("one prompt"), tiny.trace("another prompt entirely"))
