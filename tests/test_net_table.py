"""The net-saving table's pieces: static pruning read at a net saving, the words for a run that saves nothing, and the
held-out set outside the training mix."""

import math

import pytest

from hero_core.data.outside import OUTSIDE_DOMAINS, outside_texts
from hero_core.eval.frontier.net_table import net_words, static_at_net


def test_static_pruning_is_read_between_the_dropped_ffns_that_bracket_a_net_saving():
    static = {0: {"net_saved": 0.0, "ratio": 1.0}, 2: {"net_saved": 0.04, "ratio": 1.2},
              3: {"net_saved": 0.06, "ratio": 1.5}}
    mid = static_at_net(static, 0.05)
    assert mid["k"] == pytest.approx(2.5)
    assert mid["ratio"] == pytest.approx(math.exp((math.log(1.2) + math.log(1.5)) / 2))
    assert static_at_net(static, -0.01)["ratio"] == 1.0  # saving nothing net is read against dense itself
    assert static_at_net(static, 0.02)["ratio"] == pytest.approx(math.exp(0.5 * math.log(1.2)))
    with pytest.raises(ValueError, match="measured up to"):
        static_at_net(static, 0.07)


def test_a_run_saving_nothing_net_says_it_costs_more_than_dense():
    assert net_words(0.062) == "6.2 %"
    assert "costs more than dense" in net_words(-0.001)
    assert "costs more than dense" in net_words(0.0)


def test_the_outside_set_is_fixed_and_never_the_training_mix():
    from hero_core.data.texts import code_texts

    for domain in OUTSIDE_DOMAINS:
        texts = outside_texts(domain, 4)
        assert len(texts) == 4 and all(len(t) > 100 for t in texts)
        assert texts == outside_texts(domain, 4)  # drawn by hash: the same texts every time
    training_code = "\n".join(code_texts("train")[:200])
    assert not any(t[:200] in training_code for t in outside_texts("code", 4))
    with pytest.raises(ValueError, match="unknown outside domain"):
        outside_texts("chat", 1)
