"""One fast tokenizer shared by threads (a backbone in the pool serves every router and page): a left-padded batch
(the dense replies of the chat texts) encoded while other threads encode with the same tokenizer. Padding asked of
the tokenizer itself switches its padding on and off under another thread's encode in flight: that encode comes
back padded, the padded batch comes back ragged ("Unable to create tensor"), or the backend refuses ("Already
borrowed"). The batch is padded by hand instead, to exactly what the tokenizer's own padding gives."""

import threading

import torch
from transformers import AutoTokenizer

from hero_core.backbones.loading import embedded_model_dir
from hero_core.data.texts import left_padded

TEXTS = ["A short one.", "", "A longer prompt with several more words in it, so the batch needs padding.",
         "def f(x):\n    return x * 2\n"]
# long enough that an encode is still running in the tokenizer when another thread calls it
PLAIN = [" ".join(f"word{i} and another{j}" for i in range(200)) for j in range(16)]
ROUNDS = 40


def tokenizer():
    tok = AutoTokenizer.from_pretrained(embedded_model_dir())
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def test_left_padded_is_the_tokenizers_own_left_padding():
    reference = tokenizer()(TEXTS, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
    input_ids, mask = left_padded(tokenizer(), TEXTS)
    assert torch.equal(input_ids, reference["input_ids"]) and torch.equal(mask, reference["attention_mask"])
    assert mask[1].sum() == 0 and mask[0, -1] == 1  # the empty text is all padding; real tokens sit on the right


def test_padded_batches_and_plain_encodes_share_one_tokenizer_across_threads():
    expected = left_padded(tokenizer(), TEXTS)
    plain_expected = tokenizer()(PLAIN, add_special_tokens=False)["input_ids"]
    shared = tokenizer()
    start, errors, wrong = threading.Barrier(4), [], []

    def padded():
        start.wait()
        for _ in range(ROUNDS):
            ids, mask = left_padded(shared, TEXTS)
            if not (torch.equal(ids, expected[0]) and torch.equal(mask, expected[1])):
                wrong.append("padded batch")

    def plain():
        start.wait()
        for _ in range(ROUNDS):
            if shared(PLAIN, add_special_tokens=False)["input_ids"] != plain_expected:
                wrong.append("plain encode")

    def guarded(work):
        def run():
            try:
                work()
            except Exception as err:  # noqa: BLE001 - the failure is what the test reports
                errors.append(f"{type(err).__name__}: {err}")
        return run

    threads = [threading.Thread(target=guarded(w)) for w in (padded, padded, plain, plain)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "an encoding thread did not finish"
    assert errors == [] and wrong == [], (errors[:3], wrong[:3])
    assert shared._tokenizer.padding is None  # nothing left switched on in the shared tokenizer
