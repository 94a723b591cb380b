"""Streaming routed generation into a placeholder, token by token, shaded by the FFNs it took."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from hero_core.analysis.spans import SpanFigures
from hero_core.method.model import HeroModel
from hero_core.viz.figures import token_compute_html
from hero_core.words.labels import token_label


@dataclass
class Stream:
    """Collects streamed pieces and redraws them; ``render`` receives the HTML (a placeholder's .html)."""

    render: object  # Callable[[str], None]
    max_count: int
    pieces: list[str] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)

    special: frozenset = frozenset()  # the tokenizer's special tokens, shown as markers
    is_special: list[bool] = field(default_factory=list)  # per piece: a special token (end of turn …), not text

    def __call__(self, piece: str, n_executed: int) -> None:
        marked = piece in self.special
        self.pieces.append(special_marker(piece) if marked else piece)
        self.is_special.append(marked)
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


def text_pieces(result: dict) -> list[str]:
    """The pieces of a generation result that are text the model wrote (special tokens left out)."""
    flags = result.get("special") or [False] * len(result["pieces"])
    return [piece for piece, special in zip(result["pieces"], flags, strict=True) if not special]


def agreement(routed: dict, dense: dict) -> tuple[str, str]:
    """(kind, sentence) on how the routed and dense continuations compare: "empty" when neither wrote any text,
    "same" when they wrote the same tokens, "differ" (with where) otherwise.

    Why: "agree on all 0 generated tokens" under a green banner was printed when both models only ended the turn."""
    a, b = text_pieces(routed), text_pieces(dense)
    if not a and not b:
        ended = [p for p in routed["pieces"] if p not in a]
        how = f" (they wrote only {' '.join(ended)})" if ended else ""
        return "empty", f"Nothing was generated: both models ended at once{how}, so there is no answer to compare."
    split = first_difference(a, b)
    if split is None and len(a) == len(b):
        return "same", f"Routed and dense wrote the same {len(a)} tokens."
    if split is None:  # one stopped where the other went on
        shorter, longer = ("routed", "dense") if len(a) < len(b) else ("dense", "routed")
        return "differ", (f"Routed and dense agree on their first {min(len(a), len(b))} tokens; then {shorter} "
                          f"stopped and {longer} wrote {abs(len(a) - len(b))} more.")
    return "differ", (f"Routed and dense part at generated token {split + 1}: routed wrote "
                      f"“{token_label(a[split], 24)}” where dense wrote “{token_label(b[split], 24)}”.")


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
    return {"text": text, "pieces": stream.pieces, "counts": stream.counts, "special": stream.is_special,
            "trace": trace.to_dict(), "variant": variant}


def _percent(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.1%}"


def _ratio(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.3f}"


def span_table(spans: dict[str, SpanFigures | None]) -> pd.DataFrame:
    """One row per span (answer, prompt, all), formatted as the metric chips are: percentages and 3 decimals
    (short headers: the table fits the page without a scroll bar)."""
    rows = []
    for name, f in spans.items():
        if f is None:
            rows.append({"span": name, "tokens": 0})
            continue
        rows.append({"span": name, "tokens": f.n_tokens, "param skip": _percent(f.param_skip),
                     "net param skip": _percent(f.net_param_skip), "FLOPs saved": _percent(f.flop_share_saved),
                     "FFNs / token": f"{f.ffn_executed_per_token:.1f}", "ppl ratio": _ratio(f.perplexity_ratio),
                     "top-1 agree": _percent(f.top1_agreement),
                     "KL": "—" if math.isnan(f.mean_kl_to_dense) else f"{f.mean_kl_to_dense:.4f}"})
    return pd.DataFrame(rows).fillna("—")
