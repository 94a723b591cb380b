"""Token categories for the analyses: what kind of token a routing decision was made on (digits and
operators, identifiers and keywords, whitespace, punctuation, words, special tokens), from its text and domain."""

from __future__ import annotations

import re
from collections.abc import Sequence

CATEGORIES = ("digits_operators", "identifiers_keywords", "whitespace", "punctuation", "words", "special")
CATEGORY_LABELS = {
    "digits_operators": "digits & operators",
    "identifiers_keywords": "identifiers & keywords",
    "whitespace": "indentation & whitespace",
    "punctuation": "punctuation",
    "words": "words",
    "special": "special tokens",
}
CODE_DOMAINS = frozenset({"code", "python"})
_OPERATOR_CHARS = set("+-*/=<>%^&|~×÷−")  # '!' alone is punctuation; '!=' is an operator
_SPECIAL = re.compile(r"^(<\|[^|]*\|>|</?s>|<unk>|<pad>)$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def token_category(token: str, domain: str | None = None) -> str:
    """One of :data:`CATEGORIES` for a decoded token string.

    The token's surrounding whitespace is ignored (``" Compute"`` is a word), unless it is all
    whitespace. The domain hint decides what a name is: in a code domain (:data:`CODE_DOMAINS`) any
    ASCII identifier-shaped token counts as *identifiers & keywords* (comments and docstrings included:
    a token alone cannot tell them apart); elsewhere letters make *words*.
    """
    if not isinstance(token, str):
        raise ValueError(f"a token must be a string, got {type(token).__name__}")
    core = token.strip()
    if not core:
        return "whitespace"
    if _SPECIAL.match(core):
        return "special"
    if _is_arithmetic(core):
        return "digits_operators"
    named = _name_or_word(core, domain in CODE_DOMAINS)
    if named is not None:
        return named
    if any(ch.isdigit() for ch in core):
        return "digits_operators"
    # Brackets, quotes, separators and symbols (unicode categories P* and S*); the rare rest (combining
    # marks, control characters) is counted with them.
    return "punctuation"


def _is_arithmetic(core: str) -> bool:
    """Digits and operators only (``!`` among them, as in ``!=``), with at least one digit or operator."""
    return all(ch.isdigit() or ch in _OPERATOR_CHARS or ch == "!" for ch in core) and \
        any(ch.isdigit() or ch in _OPERATOR_CHARS for ch in core)


def _name_or_word(core: str, is_code: bool) -> str | None:
    """An identifier-shaped token in code, or a token with letters: a name in code (mixed tokens such as ".append("
    or "x2" too), a word elsewhere; None for a token that is neither."""
    if is_code and _IDENTIFIER.match(core):
        return "identifiers_keywords"
    if any(ch.isalpha() for ch in core):
        return "identifiers_keywords" if is_code and any(ch.isascii() and ch.isalpha() for ch in core) else "words"
    return None


def token_categories(tokens: Sequence[str], domain: str | None = None) -> list[str]:
    return [token_category(t, domain) for t in tokens]
