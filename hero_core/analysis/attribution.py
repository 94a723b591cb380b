"""Why did a token run (or skip) a block's FFN? Attribution of one gate logit to the input tokens.

The decision at routed block j for token t is ``g = sigmoid(a + b) >= tau`` (docs/method.md, Eq. 8). We explain the
gate logit ``z = a + b`` at (t, j) in two ways:

* **integrated gradients** (captum) with respect to the input embeddings e (T', d), summed over the
  embedding dimension per input token: ``attr_i = sum_d (e - e0)_{i,d} * mean_k dz/de_{i,d}(e0 + k/n (e - e0))``.
  Completeness: ``sum_i attr_i = z(e) - z(e0)`` up to the quadrature error, which captum reports as
  ``delta``. The hard branches of the blocks before j are step functions of their gates: when one of
  them flips on the path from the baseline e0 to e, z jumps there and the gradient does not see the
  jump, so ``delta`` grows. It is shown with every result. The first routed block (no hard branch
  upstream) always satisfies completeness. :func:`explain` therefore checks its own result: it doubles the
  steps while that halves the gap (then tries the other baseline) until the gap is below
  :data:`COMPLETENESS_TOLERANCE` of the change z(e) - z(e0), and when no try passes it says so
  (``passed=False``) instead of presenting the scores as an explanation: the exact a/b split of the
  decision is then the honest answer.
* **token ablation** (captum ``FeatureAblation``): replace one token's embedding by the baseline's and
  take ``z(e) - z(e with token i ablated)``. Needs no gradient: the method for 4-bit (NF4) backbones,
  whose bitsandbytes kernels may drop the autograd path on CPU, or when gradients are switched off. It runs
  one forward pass per token (in batches), so it reports progress through an optional callback.

Two facts keep it cheap. The model is causal, so z at token t depends on tokens 0..t only: the input
is cut after t (exactly the same z). And z is known once block j has decided: a subclass of
:class:`~hero_core.method.call_state.RoutingCall` captures ``a + b`` with its graph and stops the forward pass
there, so the blocks above j are never run.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from hero_core.method.call_state import RoutingCall
from hero_core.method.config import check_tau, check_variant
from hero_core.words.labels import piece_texts

METHODS = ("auto", "integrated_gradients", "ablation")
BASELINES = ("pad", "zeros")  # default first: the pad embedding avoids RMSNorm's steep region near 0
COMPLETENESS_TOLERANCE = 0.05  # |sum(scores) - change| must be below 5 % of |change| to pass
MAX_STEPS = 256  # the most integration steps one try may use (each step is one forward + backward pass)
Progress = Callable[[int, int, str], None]  # (done, total, what): called as work finishes


def completeness_passed(delta: float, change: float) -> bool:
    """Whether an integrated-gradients gap is small enough: below 5 % of the change it has to explain.

    (A tiny absolute floor keeps a change of exactly zero from failing on rounding alone.)"""
    return abs(delta) < COMPLETENESS_TOLERANCE * abs(change) + 1e-6


def step_schedule(n_steps: int, max_steps: int = MAX_STEPS) -> list[int]:
    """Steps of the successive tries: ``n_steps``, doubled until ``max_steps``."""
    steps = [n_steps]
    while steps[-1] * 2 <= max_steps:
        steps.append(steps[-1] * 2)
    return steps


class AttributionError(ValueError):
    """An attribution that cannot be computed as asked; the message says why."""


class _BlockReached(Exception):
    """Raised inside the forward pass once the target block's gate logit is captured."""


@dataclass
class _GateCapture(RoutingCall):
    """A routing call that keeps ``a + b`` of one routed block (with its graph) and then stops the pass."""

    target_block: int = 0  # 0-based routed-block index
    target_token: int = 0
    captured: torch.Tensor | None = None  # (B,)

    def add_record(self, j, decision, executed, path) -> None:  # j is 1-based, as in the router
        super().add_record(j, decision, executed, path)
        if j - 1 == self.target_block:
            B, T = self.current.shape
            logit = decision.history_logit + decision.local_logit  # (B*T,)
            self.captured = logit.view(B, T)[:, self.target_token]
            raise _BlockReached


@dataclass
class Attribution:
    """Per-token attribution of the gate logit z = a + b at (token, block).

    ``scores`` cover the input tokens 0..token (later tokens cannot influence it)."""

    method: str  # "integrated_gradients" | "ablation"
    token: int
    block: int  # 0-based routed-block index
    layer: int  # backbone layer of that block
    tokens: list[str]
    token_ids: list[int]
    scores: np.ndarray  # (token + 1,)
    gate_logit: float  # z(e)
    baseline_logit: float  # z(e0)
    tau: float
    variant: str
    baseline: str
    delta: float | None = None  # IG completeness gap: sum(scores) - (z(e) - z(e0))
    n_steps: int | None = None
    notices: list[str] = field(default_factory=list)
    passed: bool = True  # IG: the completeness check passed (ablation has no such check: always True)
    tries: list[dict] = field(default_factory=list)  # IG: {"baseline", "n_steps", "delta", "change"} per try

    @property
    def change(self) -> float:
        """z(e) - z(e0): what integrated gradients must split among the tokens."""
        return self.gate_logit - self.baseline_logit

    @property
    def executed(self) -> bool:
        return self.gate_logit >= math.log(self.tau / (1 - self.tau))

    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["scores"] = [float(s) for s in self.scores]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Attribution:
        data = dict(data)
        data["scores"] = np.asarray(data["scores"], dtype=np.float64)
        return cls(**data)


def gate_logit_function(hero, *, variant: str, tau: float, block: int, token: int) -> Callable[[torch.Tensor],
                                                                                                   torch.Tensor]:
    """z(e): input embeddings (B, T', d) -> gate logit a + b of routed block ``block`` at ``token``: (B,)."""

    def forward(embeds: torch.Tensor) -> torch.Tensor:
        call = _GateCapture(router=hero.router, variant=variant, tau=tau, record=False,
                            target_block=block, target_token=token)
        try:
            hero.forward(None, None, call, inputs_embeds=embeds, use_cache=False)
        except _BlockReached:
            return call.captured.float()
        raise RuntimeError(f"routed block {block} was never reached in the forward pass")

    return forward


def _quantized_linear(model: torch.nn.Module) -> torch.nn.Module | None:
    """The first 4-bit linear layer of a backbone (bitsandbytes ``Linear4bit``), or None."""
    for module in model.modules():
        if getattr(getattr(module, "weight", None), "quant_state", None) is not None:
            return module
    return None


def gradients_available(hero) -> bool:
    """Whether input gradients really flow through the backbone's matmuls.

    Full precision: always. 4-bit: bitsandbytes on CPU repacks the weights on the first no-grad forward
    and from then on runs a kernel with no autograd path, which yields silent zero gradients. Probe one
    quantized layer: the gradient of sum(W x) with respect to x is W^T 1, never exactly zero."""
    layer = _quantized_linear(hero.model)
    if layer is None:
        return True
    weight = layer.weight
    in_features = int(weight.quant_state.shape[-1]) if hasattr(weight.quant_state, "shape") else layer.in_features
    dtype = getattr(weight.quant_state, "dtype", torch.float32)
    x = torch.randn(2, in_features, device=hero.device, dtype=dtype, requires_grad=True)
    with torch.enable_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the "no autograd kernel registered" warning is the symptom
        y = layer(x)
        if not y.requires_grad:
            return False
        (grad,) = torch.autograd.grad(y.float().sum(), x, allow_unused=True)
    return grad is not None and bool(torch.isfinite(grad).all()) and bool(grad.abs().sum() > 0)


def ablation_scores(f: Callable[[torch.Tensor], torch.Tensor], embeds: torch.Tensor, base: torch.Tensor, *,
                    batch_size: int = 16, progress: Progress | None = None) -> np.ndarray:
    """z(e) - z(e with token i's embedding replaced by the baseline's), for every token i: (T',).

    Same numbers as captum's ``FeatureAblation`` with one feature per token, written out so that each batch
    can report progress (131 tokens take ~20 s on the 135M backbone on CPU)."""
    T = embeds.shape[1]
    out = np.empty(T, dtype=np.float64)
    with torch.no_grad():
        z = float(f(embeds)[0])
        for start in range(0, T, batch_size):
            idx = torch.arange(start, min(T, start + batch_size), device=embeds.device)
            batch = embeds.repeat(len(idx), 1, 1)  # (B, T', d): row k has token idx[k] ablated
            rows = torch.arange(len(idx), device=embeds.device)
            batch[rows, idx] = base[0, idx]
            out[start: start + len(idx)] = z - f(batch).double().cpu().numpy()
            if progress is not None:
                progress(start + len(idx), T, "tokens ablated")
    return out


def _baseline(hero, embeds: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "zeros":
        return torch.zeros_like(embeds)
    pad = hero.tokenizer.pad_token_id if hero.tokenizer.pad_token_id is not None else hero.tokenizer.eos_token_id
    ids = torch.full(embeds.shape[:2], int(pad), dtype=torch.long, device=embeds.device)
    return hero.model.get_input_embeddings()(ids).detach().to(embeds.dtype)


def _check(hero, token_ids: list[int], token: int, block: int, variant: str, method: str, baseline: str,
           n_steps: int) -> None:
    check_variant(variant)
    if variant == "dense":
        raise AttributionError("the dense variant runs no router, so there is no decision to explain: "
                               "choose a routed variant")
    if method not in METHODS:
        raise AttributionError(f"unknown attribution method {method!r}; choose one of {', '.join(METHODS)}")
    if baseline not in BASELINES:
        raise AttributionError(f"unknown baseline {baseline!r}; choose one of {', '.join(BASELINES)}")
    if not isinstance(token, (int, np.integer)) or not 0 <= token < len(token_ids):
        raise AttributionError(f"token index {token!r} is out of range: the prompt has {len(token_ids)} tokens")
    R = hero.config.n_routed
    if not isinstance(block, (int, np.integer)) or not 0 <= block < R:
        raise AttributionError(f"block index {block!r} is out of range: the model routes {R} blocks (0..{R - 1})")
    if not isinstance(n_steps, int) or not 2 <= n_steps <= 512:
        raise AttributionError(f"n_steps must be an integer between 2 and 512, got {n_steps!r}")


def _resolve_auto(method: str, quantized: bool, notices: list[str]) -> str:
    """The method "auto" stands for: ablation on a 4-bit backbone (said in a notice), integrated gradients
    otherwise (they may still fall back later, when they fail their completeness check)."""
    if method != "auto":
        return method
    if quantized:
        notices.append("4-bit backbone: using token ablation (no gradients needed)")
        return "ablation"
    return "integrated_gradients"


def _ablation_if_no_gradients(hero, chosen: str, quantized: bool, notices: list[str]) -> str:
    """Token ablation instead of integrated gradients whose 4-bit kernels lost autograd: their gradients would be
    silently zero. Call it after a no-grad forward pass: that pass is what makes bitsandbytes drop the path."""
    if chosen == "integrated_gradients" and quantized and not gradients_available(hero):
        notices.append("the 4-bit kernels on this device have no autograd path (bitsandbytes repacks CPU "
                       "weights for inference), so gradients would be silently zero: used token ablation")
        return "ablation"
    return chosen


def _input_embeddings(hero, input_ids: torch.Tensor, token: int) -> torch.Tensor:
    """Floating-point embeddings (1, token + 1, d) of the tokens up to ``token``: the model is causal, so later
    tokens cannot change this decision."""
    embeds = hero.model.get_input_embeddings()(input_ids[:, : token + 1]).detach()
    return embeds.to(embeds.dtype if embeds.dtype.is_floating_point else torch.float32)


@dataclass
class _Try:
    """One integrated-gradients try and its completeness gap."""

    baseline: str
    n_steps: int
    scores: np.ndarray
    delta: float  # captum's convergence delta: sum(scores) - change
    baseline_logit: float  # z(e0) of this try's baseline
    change: float  # z(e) - z(e0)

    @property
    def relative_gap(self) -> float:
        return abs(self.delta) / max(abs(self.change), 1e-12)

    @property
    def passed(self) -> bool:
        return completeness_passed(self.delta, self.change)

    def record(self) -> dict:
        """The entry of :attr:`Attribution.tries`."""
        return {"baseline": self.baseline, "n_steps": self.n_steps, "delta": self.delta, "change": self.change}


@dataclass
class _Scores:
    """What one method produced: the fields of :class:`Attribution` that depend on the method."""

    method: str
    scores: np.ndarray
    baseline_logit: float
    baseline: str
    delta: float | None = None
    n_steps: int | None = None
    passed: bool = True
    tries: list[dict] = field(default_factory=list)


def _ig_try(ig, f: Callable[[torch.Tensor], torch.Tensor], embeds: torch.Tensor, base: torch.Tensor, z: float, *,
            kind: str, n_steps: int, internal_batch_size: int) -> _Try:
    """One integrated-gradients run from the baseline ``base`` (named ``kind``) with ``n_steps`` steps.

    Non-finite scores raise RuntimeError: they explain nothing, and the caller falls back to ablation."""
    with torch.no_grad():
        z_base = float(f(base)[0])
    with torch.enable_grad():
        attr, conv = ig.attribute(embeds.clone().requires_grad_(True), baselines=base, n_steps=n_steps,
                                  internal_batch_size=internal_batch_size, return_convergence_delta=True)
    scores = attr.detach().float().sum(-1)[0].cpu().double().numpy()
    if not np.all(np.isfinite(scores)):
        raise RuntimeError("non-finite gradients")
    delta = float(conv.detach().float().reshape(-1)[0])
    return _Try(baseline=kind, n_steps=n_steps, scores=scores, delta=delta, baseline_logit=z_base, change=z - z_base)


def _ig_plan(baseline: str, n_steps: int, max_steps: int, adaptive: bool) -> tuple[list[int], list[str]]:
    """The step counts to try on the requested baseline, and the other baselines to turn to when they fail."""
    if not adaptive:
        return [n_steps], []
    return step_schedule(n_steps, max(n_steps, max_steps)), [other for other in BASELINES if other != baseline]


def _stalled(previous: _Try, latest: _Try) -> bool:
    """Whether doubling the steps failed to halve the gap.

    Quadrature error shrinks as the steps double; a gap from a decision flipping on the path does not, so more
    steps are then wasted."""
    return abs(latest.delta) > 0.5 * abs(previous.delta)


def _ig_tries(attempt: Callable[[str, int], _Try], baseline: str, schedule: list[int], others: list[str],
              progress: Progress | None) -> list[_Try]:
    """Integrated-gradients tries, in order, up to the first that passes its completeness check.

    The steps double along ``schedule`` on the requested baseline until the gap stalls or the schedule ends; then
    one try on the first other baseline (the path changes, so the flip may leave it) at the steps reached."""
    tries: list[_Try] = []
    for steps in schedule:
        tries.append(attempt(baseline, steps))
        if progress is not None:
            progress(len(tries), len(schedule) + len(others), "integrated-gradients tries")
        if tries[-1].passed:
            return tries
        if len(tries) >= 2 and _stalled(tries[-2], tries[-1]):
            break
    if others:  # the remaining steps of the schedule are dropped: the total shrinks to the tries now planned
        tries.append(attempt(others[0], tries[-1].n_steps))
        if progress is not None:
            progress(len(tries), len(tries) + len(others) - 1, "integrated-gradients tries")
    return tries


def _ig_notices(best: _Try, tries: list[_Try], baseline: str) -> list[str]:
    """What the user must know about a kept integrated-gradients result: that it comes from another baseline than
    asked, and that it failed its completeness check (then the scores are no explanation)."""
    notices = []
    if best.baseline != baseline:
        notices.append(f"the {baseline} baseline did not pass the completeness check; the {best.baseline} "
                       "baseline did better")
    if not best.passed:
        kinds = ", ".join(sorted({t.baseline for t in tries}))
        notices.append(
            f"integrated gradients failed on this decision: after {len(tries)} tries (up to "
            f"{max(t.n_steps for t in tries)} steps, baselines {kinds}) "
            f"the attributions still miss the change z(input) − z(baseline) = {best.change:+.4f} by {best.delta:+.4f}. "
            "A routed block below this one flips its hard decision on the path, a jump gradients cannot "
            "see: trust the exact a/b split, or use token ablation.")
    return notices


def _by_ablation(f: Callable[[torch.Tensor], torch.Tensor], embeds: torch.Tensor, base: torch.Tensor, *,
                 baseline: str, baseline_logit: float, batch_size: int, progress: Progress | None,
                 tries: list[dict] | None = None) -> _Scores:
    """Token ablation; ``tries`` keeps the failed integrated-gradients tries on record when it is their fallback."""
    scores = ablation_scores(f, embeds, base, batch_size=batch_size, progress=progress)
    return _Scores(method="ablation", scores=scores, baseline_logit=baseline_logit, baseline=baseline,
                   tries=tries or [])


def _by_integrated_gradients(ig, hero, f: Callable[[torch.Tensor], torch.Tensor], embeds: torch.Tensor,
                             base: torch.Tensor, z: float, *, method: str, baseline: str, n_steps: int,
                             max_steps: int, adaptive: bool, internal_batch_size: int, progress: Progress | None,
                             notices: list[str]) -> _Scores:
    """Integrated gradients, the try with the smallest relative gap kept; token ablation (with a notice) when they
    break down, or when "auto" was asked and even the best try misses its completeness check."""

    def attempt(kind: str, steps: int) -> _Try:
        b = base if kind == baseline else _baseline(hero, embeds, kind)
        return _ig_try(ig, f, embeds, b, z, kind=kind, n_steps=steps, internal_batch_size=internal_batch_size)

    schedule, others = _ig_plan(baseline, n_steps, max_steps, adaptive)
    tries: list[_Try] = []  # stays empty when a try breaks down: none of them is kept then
    try:
        tries = _ig_tries(attempt, baseline, schedule, others, progress)
    except RuntimeError as err:
        notices.append(f"integrated gradients failed ({err}); used token ablation instead")
    best = min(tries, key=lambda t: t.relative_gap) if tries else None  # the first of equals
    if best is not None and not best.passed and method == "auto":  # scores that miss their own check explain nothing
        notices.append(f"integrated gradients did not pass their completeness check on this decision (gap "
                       f"{best.delta:+.4f} against a change of {best.change:+.4f} after {len(tries)} tries): used "
                       "token ablation, which needs no gradients")
        best = None
    if best is None:
        return _by_ablation(f, embeds, base, baseline=baseline, baseline_logit=float(f(base)[0].detach()),
                            batch_size=internal_batch_size, progress=progress,
                            tries=[t.record() for t in tries])
    notices.extend(_ig_notices(best, tries, baseline))
    return _Scores(method="integrated_gradients", scores=best.scores, baseline_logit=best.baseline_logit,
                   baseline=best.baseline, delta=best.delta, n_steps=best.n_steps, passed=best.passed,
                   tries=[t.record() for t in tries])


def explain(hero, prompt: str, token: int, block: int, *, variant: str = "hero", tau: float | None = None,
            chat_template: bool = False, method: str = "auto", n_steps: int = 32, baseline: str = "pad",
            internal_batch_size: int = 16, max_tokens: int | None = None, adaptive: bool = True,
            max_steps: int = MAX_STEPS, progress: Progress | None = None) -> Attribution:
    """Attribute the gate logit at (``token``, routed block ``block``, 0-based) to the prompt's tokens.

    ``method="auto"`` uses integrated gradients when they pass their completeness check and token ablation
    otherwise (always on a 4-bit backbone), with one notice saying why. Why: on the trained checkpoints the
    gradients failed on most decisions above the first routed blocks (a hard decision upstream flips on the
    path), and "auto" must give an explanation that holds. An integrated-gradients run whose gradient is missing
    or not finite falls back to ablation with a notice. Tokenisation is exactly :meth:`HeroModel.trace`'s.

    Integrated gradients start at ``n_steps``; with ``adaptive`` they double the steps up to ``max_steps`` and
    then try the other baseline, stopping at the first try whose completeness gap passes
    (:func:`completeness_passed`). When none does, the try with the smallest relative gap is returned with
    ``passed=False`` and a notice that says the method failed on this decision. ``progress(done, total, what)``
    is called after every try (IG) or batch of tokens (ablation)."""
    from captum.attr import IntegratedGradients  # the optional "app" extra: without it no method runs

    tau = check_tau(hero.config.tau if tau is None else tau)
    enc = hero.encode([prompt], chat_template=chat_template, max_tokens=max_tokens)
    ids = enc.input_ids[0].tolist()
    _check(hero, ids, token, block, variant, method, baseline, n_steps)
    notices = list(enc.notices[0])
    quantized = bool(hero.backbone.quantization)
    chosen = _resolve_auto(method, quantized, notices)
    embeds = _input_embeddings(hero, enc.input_ids, token)
    base = _baseline(hero, embeds, baseline)
    f = gate_logit_function(hero, variant=variant, tau=tau, block=block, token=token)
    with torch.no_grad():
        z, z0 = float(f(embeds)[0]), float(f(base)[0])
    chosen = _ablation_if_no_gradients(hero, chosen, quantized, notices)  # after the no-grad pass, on purpose
    if chosen == "integrated_gradients":
        result = _by_integrated_gradients(
            IntegratedGradients(f), hero, f, embeds, base, z, method=method, baseline=baseline, n_steps=n_steps,
            max_steps=max_steps, adaptive=adaptive, internal_batch_size=internal_batch_size, progress=progress,
            notices=notices)
    else:
        result = _by_ablation(f, embeds, base, baseline=baseline, baseline_logit=z0, batch_size=internal_batch_size,
                              progress=progress)
    tokens = piece_texts(hero.tokenizer.decode, ids)[: token + 1]
    return Attribution(method=result.method, token=int(token), block=int(block), layer=hero.config.routed_layers[block],
                       tokens=tokens, token_ids=ids[: token + 1], scores=result.scores, gate_logit=z,
                       baseline_logit=result.baseline_logit, tau=tau, variant=variant, baseline=result.baseline,
                       delta=result.delta, n_steps=result.n_steps, notices=notices, passed=result.passed,
                       tries=result.tries)
