"""Token and block labels for figures: visible, collision-free, and escaped exactly once.

Two facts shape this module:

* Byte-level BPE splits one CJK character or emoji over several tokens, and decoding one of those pieces
  alone gives U+FFFD ("�"). :func:`piece_texts` decodes such a run of pieces together and gives the text to
  its first piece (the continuation pieces get ""), so the tokens still concatenate to the exact text and no
  "�" reaches a label. :func:`display_tokens` then names a continuation piece after the text it continues.
* Plotly renders tick, hover and title strings as its own small HTML subset: it decodes ``&lt; &gt; &amp;``
  but not ``&quot;``, so :func:`plotly_text` escapes only those three (``html.escape``'s default would show
  ``"`` as ``&quot;``).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

REPLACEMENT = "\ufffd"
MAX_PIECES = 8  # a UTF-8 character is at most 4 bytes; byte-level BPE may add a leading-space piece or two

# Other C0 controls and DEL as their Unicode control pictures (␀, ␛, ␟, ␡): invisible characters would leave
# an empty tick label and shift the reader's eye to the wrong token.
_CONTROL_PICTURES = {code: chr(0x2400 + code) for code in range(0x20)} | {0x7F: "␡"}


def plotly_text(text: str) -> str:
    """``text`` escaped for plotly's HTML subset: ``<``, ``>``, ``&`` only (plotly shows ``&quot;`` literally)."""
    return html.escape(text, quote=False)


def token_label(token: str, max_len: int = 12) -> str:
    """A token as a short, visible label: newlines and tabs shown as arrows, other control characters as
    control pictures, an all-blank token as ␣."""
    text = token.replace("\r\n", "↵").replace("\n", "↵").replace("\r", "↵").replace("\t", "⇥")
    text = text.translate(_CONTROL_PICTURES)
    if not text.strip():
        text = "".join("␣" if ch.isspace() else ch for ch in text) or "∅"
    return text if len(text) <= max_len else text[: max_len - 1] + "…"


def piece_texts(decode: Callable[[list[int]], str], ids: Sequence[int]) -> list[str]:
    """Per-token text with byte-level pieces of one character merged: no token's text contains "�" unless
    the text itself does.

    ``decode`` maps a list of ids to text (a tokenizer's ``decode``). A token whose own decoding holds "�" is
    decoded together with the next ones until the run is clean (at most :data:`MAX_PIECES`); the first piece
    gets the run's text, the others "". ``"".join(result)`` equals the decoded pieces joined."""
    ids = [int(i) for i in ids]
    out: list[str] = []
    i = 0
    while i < len(ids):
        text = decode([ids[i]])
        if REPLACEMENT not in text:
            out.append(text)
            i += 1
            continue
        for end in range(i + 2, min(len(ids), i + MAX_PIECES) + 1):
            merged = decode(ids[i:end])
            if merged.count(REPLACEMENT) < text.count(REPLACEMENT) and not merged.endswith(REPLACEMENT):
                out += [merged] + [""] * (end - i - 1)
                i = end
                break
        else:  # a genuinely invalid byte (or a cut at the end): keep the piece as it decodes
            out.append(text)
            i += 1
    return out


def continued_from(tokens: Sequence[str]) -> list[int | None]:
    """For each token, the index of the piece it continues (an empty token after a non-empty one), else None."""
    out: list[int | None] = []
    last = None
    for i, token in enumerate(tokens):
        if token == "" and last is not None:
            out.append(last)
        else:
            out.append(None)
            last = i if token != "" else None
    return out


def display_tokens(tokens: Sequence[str], max_len: int = 12) -> list[str]:
    """Short visible labels; a continuation piece of a split character shows that text in brackets, ``(🚀)``."""
    labels = []
    for token, source in zip(tokens, continued_from(tokens), strict=True):
        if source is None:
            labels.append(token_label(token, max_len))
        else:
            labels.append(token_label(tokens[source].strip() or tokens[source], max_len - 2).join("()"))
    return labels
