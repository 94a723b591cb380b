"""Your own text for training (hero_core.data.corpus): formats, the held-out split, the card, and the errors."""

import json

import pytest

from hero_core.cli.main import build_parser
from hero_core.data.corpus import CorpusError, chat_formatter, load_corpus
from hero_core.data.splits import split_of


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from hero_core.backbones.loading import embedded_model_dir

    return AutoTokenizer.from_pretrained(embedded_model_dir())


def _paragraphs(n: int, words: int = 120) -> list[str]:
    return [" ".join(f"word{i}x{j}" for j in range(words)) for i in range(n)]


def test_a_folder_of_txt_and_jsonl_is_split_by_hash_and_carded(tmp_path, tokenizer):
    (tmp_path / "a.txt").write_text("\n\n".join(_paragraphs(6)))
    rows = [{"text": t} for t in _paragraphs(5)] + [{"prompt": "Say hi.", "response": "Hi there, friend."}]
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    (tmp_path / "notes.md").write_text("not read")  # other suffixes are left alone
    corpus = load_corpus(tmp_path, tokenizer, seq_len=32)
    card = corpus.card
    assert [s["format"] for s in card["sources"]] == ["txt", "jsonl"]
    jsonl = card["sources"][1]
    assert jsonl["items"] == 6 and jsonl["train_items"] + jsonl["held_out_items"] == 6
    assert card["held_out"]["items"] == sum(s["held_out_items"] for s in card["sources"])
    assert card["train_tokens"] > 0 and len(corpus.blocks) == card["blocks"] > 0
    assert all(len(block) == 32 for block in corpus.blocks)
    # the rule is the built-in data's: an item is held out exactly when split_of says so
    held = [r["text"] for r in rows[:5] if split_of(r["text"]) == "eval"]
    assert jsonl["held_out_items"] == len(held) + (split_of(chat_formatter(tokenizer)("Say hi.", "Hi there, friend."))
                                                   == "eval")


def test_chat_pairs_use_the_template_only_where_the_tokenizer_has_one(tokenizer):
    with_template = chat_formatter(tokenizer)("Say hi.", "Hi!")
    assert "Say hi." in with_template and with_template != "Say hi.\n\nHi!"
    base = type("Base", (), {"chat_template": None})()
    assert chat_formatter(base)("Say hi.", "Hi!") == "Say hi.\n\nHi!"


def test_parquet_reads_like_jsonl(tmp_path, tokenizer):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": _paragraphs(8)}), tmp_path / "c.parquet")
    card = load_corpus(tmp_path / "c.parquet", tokenizer, seq_len=32).card
    assert card["sources"][0]["format"] == "parquet" and card["sources"][0]["items"] == 8


def test_parquet_without_pyarrow_names_the_package(tmp_path, tokenizer, monkeypatch):
    import importlib.util

    (tmp_path / "c.parquet").write_bytes(b"PAR1")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a))
    with pytest.raises(CorpusError, match="needs the 'pyarrow' package"):
        load_corpus(tmp_path / "c.parquet", tokenizer, seq_len=32)


@pytest.mark.parametrize(("content", "message"), [
    (b"", "holds no text"),
    (b"\n\n   \n", "holds no text"),
    (b"\xff\xfe\x00bad", "is not UTF-8 text"),
])
def test_empty_or_unreadable_text_is_refused(tmp_path, tokenizer, content, message):
    (tmp_path / "my.txt").write_bytes(content)
    with pytest.raises(CorpusError, match=message):
        load_corpus(tmp_path / "my.txt", tokenizer, seq_len=32)


def test_missing_path_bad_records_and_unknown_formats_are_named(tmp_path, tokenizer):
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(tmp_path / "nope.txt", tokenizer, seq_len=32)
    (tmp_path / "x.csv").write_text("a,b")
    with pytest.raises(CorpusError, match="unknown format '.csv'"):
        load_corpus(tmp_path / "x.csv", tokenizer, seq_len=32)
    (tmp_path / "x.jsonl").write_text('{"text": "ok"}\n{"title": "no text"}\n')
    with pytest.raises(CorpusError, match=r"x.jsonl, line 2: needs a 'text' field"):
        load_corpus(tmp_path / "x.jsonl", tokenizer, seq_len=32)


def test_a_too_short_corpus_says_how_many_tokens_it_has_and_needs(tmp_path, tokenizer):
    (tmp_path / "my.txt").write_text("\n\n".join(_paragraphs(6, words=40)))
    with pytest.raises(CorpusError, match=r"too short: its training split has [\d,]+ tokens .* needs at least "
                                          r"4,096 \(4 block\(s\) of 1024 tokens\)"):
        load_corpus(tmp_path / "my.txt", tokenizer, seq_len=1024, min_blocks=4)


def test_data_is_its_own_flag_and_no_flag_is_abbreviated():
    args = build_parser().parse_args(["train", "--out", "o", "--data", "my.txt"])
    assert args.data == "my.txt" and args.data_blocks == 1600
    with pytest.raises(SystemExit):  # a prefix of --data-blocks is no longer accepted for it
        build_parser().parse_args(["train", "--out", "o", "--data-b", "3"])


def test_every_flag_of_every_subcommand_has_help():
    import argparse

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert {"trace", "generate", "train"} <= set(commands)
    for name, sub in commands.items():
        assert not sub.allow_abbrev, name
        silent = [a.dest for a in sub._actions if not a.help]
        assert not silent, (name, silent)


def test_the_data_command_previews_the_card_of_your_text(tmp_path, capsys):
    from hero_core.cli.main import main

    (tmp_path / "my.txt").write_text("\n\n".join(_paragraphs(6)))
    assert main(["data", "--describe", "--data", str(tmp_path / "my.txt"), "--seq-len", "64"]) == 0
    card = json.loads(capsys.readouterr().out)
    assert card["seq_len"] == 64 and card["sources"][0]["items"] >= 2 and card["blocks"] > 0
    (tmp_path / "empty.txt").write_text("")
    assert main(["data", "--data", str(tmp_path / "empty.txt")]) == 2
    assert "holds no text" in capsys.readouterr().err
