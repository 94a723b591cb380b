"""Training: the loss moves the gates, the controller steers skip, a killed run resumes exactly."""

import json

import pytest
import torch

from hero_core.method import checkpoint as ckpt
from hero_core.train.losses import budget_hinge, distill_loss, hard_executed, usage_penalty
from hero_core.train.train import train
from hero_core.train.train_config import TrainConfig


def _cfg(out, **kw):
    base = dict(out=str(out), steps=6, batch_size=2, seq_len=32, data_mix={"code": 1.0, "reasoning": 1.0},
                save_every=2, target_skip=0.3, controller_gain=2.0, data_blocks=12, budget="controller")
    base.update(kw)
    return TrainConfig(**base)


def _fresh_tiny():
    from hero_core.method.model import HeroModel, fresh_router
    from hero_core.method.tiny import tiny_backbone

    backbone = tiny_backbone(seed=0)
    return HeroModel(backbone, fresh_router(backbone), "training")


def test_training_writes_a_loadable_checkpoint_and_log(tmp_path):
    out = train(_cfg(tmp_path / "run"), _fresh_tiny(), progress=False)
    rows = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 7))
    assert {"loss", "l_skip", "param_skip", "tokens_per_s", "alpha"} <= set(rows[0])
    assert rows[-1]["alpha"] > rows[0]["alpha"]  # below target skip, the controller raises alpha
    assert rows[-1]["mean_gate"] < rows[0]["mean_gate"]  # and the usage penalty pulls gates down
    found = ckpt.read_checkpoint(out)
    assert found.config.variant == "hero" and found.training["steps_done"] == 6


def test_killed_run_resumes_to_the_same_result(tmp_path):
    full = train(_cfg(tmp_path / "full"), _fresh_tiny(), progress=False)
    interrupted = _cfg(tmp_path / "cut")
    train(interrupted, _fresh_tiny(), progress=False, stop_after=4)  # "killed" after the step-4 save
    assert not (tmp_path / "cut" / ckpt.WEIGHTS_FILE).exists()  # no half-finished checkpoint under the final name
    spent_first = json.loads((tmp_path / "cut" / "_state" / "state.json").read_text())["spent"]
    with (tmp_path / "cut" / "train_log.jsonl").open("a") as log:  # step 5 logged, then killed before its save
        log.write(json.dumps({"step": 5, "loss": 0.0}) + "\n")
    resumed = train(interrupted, _fresh_tiny(), progress=False)
    rows = [json.loads(line) for line in (resumed / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 7))  # step 5 once: the lost row gone, the rerun's kept
    timing = ckpt.read_checkpoint(resumed).training["timing"]
    assert timing["cpu_s"] > spent_first["cpu_s"] > 0 and timing["wall_s"] > spent_first["wall_s"] > 0
    a, b = ckpt.read_checkpoint(full).state_dict, ckpt.read_checkpoint(resumed).state_dict
    for key in a:
        assert torch.allclose(a[key].float(), b[key].float(), atol=1e-6), key


def test_hinge_budget_pulls_gates_down_and_stops_at_the_budget(tmp_path):
    out = train(_cfg(tmp_path / "hinge", budget="hinge", hinge_alpha=1.0, steps=4), _fresh_tiny(), progress=False)
    rows = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert rows[-1]["mean_gate"] < rows[0]["mean_gate"] and rows[-1]["alpha"] == rows[0]["alpha"] == 1.0
    gates = [torch.full((4,), 0.5, requires_grad=True), torch.full((4,), 0.5, requires_grad=True)]
    assert budget_hinge(gates, 1.0).item() == 0  # at the budget: no pull
    assert budget_hinge(gates, 0.5).item() == pytest.approx(0.25)


def test_a_per_sequence_budget_charges_the_dense_sequence_the_batch_mean_hides():
    # two sequences of two tokens: the first runs both FFNs everywhere, the second none; batch mean = budget
    gates = [torch.tensor([1.0, 1.0, 0.0, 0.0], requires_grad=True) for _ in range(2)]
    assert budget_hinge(gates, 1.0).item() == 0
    per_sequence = budget_hinge(gates, 1.0, sequences=2)
    assert per_sequence.item() == pytest.approx(0.5)  # (2 - 1)^2 for the dense one, 0 for the other, mean 0.5
    per_sequence.backward()
    assert gates[0].grad[:2].gt(0).all() and gates[0].grad[2:].eq(0).all()  # only the dense sequence is pulled
    with pytest.raises(ValueError, match="budget_scope"):
        TrainConfig(out="x", budget_scope="token")


def test_losses():
    logits = torch.randn(2, 5, 11)
    top = torch.log_softmax(logits, -1).topk(11, dim=-1)
    same = distill_loss(logits, top.indices, top.values)
    other = distill_loss(torch.randn(2, 5, 11), top.indices, top.values)
    entropy = -(top.values.exp() * top.values).sum(-1).mean()
    assert same == pytest.approx(float(entropy), rel=1e-4) and other > same
    gates = [torch.full((3,), 0.5), torch.full((3,), 1.0)]
    assert usage_penalty(gates) == pytest.approx(1.5 ** 2)


def test_bad_training_config():
    with pytest.raises(ValueError, match="variant"):
        TrainConfig(out="x", variant="dense")
    with pytest.raises(ValueError, match="target_skip"):
        TrainConfig(out="x", target_skip=1.5)


def test_hard_budget_counts_executed_ffns_and_passes_gradient_straight_through():
    gates = [torch.tensor([0.9, 0.4], requires_grad=True), torch.tensor([0.6, 0.1], requires_grad=True)]
    counted = hard_executed(gates, tau=0.5)
    assert [c.tolist() for c in counted] == [[1.0, 0.0], [1.0, 0.0]]  # forward: 1[g >= tau]
    loss = budget_hinge(counted, 0.5)  # one executed FFN per token against a budget of 0.5
    assert loss.item() == pytest.approx(0.25)
    loss.backward()
    assert all(torch.allclose(g.grad, torch.full((2,), 0.5)) for g in gates)  # d/dg = 2 * 0.5 / 2 tokens


def test_hard_budget_trains(tmp_path):
    out = train(_cfg(tmp_path / "hard", budget="hard", hinge_alpha=1.0, steps=3), _fresh_tiny(), progress=False)
    rows = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and rows[-1]["mean_gate"] < rows[0]["mean_gate"]
    with pytest.raises(ValueError, match="budget must be one of"):
        _cfg(tmp_path / "bad", budget="soft")


def test_training_leaves_the_given_model_as_it_was(tmp_path):
    hero = _fresh_tiny()
    router, weights = hero.router, {k: v.clone() for k, v in hero.router.state_dict().items()}
    train(_cfg(tmp_path / "run", steps=2), hero, progress=False)
    assert hero.router is router and hero.checkpoint_name == "training"
    assert all(torch.equal(v, router.state_dict()[k]) for k, v in weights.items())


def test_the_training_command_line_takes_its_defaults_from_train_config():
    import argparse

    from hero_core.cli.train import CLI_FIELDS, add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--out", "x"])
    assert TrainConfig(**{name: getattr(args, name) for name in CLI_FIELDS}) == TrainConfig(out="x")
    assert not parser.parse_args(["--out", "x", "--no-warm-start"]).warm_start
    assert parser.parse_args(["--out", "x", "--order-seed", "3"]).order_seed == 3


def test_an_order_seed_reorders_the_same_blocks():
    from hero_core.train.train_data import block_order

    cached = block_order(TrainConfig(out="x"), 50)
    assert torch.equal(cached, torch.arange(50))
    seeded = TrainConfig(out="x", order_seed=1)
    one, again = block_order(seeded, 50), block_order(seeded, 50)
    assert torch.equal(one, again) and not torch.equal(one, cached)
    assert torch.equal(one.sort().values, cached)  # every block once: only the order changed


def test_training_reads_its_blocks_in_the_seeded_order(tmp_path):
    plain = train(_cfg(tmp_path / "plain", steps=2), _fresh_tiny(), progress=False)
    shuffled = train(_cfg(tmp_path / "shuffled", steps=2, order_seed=5), _fresh_tiny(), progress=False)
    first = [json.loads((out / "train_log.jsonl").read_text().splitlines()[0])["loss_target"]
             for out in (plain, shuffled)]
    assert first[0] != first[1]  # the first step saw other blocks
    assert ckpt.read_checkpoint(shuffled).training["train_config"]["order_seed"] == 5


def test_a_softmax_memory_trains_with_its_own_learning_rate_and_is_saved(tmp_path):
    cfg = _cfg(tmp_path / "softmax", memory_kernel="softmax", memory_scale_init=3.0, memory_lr_scale=30.0,
               rho_init=0.9, budget="hard", distill_target="topk_tail")
    out = train(cfg, _fresh_tiny(), progress=False)
    rows = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert all(0.0 < r["memory_entropy"] <= 1.0 for r in rows)
    assert rows[0]["memory_scale"] == pytest.approx(3.0, rel=0.05)
    assert rows[-1]["memory_scale"] != rows[0]["memory_scale"]  # the temperature learns
    found = ckpt.read_checkpoint(out)
    assert found.config.memory_kernel == "softmax" and found.config.rho_init == 0.9
    router = ckpt.build_router(found)
    assert float(router.memory_scale().detach()) * 8 == pytest.approx(rows[-1]["memory_scale"], rel=1e-2)  # d_m = 64


def test_memory_parameters_get_their_own_learning_rate():
    from hero_core.train.train_memory import param_groups as _param_groups

    router = _fresh_tiny().router
    groups = _param_groups(router, TrainConfig(out="x", memory_lr_scale=10.0))
    names = {id(p): n for n, p in router.named_parameters()}
    assert {names[id(p)] for p in groups[1]["params"]} == {"to_q.weight", "to_k.weight", "to_v.weight", "eta"}
    assert groups[1]["lr_scale"] == 10.0 and groups[0]["lr_scale"] == 1.0
    assert sum(len(g["params"]) for g in groups) == len(list(router.parameters()))


def test_the_tail_target_is_minimised_by_the_teacher_itself():
    # A teacher over 6 tokens, its top-3 stored: the tail target's gradient vanishes at the teacher's logits,
    # the renormalised target's does not (it pulls the student sharper than the teacher).
    teacher = torch.tensor([[2.0, 1.5, 1.0, 0.2, 0.1, -0.5]])
    logp = torch.log_softmax(teacher, -1)
    top = logp.topk(3, -1)
    for tail, vanishes in ((True, True), (False, False)):
        student = teacher.clone().requires_grad_(True)
        loss = distill_loss(student[:, None], top.indices[:, None], top.values[:, None], tail=tail)
        (grad,) = torch.autograd.grad(loss, student)
        assert (grad.abs().max() < 1e-6) == vanishes


def test_mixed_lengths_read_one_long_block_every_nth_step(tmp_path):
    cfg = _cfg(tmp_path / "mixed", long_seq_len=96, long_every=3, long_blocks=4)
    out = train(cfg, _fresh_tiny(), progress=False)
    rows = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    # steps 3 and 6 read one 96-token block, the others two 32-token blocks
    assert [r["tokens"] for r in rows] == [64, 64, 96, 64, 64, 96]
    training = ckpt.read_checkpoint(out).training
    assert training["tokens_seen"] == 4 * 64 + 2 * 96
    assert training["data_card"]["long_blocks"] == {"seq_len": 96, "blocks": 4, "every": 3}


def test_mixed_lengths_need_a_longer_block():
    with pytest.raises(ValueError, match="long_seq_len"):
        TrainConfig(out="x", seq_len=128, long_seq_len=128)
