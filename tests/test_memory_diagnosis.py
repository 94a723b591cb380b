"""The depth-memory diagnosis's measuring functions (hero_core.train.memory_diagnosis), on the tiny random model."""

import math

import numpy as np
import pytest
import torch

from hero_core.method.packed_router import packed_layers
from hero_core.method.tiny import tiny_hero
from hero_core.train import memory_diagnosis as md

TEXTS = ["Seven apples and three pears make ten fruit.", "def add(a, b):\n    return a + b\n",
         "Question: Ana has 4 coins and gets 3 more. Answer: 7"]


@pytest.fixture(scope="module")
def hero():
    model = tiny_hero(seed=5)
    with torch.no_grad():  # rho away from its init and unequal per block, so decay rows are not all alike
        model.router.eta.add_(torch.linspace(-1.5, 0.5, model.config.n_routed))
    return model


@pytest.fixture(scope="module")
def softmax_hero():
    return tiny_hero(seed=6, memory_kernel="softmax", memory_scale_init=4.0)


def test_entropy_is_one_for_a_uniform_row_and_zero_for_a_one_hot_row():
    assert np.allclose(md.normalised_entropy(np.full((3, 7), 0.2)), 1.0)
    assert np.allclose(md.normalised_entropy(np.eye(5)), 0.0)
    between = md.normalised_entropy(np.array([[0.7, 0.2, 0.1]]))
    assert 0.0 < between[0] < 1.0
    with pytest.raises(ValueError):
        md.normalised_entropy(np.ones((4, 1)))  # one entry: no choice to measure


def test_spread_is_max_over_min_and_finite_for_a_zero_weight():
    assert np.allclose(md.weight_spread(np.full((2, 4), 0.25)), 1.0)
    assert np.allclose(md.weight_spread(np.array([[1.0, 2.0, 4.0]])), 4.0)
    assert np.isfinite(md.weight_spread(np.array([[0.0, 1.0]]))).all()


def test_decay_matrix_is_the_routers_own(hero):
    router = hero.router
    R = router.config.n_routed
    rho = router.forgetting().detach().double().numpy()
    with torch.no_grad():
        packed = packed_layers(router, "hero").decay[:R].double().numpy()  # decay[j-1, i-1], 1-based j, i
    assert np.allclose(md.decay_matrix(rho), packed, atol=1e-6)
    assert md.decay_matrix(rho)[R - 1, R - 2] == 1.0  # the previous block is not decayed yet


@pytest.mark.parametrize("which", ["hero", "softmax_hero"])
def test_trace_reads_divided_by_decay_are_the_kernel_scores(which, request):
    """alpha / decay from a trace equals phi(q).phi(k) (elu1) or exp(beta q.k) (softmax) from the recorded states:
    the decay this module divides out is the one the memory applied."""
    model = request.getfixturevalue(which)
    trace = model.trace(TEXTS[0], record_states=True)
    rho = model.router.forgetting().detach().double().numpy()
    scores = md.kernel_scores(model.router, torch.from_numpy(trace.states["router_state"]))
    rows = md.read_rows(trace.memory_attention, rho)
    assert len(rows) == len(scores) == model.config.n_routed - 2
    for (alpha, decay), expected in zip(rows, scores):
        from_trace = alpha / decay[None]
        from_trace /= from_trace.sum(1, keepdims=True)
        assert np.allclose(from_trace, expected / expected.sum(1, keepdims=True), atol=1e-5)


def test_read_statistics_name_what_makes_a_read_non_uniform(hero):
    traces = [hero.trace(t) for t in TEXTS]
    stats = md.read_statistics(traces, hero.router.forgetting().detach().double().numpy())
    for part in ("read", "scores", "decay_only"):
        assert 0.0 < stats[part]["normalised_entropy"] <= 1.0 + 1e-9
        assert stats[part]["spread_median"] >= 1.0
    assert stats["decay_only"]["spread_median"] > 1.0  # rho < 1 alone already makes the read non-uniform


def test_cosines_of_identical_opposite_and_orthogonal_vectors():
    v = torch.randn(10)
    assert md.mean_pairwise_cosine([v, v, 2 * v]) == pytest.approx(1.0)
    assert md.mean_pairwise_cosine([v, -v]) == pytest.approx(-1.0)
    assert math.isnan(md.mean_pairwise_cosine([v]))
    same = torch.randn(1, 6, 8).expand(5, 6, 8)  # every block of a token: the same key
    assert md.block_cosine(same) == pytest.approx(1.0)
    orthogonal = torch.eye(4)[:, None, :].expand(4, 3, 4)  # block r's key is the r-th unit vector
    assert md.block_cosine(orthogonal) == pytest.approx(0.0)


def test_adam_step_share_separates_signal_from_noise():
    v = torch.randn(50)
    assert md.adam_step_share([v, v, v]) == pytest.approx(1.0)
    assert md.adam_step_share([v, -v]) == pytest.approx(0.0)
    noise = md.noise_step_share(12)
    assert 0.15 < noise < 0.3  # ~0.8 / sqrt(12)


def test_text_gradients_sum_to_the_gradient_of_the_summed_kl(hero):
    ids = [hero.encode([t], max_tokens=16).input_ids for t in TEXTS[:2]]
    grads = md.text_gradients(hero, ids)
    hero.router.zero_grad(set_to_none=True)
    (md.kl_to_dense(hero, ids[0], "hero") + md.kl_to_dense(hero, ids[1], "hero")).backward()
    for name, p in hero.router.named_parameters():
        expected = p.grad if p.grad is not None else torch.zeros_like(p)
        assert torch.allclose(grads.total[name], expected, rtol=1e-4, atol=1e-9), name
    hero.router.zero_grad(set_to_none=True)
    assert grads.n_tokens == sum(i.shape[1] for i in ids)
    assert len(grads.per_text) == 2 and set(grads.per_text[0]) == {"to_q", "to_k", "eta", *md.HEADS}


@pytest.mark.parametrize("which", ["hero", "softmax_hero"])
def test_memory_parameters_get_finite_positive_gradient_ratios(which, request):
    model = request.getfixturevalue(which)
    ids = [model.encode([t], max_tokens=24).input_ids for t in TEXTS]
    grads = md.text_gradients(model, ids)
    ratios = md.gradient_ratios(model.router, grads)
    memory = ["to_q", "to_k", "to_v", "eta"] + (["memory_log_scale"] if which == "softmax_hero" else [])
    for group in memory + list(md.HEADS):
        r = ratios[group]
        assert math.isfinite(r["ratio"]) and r["ratio"] > 0, (group, r)
        assert math.isfinite(r["ratio_vs_heads"]) and r["ratio_vs_heads"] > 0
    assert ("memory_log_scale" in ratios) == (which == "softmax_hero")
    consistency = md.gradient_consistency(grads)
    for group in ("to_q", "to_k", "eta"):
        assert -1.0 <= consistency[group]["mean_cosine"] <= 1.0
        assert 0.0 < consistency[group]["adam_step_share"] <= 1.0 + 1e-9


def test_forgetting_movement_measures_eta_from_its_init():
    model = tiny_hero(seed=7)
    fresh = md.forgetting_movement(model.router)
    assert fresh["max_abs_rho_change"] == pytest.approx(0.0, abs=1e-7)
    assert fresh["rho_min"] == pytest.approx(model.config.rho_init, abs=1e-6)
    with torch.no_grad():
        model.router.eta[2] -= 0.2
    moved = md.forgetting_movement(model.router)
    assert moved["max_abs_eta_change"] == pytest.approx(0.2, abs=1e-5)
    # a small move of eta at rho = 0.98 moves rho by about rho (1 - rho) times as much
    assert moved["max_abs_rho_change"] == pytest.approx(0.2 * fresh["drho_deta_at_init"], rel=0.15)


def test_adam_bound_is_the_schedules_summed_learning_rate():
    stage = {"checkpoint": "x", "steps": 200, "lr": 1e-4, "warmup": 0.03, "memory_lr_scale": 1.0}
    bound = md.adam_eta_bound([stage])
    assert 0.5 * 200 * 1e-4 < bound < 200 * 1e-4  # warmup and cosine decay to 10 % keep it under lr x steps
    assert md.adam_eta_bound([stage, stage | {"memory_lr_scale": 10.0}]) == pytest.approx(11 * bound)
    assert math.isnan(md.adam_eta_bound([stage | {"lr": None}]))
    training = {"train_config": {"lr": 5e-5, "warmup": 0.03}, "steps_done": 10,
                "earlier_stages": [{"checkpoint": "first", "steps": 20}]}
    stages = md.training_stages(training, lambda name: 1e-4 if name == "first" else None)
    assert [(s["steps"], s["lr"]) for s in stages] == [(20, 1e-4), (10, 5e-5)]


def test_random_elu1_reads_are_nearly_flat_and_sharpen_only_slowly_with_scale():
    small, large = md.random_elu1_read(n_rows=200, scale=1.0), md.random_elu1_read(n_rows=200, scale=10.0)
    assert 0.98 < small["normalised_entropy"] < 1.0  # positive features: flat by construction
    assert large["normalised_entropy"] < small["normalised_entropy"]
    assert small["n_keys"] == 29 and small["d"] == 64


def test_parameter_movement_is_zero_for_the_same_router_and_finds_a_moved_weight():
    before, after = tiny_hero(seed=8).router, tiny_hero(seed=8).router
    assert all(m["max_abs_change"] == 0.0 for m in md.parameter_movement(before, after).values())
    with torch.no_grad():
        after.to_k.weight[3, 5] += 0.25
    moved = md.parameter_movement(before, after)
    assert moved["to_k"]["max_abs_change"] == pytest.approx(0.25)
    assert moved["to_k"]["rms_change"] == pytest.approx(0.25 / math.sqrt(after.to_k.weight.numel()))
    assert moved["to_q"]["max_abs_change"] == 0.0
    # no training record, so no bundled stage to measure from
    assert md.movement_since_bundled_stage(after, {}, lambda name: None) is None


def test_diagnose_reports_every_part_and_the_script_renders_it(hero):
    from hero_core.data.results_json import finite
    from hero_core.train.memory_diagnosis_page import render

    out = md.diagnose(hero, TEXTS[:2], max_tokens=16)
    assert {"gradients", "consistency", "read", "depth_similarity", "scaled_dot_read", "rho", "stages",
            "movement"} <= set(out)
    sim = out["depth_similarity"]
    assert -1.0 <= sim["key_cosine"] <= 1.0 and 0.0 < sim["key_feature_cosine"] <= 1.0  # phi > 0: cosines > 0
    assert 0.0 < out["scaled_dot_read"]["normalised_entropy"] <= 1.0
    assert math.isnan(out["rho"]["adam_eta_bound"])  # a tiny model has no training record: the bound is unknown

    data = finite({"command": "python scripts/memory_diagnosis.py --limit 1", "limit_per_domain": 1,
                   "max_tokens": 16, "domains": ["chat"], "n_texts": 2, "backbone": "tiny",
                   "synthetic": {"elu1_random": [md.random_elu1_read(20, scale=s) for s in (1.0, 3.0, 10.0)]},
                   "checkpoints": {"tiny": out}})
    page = render(data)
    assert page.startswith("# Depth-memory diagnosis")
    assert "`python scripts/memory_diagnosis.py --limit 1`" in page.splitlines()[2]  # the command, at the top
    assert "## What the numbers say" in page and "the bound is unknown" in page
