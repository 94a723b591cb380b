"""Your own training text (``python -m hero_core train --data PATH``): reading it, holding part of it out, and the
data card a checkpoint keeps of it.

PATH is a ``.txt`` file, a ``.jsonl`` file (one JSON object a line: a ``text`` field, or a ``prompt`` and a
``response``), a ``.parquet`` file with the same columns, or a folder of such files (read recursively, in name
order). A ``.txt`` file is cut at blank lines and its paragraphs are joined into items of at least
:data:`ITEM_CHARS` characters; a JSONL line or Parquet row is one item. A prompt/response pair is laid out with
the tokenizer's chat template where it has one, and as ``prompt`` + a blank line + ``response`` where it has none
(a base model), so no chat template is ever required.

Every item goes to the training or the held-out split by a hash of its text, as the built-in data does
(hero_core.data.splits.split_of: one item in five is held out), so no item is in both.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

from hero_core.data.blocks import token_blocks
from hero_core.data.splits import EVAL_SHARE, split_of
from hero_core.files import json_lines

FORMATS = (".txt", ".jsonl", ".parquet")
ITEM_CHARS = 1000  # a .txt item: paragraphs joined up to this size, so a short line is not an item of its own


class CorpusError(ValueError):
    """A corpus that cannot be trained on; the message names the file and what is wrong."""


@dataclass
class Source:
    path: str
    format: str
    items: list[str] = field(default_factory=list)


def corpus_files(path: str | Path) -> list[Path]:
    """The files a corpus path stands for: the file itself, or every readable file under a folder."""
    root = Path(path).expanduser()
    if not root.exists():
        raise CorpusError(f"--data {str(root)!r} does not exist; give a .txt, .jsonl or .parquet file or a folder "
                          "of them")
    if root.is_file():
        if root.suffix.lower() not in FORMATS:
            raise CorpusError(f"--data {str(root)!r}: unknown format {root.suffix!r}; use {', '.join(FORMATS)}")
        return [root]
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in FORMATS)
    if not files:
        raise CorpusError(f"--data folder {str(root)!r} holds no {', '.join(FORMATS)} files")
    return files


def _text_items(text: str) -> list[str]:
    items, current = [], ""
    for paragraph in text.split("\n\n"):
        if not paragraph.strip():
            continue
        current = f"{current}\n\n{paragraph}" if current else paragraph
        if len(current) >= ITEM_CHARS:
            items.append(current)
            current = ""
    if current:
        items.append(current)
    return items


def _record_text(record: dict, where: str, chat_format) -> str:
    if isinstance(record.get("text"), str):
        return record["text"]
    if isinstance(record.get("prompt"), str) and isinstance(record.get("response"), str):
        return chat_format(record["prompt"], record["response"])
    raise CorpusError(f"{where}: needs a 'text' field, or 'prompt' and 'response' (found {sorted(record)[:6]})")


def _read_jsonl(path: Path, chat_format) -> list[str]:
    items = []
    text = path.read_text(encoding="utf-8")
    for n, record in json_lines(text, lambda n, err: CorpusError(f"{path}, line {n}: not JSON ({err.msg})")):
        if not isinstance(record, dict):
            raise CorpusError(f"{path}, line {n}: a JSON object is needed, found {type(record).__name__}")
        items.append(_record_text(record, f"{path}, line {n}", chat_format))
    return items


def _read_parquet(path: Path, chat_format) -> list[str]:
    if importlib.util.find_spec("pyarrow") is None:
        raise CorpusError(f"reading {path} needs the 'pyarrow' package (pip install pyarrow), or convert it to "
                          ".jsonl")
    import pyarrow.parquet as pq

    rows = pq.read_table(path).to_pylist()
    return [_record_text(row, f"{path}, row {n}", chat_format) for n, row in enumerate(rows, start=1)]


def read_source(path: Path, chat_format) -> Source:
    """One file's items. ``chat_format(prompt, response)`` lays out a chat pair."""
    kind = path.suffix.lower()
    try:
        if kind == ".txt":
            items = _text_items(path.read_text(encoding="utf-8"))
        elif kind == ".jsonl":
            items = _read_jsonl(path, chat_format)
        else:
            items = _read_parquet(path, chat_format)
    except UnicodeDecodeError:
        raise CorpusError(f"{path} is not UTF-8 text") from None
    except OSError as err:
        raise CorpusError(f"{path} cannot be read: {err.strerror or err}") from None
    return Source(str(path), kind.lstrip("."), [item for item in items if item.strip()])


def chat_formatter(tokenizer):
    """How a prompt/response pair becomes training text for this tokenizer."""
    if getattr(tokenizer, "chat_template", None):
        def with_template(prompt: str, response: str) -> str:
            return tokenizer.apply_chat_template([{"role": "user", "content": prompt},
                                                  {"role": "assistant", "content": response}], tokenize=False)
        return with_template
    return lambda prompt, response: f"{prompt}\n\n{response}"


@dataclass
class Corpus:
    """Token blocks of the training split, and the card that says where they came from."""

    blocks: list[list[int]]
    card: dict
    held_out_blocks: list[list[int]] = field(default_factory=list)  # the held-out items' blocks (training's guard)


def load_corpus(path: str | Path, tokenizer, seq_len: int, *, min_blocks: int = 1) -> Corpus:
    """Read ``path``, split it, and cut the training split into ``seq_len``-token blocks (documents joined by EOS).

    Raises :class:`CorpusError` for a missing, unreadable or empty corpus, and for one whose training split
    makes fewer than ``min_blocks`` blocks (the message gives the tokens found and the tokens needed)."""
    fmt = chat_formatter(tokenizer)
    sources = [read_source(p, fmt) for p in corpus_files(path)]
    if not any(s.items for s in sources):
        raise CorpusError(f"--data {str(path)!r} holds no text ({len(sources)} file(s), all empty)")
    train_texts, held_out_texts, card_sources = [], [], []
    eval_digest = hashlib.sha256()
    eval_items = eval_tokens = 0
    for source in sources:
        counts = {"train": 0, "eval": 0}
        n_items = {"train": 0, "eval": 0}
        for item in source.items:
            split = split_of(item)
            n_tokens = len(tokenizer(item, add_special_tokens=False)["input_ids"])
            counts[split] += n_tokens
            n_items[split] += 1
            if split == "train":
                train_texts.append(item)
            else:
                held_out_texts.append(item)
                eval_digest.update(hashlib.sha256(item.encode("utf-8")).digest())
        eval_items += n_items["eval"]
        eval_tokens += counts["eval"]
        card_sources.append({"path": source.path, "format": source.format, "items": len(source.items),
                             "train_items": n_items["train"], "train_tokens": counts["train"],
                             "held_out_items": n_items["eval"], "held_out_tokens": counts["eval"]})
    blocks = token_blocks(train_texts, tokenizer, seq_len)
    train_tokens = sum(s["train_tokens"] for s in card_sources) + len(train_texts)  # + one EOS per item
    if len(blocks) < min_blocks:
        raise CorpusError(
            f"--data {str(path)!r} is too short: its training split has {train_tokens:,} tokens "
            f"({eval_tokens:,} more are held out), and this run needs at least {min_blocks * seq_len:,} "
            f"({min_blocks} block(s) of {seq_len} tokens); add text, or lower --seq-len / --batch-size")
    card = {"source": "your text (--data)", "path": str(path), "sources": card_sources,
            "train_tokens": train_tokens, "blocks": len(blocks), "seq_len": seq_len,
            "held_out": {"rule": f"sha256(item text) % {EVAL_SHARE} == 0 (hero_core.data.splits.split_of)",
                         "items": eval_items, "tokens": eval_tokens, "digest": eval_digest.hexdigest()[:16]},
            "items": f"a .txt file's paragraphs joined up to {ITEM_CHARS} characters; a JSONL line or Parquet row"}
    return Corpus(blocks, card, token_blocks(held_out_texts, tokenizer, seq_len))


def corpus_key(path: str | Path) -> str:
    """A short digest of the corpus files' names and bytes: the data's part of the training caches' names."""
    digest = hashlib.sha256()
    for file in corpus_files(path):
        digest.update(file.name.encode("utf-8"))
        digest.update(file.read_bytes())
    return digest.hexdigest()[:12]
