"""Streaming routed generation into a placeholder, token by token, shaded by the FFNs it took."""

from __future__ import annotations

from dataclasses import dataclass, field

from hero_core.figures import token_compute_html
from hero_core.model import HeroModel


@dataclass
class Stream:
    """Collects streamed pieces and redraws them; ``render`` receives the HTML (a placeholder's .html)."""

    render: object  # Callable[[str], None]
    max_count: int
    pieces: list[str] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)

    special: frozenset = frozenset()  # the tokenizer's special tokens, shown as markers

    def __call__(self, piece: str, n_executed: int) -> None:
        self.pieces.append(special_marker(piece) if piece in self.special else piece)
        self.counts.append(int(n_executed))
        self.render(token_compute_html(self.pieces, self.counts, self.max_count))


def special_marker(piece: str) -> str:
    """``<|im_end|>`` -> ``⟦im_end⟧``: a special token is a marker, not text the model wrote."""
    return f"⟦{piece.strip('<>|')}⟧"


def first_difference(a: list[int], b: list[int]) -> int | None:
    """Index of the first position where two token sequences differ (None: one is a prefix of the other)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None


def generate(hero: HeroModel, prompt: str, *, variant: str, tau: float, chat_template: bool, max_new_tokens: int,
             do_sample: bool, temperature: float, top_p: float, seed: int | None, render) -> dict:
    """Run one generation, streaming into ``render``; returns a serialisable result."""
    stream = Stream(render=render, max_count=hero.config.n_routed,
                    special=frozenset(getattr(hero.tokenizer, "all_special_tokens", ())))
    text, trace = hero.generate(prompt, max_new_tokens=max_new_tokens, variant=variant, tau=tau,
                                do_sample=do_sample, temperature=temperature, top_p=top_p, seed=seed,
                                chat_template=chat_template, on_token=stream)
    if variant != "dense" and trace.n_tokens > 1:  # the continuation's quality against dense, teacher-forced
        trace.quality = hero.score_tokens(trace.token_ids, variant, tau=trace.tau)
    return {"text": text, "pieces": stream.pieces, "counts": stream.counts, "trace": trace.to_dict(),
            "variant": variant}
