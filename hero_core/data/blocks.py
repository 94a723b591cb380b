"""Training and evaluation text cut into blocks of a fixed number of tokens."""

from __future__ import annotations


def token_blocks(texts: list[str], tokenizer, block: int) -> list[list[int]]:
    """Tokenise texts and cut them into blocks of exactly ``block`` tokens (documents joined by EOS)."""
    stream: list[int] = []
    for text in texts:
        stream.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
        stream.append(tokenizer.eos_token_id)
    return [stream[i: i + block] for i in range(0, len(stream) - block + 1, block)]
