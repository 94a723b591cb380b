import numpy as np

from hero_core.eval import baselines


def test_static_pruning_drops_the_same_blocks_for_every_token(tiny):
    trace = tiny.trace("one two three four five six", policy=baselines.static_pruning({2, 4}))
    assert not trace.executed[1].any() and not trace.executed[3].any()
    assert trace.executed[0].all() and trace.executed[2].all()


def test_random_skipping_hits_its_rate_and_is_seeded(tiny):
    text = "word " * 200
    a = tiny.trace(text, policy=baselines.random_skipping(0.3, seed=1))
    b = tiny.trace(text, policy=baselines.random_skipping(0.3, seed=1))
    assert abs((1 - a.executed.mean()) - 0.3) < 0.05
    assert np.array_equal(a.executed, b.executed)


def test_expert_choice_keeps_capacity_per_sequence(tiny):
    trace = tiny.trace("alpha beta gamma delta epsilon zeta eta theta iota kappa", policy=baselines.expert_choice(0.5))
    per_block = trace.executed.sum(axis=1)
    assert np.all(per_block == int(np.ceil(0.5 * trace.n_tokens)))
    # the executed tokens are the ones with the highest gates
    for j in range(trace.n_routed):
        top = np.sort(np.argsort(-trace.gate[j])[: per_block[j]])
        assert np.array_equal(np.flatnonzero(trace.executed[j]), top)


def test_block_influence_ranks_every_routed_block(tiny):
    influence = baselines.block_influence(tiny, ["some calibration text", "def f(): pass"])
    assert len(influence) == tiny.config.n_routed and all(0 <= x <= 2 for x in influence)
    dropped = baselines.least_influential(influence, 2)
    assert len(dropped) == 2 and all(1 <= j <= tiny.config.n_routed for j in dropped)
