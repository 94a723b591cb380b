"""What gets evaluated: the :class:`Method` interface, a HeRo variant (:class:`HeroMethod`) and a plain
function (:class:`CallableMethod`), with their forwards and greedy decoding
(:func:`hero_core.method.decoding.decode_steps`).

A *method* has a forward over a right-padded batch that returns logits and which FFNs each token ran;
generation and the shared-prefix scoring fast path are built on it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from hero_core.measures.accounting import ComputeProfile, without_router
from hero_core.method.config import INFERENCE_VARIANTS
from hero_core.method.decoding import cut_at_stop, decode_steps, text_stop


@dataclass
class Forward:
    logits: torch.Tensor  # (B, T, V)
    executed: np.ndarray | None  # (B, R, T) bool: FFN ran; None when every FFN ran (dense)


@dataclass
class Generation:
    text: str  # generated continuation, cut before the first stop sequence
    executed: np.ndarray | None  # (R, T) over every token fed through the model; None for dense
    n_tokens: int  # T


@dataclass
class SharedForward:
    """Scores of several continuations of one context (the context run once)."""

    first: torch.Tensor  # (V,) logits after the context: predict each continuation's first token
    tails: list[torch.Tensor]  # per continuation c: (len(c) - 1, V) logits predicting its later tokens
    executed: np.ndarray | None  # (R, n) over the n real tokens fed (context, then continuation tokens)
    positions: np.ndarray  # (n,) position of each fed token in its sequence


class Method:
    """What :func:`hero_core.eval.evaluate` runs. Subclasses implement :meth:`forward`; :meth:`generate`
    has a (slow, cache-free) default built on it.

    Attributes: ``name`` (label in results), ``tokenizer``, ``profile`` (a
    :class:`~hero_core.measures.accounting.ComputeProfile`, or None: no param-skip figures), ``routed`` (whether
    router/adapter work is charged in the net figures), ``max_tokens`` (longest input).
    """

    name: str = "method"
    tokenizer: Any = None
    profile: ComputeProfile | None = None
    routed: bool = True
    max_tokens: int = 2048

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Forward:
        raise NotImplementedError

    def generate(self, prompt: str, max_new_tokens: int, stop: Sequence[str] = ()) -> Generation:
        """Greedy decoding by re-running the whole sequence each step (no KV cache)."""
        if max_new_tokens < 1:
            return Generation("", None, 0)
        ids = self.tokenizer(prompt, add_special_tokens=True)["input_ids"][-max(1, self.max_tokens - max_new_tokens):]
        fed: list[int] = list(ids)
        last: dict[str, Any] = {}

        def feed(next_ids: torch.Tensor | None) -> torch.Tensor:
            if next_ids is not None:
                fed.append(int(next_ids[0]))
            batch = torch.tensor([fed])
            out = self.forward(batch, torch.ones_like(batch))
            last["executed"] = None if out.executed is None else out.executed[0]
            return out.logits[:, -1]

        out = decode_steps(feed, max_new_tokens, eos_id=self.tokenizer.eos_token_id,
                           stop=text_stop(self.tokenizer, stop))
        text = self.tokenizer.decode(out.new_ids[0].tolist(), skip_special_tokens=True)
        # the last forward covered every token fed (its routing of earlier tokens is that of earlier steps)
        return Generation(cut_at_stop(text, stop), last["executed"], len(fed))


class HeroMethod(Method):
    """A HeRo model run as one variant (``dense`` = the unchanged backbone), optionally with a routing
    ``policy`` from :mod:`hero_core.eval.baselines` replacing the router's hard decision.

    With a policy, log-likelihoods are scored on full sequences (a policy may look at a whole pass,
    e.g. expert choice), while generation still decodes with the KV cache, one token per pass."""

    def __init__(self, hero, variant: str = "hero", tau: float | None = None, name: str | None = None, *,
                 policy: Callable | None = None, memory_read: str = "learned") -> None:
        if variant not in INFERENCE_VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; choose one of {', '.join(INFERENCE_VARIANTS)}")
        self.hero = hero
        self.variant = variant
        self.tau = tau
        self.policy = policy
        self.memory_read = memory_read  # "uniform": the read-matters ablation (HeroModel.new_call)
        self.name = name or (variant if tau is None else f"{variant}@tau={tau:g}")
        self.tokenizer = hero.tokenizer
        # a fixed policy (static pruning, random skipping, the oracle) computes no router: charged its adapters only
        self.profile = hero.profile_for(variant) if policy is None else without_router(hero.profile)
        self.routed = variant != "dense"
        self.max_tokens = hero.max_tokens
        self.shares_prefix = policy is None

    def _call(self):
        extra = {"policy": self.policy} if self.policy is not None else {}
        return self.hero.new_call(self.variant, self.tau, record=self.routed, memory_read=self.memory_read, **extra)

    def _executed(self, call, B: int, T: int, passes: slice = slice(None)) -> np.ndarray | None:
        if not self.routed:
            return None
        blocks = [p.executed().view(-1, B, T) for p in call.passes[passes]]
        return torch.cat(blocks, dim=2).permute(1, 0, 2).cpu().numpy()  # (B, R, T)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Forward:
        call = self._call()
        device = self.hero.device
        with torch.no_grad():
            logits = self.hero.forward(input_ids.to(device), attention_mask.to(device), call, use_cache=False)
        B, T = input_ids.shape
        return Forward(logits.float().cpu(), self._executed(call, B, T))

    def forward_shared(self, context: list[int], continuations: list[list[int]]) -> SharedForward:
        """Fast path of :func:`hero_core.eval.scoring.loglikelihood`: the context once (KV cache), then every
        continuation that has more than one token as a right-padded batch on copies of the cache. Routing is
        per token with no state across tokens, so every token is routed exactly as in a full forward."""
        from transformers import DynamicCache

        hero, device = self.hero, self.hero.device
        call = self._call()
        cache = DynamicCache(config=hero.model.config)
        n_ctx = len(context)
        with torch.no_grad():
            first = hero.forward(torch.tensor([context], device=device), None, call, cache=cache, use_cache=True,
                                 logits_to_keep=1)[0, -1].float().cpu()  # only the last position is scored
            feed = [i for i, c in enumerate(continuations) if len(c) > 1]
            tails = [torch.empty(0, first.shape[-1]) for _ in continuations]
            lengths: list[int] = []
            if feed:
                lengths = [len(continuations[i]) - 1 for i in feed]
                width = max(lengths)
                pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
                ids = torch.full((len(feed), width), pad, dtype=torch.long)
                mask = torch.zeros((len(feed), n_ctx + width), dtype=torch.long)
                mask[:, :n_ctx] = 1
                for row, i in enumerate(feed):
                    ids[row, : lengths[row]] = torch.tensor(continuations[i][:-1])
                    mask[row, n_ctx: n_ctx + lengths[row]] = 1
                cache.batch_repeat_interleave(len(feed))
                logits = hero.forward(ids.to(device), mask.to(device), call, cache=cache, use_cache=True).float().cpu()
                for row, i in enumerate(feed):
                    tails[i] = logits[row, : lengths[row]]
        positions = [np.arange(n_ctx)] + [n_ctx + np.arange(n) for n in lengths]
        executed = None
        if self.routed:
            parts = [self._executed(call, 1, n_ctx, slice(0, 1))[0]]
            if feed:
                cont = self._executed(call, len(feed), max(lengths), slice(1, 2))  # (k, R, width)
                parts += [cont[row][:, :n] for row, n in enumerate(lengths)]
            executed = np.concatenate(parts, axis=1)
        return SharedForward(first, tails, executed, np.concatenate(positions))

    def generate(self, prompt: str, max_new_tokens: int, stop: Sequence[str] = ()) -> Generation:
        """Greedy decoding with the KV cache (:meth:`hero_core.method.model.HeroModel.decode`), routed token by
        token, stopping at ``stop`` strings."""
        hero = self.hero
        enc = hero.encode([prompt], max_tokens=max(1, hero.max_tokens - max_new_tokens))
        call = self._call()
        out = hero.decode(enc.input_ids, call, max_new_tokens, stop=text_stop(self.tokenizer, stop))
        executed = None
        if self.routed:  # one pass per fed chunk: the prompt, then one token per step
            executed = np.concatenate([self._executed(call, 1, p.shape[1], slice(i, i + 1))[0]
                                       for i, p in enumerate(call.passes)], axis=1)
        n_fed = enc.input_ids.shape[1] + max(0, len(call.passes) - 1)
        text = self.tokenizer.decode(out.new_ids[0].tolist(), skip_special_tokens=True)
        return Generation(cut_at_stop(text, stop), executed, n_fed)


class CallableMethod(Method):
    """Wrap ``fn(input_ids, attention_mask) -> (logits (B,T,V), executed (B,R,T) bool or None)``.

    ``profile`` enables param-skip figures (use ``hero.profile`` for a policy on the same backbone);
    ``routed`` says whether router/adapter work is charged in the net figures."""

    def __init__(self, name: str, fn: Callable[[torch.Tensor, torch.Tensor], tuple], tokenizer, *,
                 profile: ComputeProfile | None = None, routed: bool = True, max_tokens: int = 2048) -> None:
        self.name, self.fn, self.tokenizer = name, fn, tokenizer
        self.profile, self.routed, self.max_tokens = profile, routed, max_tokens

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Forward:
        with torch.no_grad():
            logits, executed = self.fn(input_ids, attention_mask)
        if executed is not None:
            executed = np.asarray(executed.cpu() if isinstance(executed, torch.Tensor) else executed, dtype=bool)
        return Forward(logits.float().cpu(), executed)

