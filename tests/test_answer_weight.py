"""The answer-weighted target loss: which tokens count as an assistant reply, and what the weight does."""

import json

import pytest
import torch

from hero_core.train.answer_tokens import answer_mask, answer_weights, assistant_header, turn_end_ids
from hero_core.train.losses import distill_loss, weighted_mean
from hero_core.train.train import train
from hero_core.train.train_config import TrainConfig
from hero_core.train.train_data import loss_weights


def test_the_mask_opens_after_a_header_and_closes_at_eos_or_a_new_turn():
    header, ends = [1, 5], {2, 1}
    blocks = torch.tensor([[7, 1, 5, 8, 9, 2, 3, 1, 5, 4],
                           [8, 9, 2, 1, 6, 3, 1, 5, 4, 4]])  # row 1: starts mid-reply, then a user turn
    mask = answer_mask(blocks, header, ends)
    assert mask[0].tolist() == [False, False, False, True, True, False, False, False, False, True]
    # the reply row 1 starts in cannot be seen (its header is in another block): only the later one counts
    assert mask[1].tolist() == [False] * 8 + [True, True]
    assert not answer_mask(blocks, [], ends).any()


def test_the_embedded_tokenizers_header_is_the_assistant_turn(tiny):
    header = assistant_header(tiny.tokenizer)
    assert tiny.tokenizer.decode(header) == "<|im_start|>assistant\n"
    text = tiny.format_prompt("What is 2 + 2?", chat_template=True) + "Four." + tiny.tokenizer.eos_token
    ids = torch.tensor([tiny.tokenizer(text, add_special_tokens=False)["input_ids"]])
    mask = answer_mask(ids, header, turn_end_ids(tiny.tokenizer, header))
    assert tiny.tokenizer.decode(ids[0][mask[0]]) == "Four."


def test_weights_reweight_the_mean_and_ones_change_nothing():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 11)
    top = torch.log_softmax(torch.randn(2, 4, 11), -1).topk(3, dim=-1)
    plain = distill_loss(logits, top.indices, top.values)
    assert distill_loss(logits, top.indices, top.values, weights=torch.ones(2, 4)) == pytest.approx(float(plain))
    only_first = torch.zeros(2, 4)
    only_first[0, 0] = 1.0
    first = distill_loss(logits[:1, :1], top.indices[:1, :1], top.values[:1, :1])
    assert distill_loss(logits, top.indices, top.values, weights=only_first) == pytest.approx(float(first))
    assert weighted_mean(torch.tensor([1.0, 3.0]), answer_weights(torch.tensor([False, True]), 3.0)) == 2.5


def test_a_run_with_answer_weight_trains_and_records_it(tmp_path, tiny):
    from hero_core.method.model import HeroModel, fresh_router
    from hero_core.method.tiny import tiny_backbone

    backbone = tiny_backbone(seed=0)
    hero = HeroModel(backbone, fresh_router(backbone), "training")
    cfg = TrainConfig(out=str(tmp_path / "answers"), steps=2, batch_size=2, seq_len=32, target_skip=0.1,
                      data_blocks=8, warm_start=False, data_mix={"code": 1.0}, answer_weight=3.0, threads=1)
    weights = loss_weights(hero, cfg, torch.tensor([[1, 520, 9531, 198, 42, 43, 2, 7]]))
    assert weights.tolist() == [[1.0, 1.0, 1.0, 1.0, 3.0, 3.0, 1.0, 1.0]]
    out = train(cfg, hero, progress=False)
    saved = json.loads((out / "hero_config.json").read_text())
    assert saved["training"]["train_config"]["answer_weight"] == 3.0


def test_answer_weight_must_be_positive():
    with pytest.raises(ValueError, match="answer_weight"):
        TrainConfig(out="x", answer_weight=0.0)
