"""The study's statistics: the paired hierarchical bootstrap of an arm difference and each arm's spread."""

import numpy as np
import pytest

from hero_core.eval.study.stats import ItemMeans, Retained, TaskRetain, TextSums, arm_spread, paired_difference
from hero_core.measures.metrics import pooled_perplexity_ratio, ratio_interval


def _texts(shift: float, seed: int, n: int = 30) -> TextSums:
    """Texts of 100 predictions whose routed NLL sits ``shift`` nats per token above dense, plus text noise."""
    rng = np.random.default_rng(seed)
    dense = rng.uniform(150, 250, n)
    return TextSums(dense + 100 * (shift + 0.05 * rng.standard_normal(n)), dense, np.full(n, 100.0))


def test_identical_runs_give_a_degenerate_interval_at_zero():
    run = _texts(0.1, seed=0)
    diff = paired_difference([run] * 3, [run] * 2, n_boot=500)
    # every run the same, read on the same item draw: each replicate's difference is exactly 0, not just near it
    assert diff["low"] == diff["high"] == diff["difference"] == 0.0
    assert diff["verdict"] == "not separable"
    # the same seeds in both arms, drawn apart: seed-to-seed spread alone, centred on 0
    runs = [_texts(0.1, seed=s) for s in range(3)]
    spread = paired_difference(runs, list(runs), n_boot=500)
    assert spread["low"] < 0 < spread["high"] and spread["verdict"] == "not separable"


def test_a_constant_shift_gives_the_shift_as_the_interval():
    # one run per arm repeated over its seeds, so only the items vary; every item 0.2 higher: 20 accuracy points
    values = np.random.default_rng(0).integers(0, 2, 50).astype(float)
    base, shifted = [ItemMeans(values)] * 3, [ItemMeans(values + 0.2)] * 2
    diff = paired_difference(shifted, base, n_boot=500)
    # float sums of 50 items: rounding in the last bits only
    assert diff["low"] == pytest.approx(20.0, abs=1e-9) and diff["high"] == pytest.approx(20.0, abs=1e-9)
    assert diff["verdict"] == "first ahead"


class _Spy:
    """A unit that records the item indices it is read on."""

    higher_is_better = True

    def __init__(self, n: int, seen: list):
        self.n_items, self.seen = n, seen

    def point(self) -> float:
        return 0.0

    def on(self, picks):
        self.seen.append(picks.copy())
        return picks.mean(-1).astype(float)


def test_every_run_of_both_arms_is_read_on_the_same_item_indices():
    seen: list = []
    paired_difference([_Spy(12, seen) for _ in range(3)], [_Spy(12, seen) for _ in range(2)], n_boot=200)
    assert len(seen) == 5 and all(np.array_equal(seen[0], s) for s in seen[1:])
    assert seen[0].shape == (200, 12) and len(np.unique(seen[0][:, 0])) > 1  # a real resample, not the identity


def test_runs_on_different_numbers_of_items_are_refused():
    with pytest.raises(ValueError, match="same items"):
        paired_difference([_texts(0.1, 0, n=30)], [_texts(0.1, 1, n=31)], n_boot=50)


def test_pairing_narrows_the_interval_of_arms_read_on_shared_hard_texts():
    # both arms share each text's difficulty (the big term); pairing cancels it, resampling arms apart would not
    rng = np.random.default_rng(1)
    hardness = rng.uniform(0, 1.0, 40)
    dense = np.full(40, 200.0)

    def arm(shift, seeds):
        return [TextSums(dense + 100 * (hardness + shift + 0.01 * np.random.default_rng(s).standard_normal(40)),
                         dense, np.full(40, 100.0)) for s in seeds]

    diff = paired_difference(arm(0.0, (1, 2, 3)), arm(0.05, (4, 5, 6)), n_boot=1000)
    assert diff["verdict"] == "first ahead" and diff["high"] < 0  # lower perplexity: the first arm is ahead


def test_the_pooled_ratio_resampling_is_the_one_the_frontier_uses():
    run = _texts(0.1, seed=3)
    point, low, high = ratio_interval(run.nll, run.nll_dense, run.n_pred)
    assert point == pytest.approx(run.point()) == pytest.approx(
        pooled_perplexity_ratio(run.nll, run.nll_dense, run.n_pred))
    assert low < point < high


def test_retained_is_against_dense_on_the_same_items_and_the_spread_lists_every_seed():
    dense = np.array([1.0, 1.0, 0.0, 1.0])
    assert Retained(dense.copy(), dense).point() == pytest.approx(100.0)
    assert Retained(np.array([1.0, 0.0, 0.0, 1.0]), dense).point() == pytest.approx(100 * (2 / 4) / (3 / 4))
    spread = arm_spread([_texts(0.1, 1), _texts(0.2, 2), _texts(0.15, 3)])
    assert spread["seeds"] == 3 and spread["min"] < spread["mean"] < spread["max"] and spread["sd"] > 0


def test_task_retain_resamples_within_each_task_and_pairs_the_tasks_across_runs():
    dense = [np.array([1.0, 1.0, 0.0, 1.0]), np.array([1.0, 0.0, 1.0])]
    same = TaskRetain([d.copy() for d in dense], dense)
    assert same.n_items == (4, 3) and same.point() == pytest.approx(100.0)
    worse = TaskRetain([np.array([1.0, 0.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])], dense)
    # per task: 100 x (1/4) / (3/4) and 100 x (1/3) / (2/3)
    assert worse.point() == pytest.approx((100 / 3 + 50) / 2)
    diff = paired_difference([same] * 2, [same] * 2, n_boot=300)
    assert diff["low"] == diff["high"] == 0.0  # the same runs on the same per-task draws


def test_the_t_interval_keeps_its_coverage_at_three_seeds_where_the_bootstrap_does_not():
    from hero_core.eval.study.stats import seed_interval_coverage

    cover = seed_interval_coverage(0.03, 0.05, seeds=3, trials=300)
    assert cover["t_coverage"] >= 0.92  # nominal 95 %
    assert cover["bootstrap_coverage"] < 0.9  # ten distinct seed draws per arm: too narrow


def test_seeds_needed_grows_as_the_difference_shrinks():
    from hero_core.eval.study.stats import seeds_needed, welch_interval

    a, b = [1.18, 1.24, 1.14], [1.20, 1.27, 1.16]
    low, high = welch_interval(a, b)
    assert low < 0 < high
    assert seeds_needed(a, b) > seeds_needed(a, [x + 0.06 for x in b]) >= 2
    assert welch_interval([1.0], [1.1]) != welch_interval([1.0], [1.1])  # NaN with one seed


def test_net_matching_asks_a_costly_router_for_more_skip_and_a_reference_for_less():
    import torch

    from hero_core.eval.study.measures import skip_to_measure_at
    from hero_core.eval.study.spec import StudySpec
    from hero_core.method.tiny import tiny_hero

    hero = tiny_hero()
    blocks = torch.zeros(2, 16, dtype=torch.long)
    param = StudySpec(out="x", skip=0.10)
    net = StudySpec(out="x", skip=0.10, match="net", net_saving=0.05)
    assert skip_to_measure_at(hero, blocks, param) == 0.10
    routed, reference = skip_to_measure_at(hero, blocks, net), skip_to_measure_at(hero, blocks, net, routed=False)
    assert routed > reference > 0  # the router's own cost must be paid back by more skipping
    with pytest.raises(ValueError, match="--match"):
        StudySpec(out="x", match="flops")
