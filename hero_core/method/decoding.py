"""The one decode loop (:func:`decode_steps`) and what it needs: pick rules, stop conditions, its result.

:meth:`hero_core.method.model.HeroModel.decode` runs it with the KV cache (generation, evaluation, the benchmark);
a method that can only score whole sequences (``hero_core.eval.methods.CallableMethod``) runs it by
re-feeding the whole sequence each step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch


@dataclass
class Decoded:
    """What one decode run picked (see :meth:`HeroModel.decode` and :func:`decode_steps`)."""

    new_ids: torch.Tensor  # (B, N) every picked token, a closing end-of-text included; the last one was not fed
    stopped: str  # "length" | "eos" | "stop"
    elapsed: object = None  # what the timer measured over the steps after the prefill (None without one)

    @property
    def n_fed(self) -> int:
        """Tokens per row fed after the prompt: every pick but the last."""
        return max(0, self.new_ids.shape[1] - 1)


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """(B, V) logits -> (B,) ids of the most likely tokens."""
    return logits.argmax(-1)


def decode_steps(feed: Callable[[torch.Tensor | None], torch.Tensor], max_new_tokens: int, *,
                 pick: Callable[[torch.Tensor], torch.Tensor] | None = None, eos_id: int | None = None,
                 stop: Callable[[list[int]], bool] | None = None, on_token: Callable[[int], None] | None = None,
                 timer: Callable[[], Callable[[], object]] | None = None) -> Decoded:
    """The one decode loop. ``feed(None)`` runs the prompt and ``feed(ids (B,))`` feeds one token per row;
    both return the next-token logits (B, V). Pick, stop at ``eos_id``, ``stop(new ids)`` or
    ``max_new_tokens``, feed the pick back, repeat. Stopping conditions and ``on_token`` read row 0 and
    need a single row; without them the picks stay on the device (no host sync per step)."""
    pick = pick or greedy
    logits = feed(None)
    picked: list[torch.Tensor] = []
    reason, watch = "length", None
    for _ in range(max_new_tokens):
        next_ids = pick(logits)
        picked.append(next_ids)
        if timer is not None and watch is None:
            watch = timer()
        if on_token is not None or eos_id is not None or stop is not None:
            if next_ids.shape[0] != 1:
                raise ValueError("stopping conditions and streaming need a single row")
            token = int(next_ids[0])
            if on_token is not None:
                on_token(token)
            if token == eos_id and len(picked) < max_new_tokens:
                reason = "eos"
                break
            if stop is not None and len(picked) < max_new_tokens and stop([int(t[0]) for t in picked]):
                reason = "stop"
                break
        if len(picked) == max_new_tokens:
            break
        logits = feed(next_ids)
    elapsed = watch() if watch is not None else None
    new_ids = torch.stack(picked, dim=1) if picked else torch.zeros((logits.shape[0], 0), dtype=torch.long)
    return Decoded(new_ids, reason, elapsed)


def cut_at_stop(text: str, stops: Sequence[str]) -> str:
    """``text`` cut before the earliest of ``stops`` (unchanged when it holds none)."""
    hits = [i for i in (text.find(s) for s in stops) if i >= 0]
    return text[: min(hits)] if hits else text


def text_stop(tokenizer, stops: Sequence[str]) -> Callable[[list[int]], bool] | None:
    """A :func:`decode_steps` stop condition: the decoded new tokens hold one of ``stops``."""
    if not stops:
        return None
    return lambda ids: any(s in tokenizer.decode(ids, skip_special_tokens=True) for s in stops)


def sample_token(logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator | None) -> int:
    """One token id sampled from (V,) logits at ``temperature``, restricted to the top-``top_p`` mass."""
    probs = torch.softmax(logits.cpu() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_p, order = probs.sort(descending=True)
        cut = sorted_p.cumsum(0) - sorted_p > top_p
        sorted_p[cut] = 0.0
        probs = torch.zeros_like(probs).scatter(0, order, sorted_p)
    return int(torch.multinomial(probs / probs.sum(), 1, generator=generator))
