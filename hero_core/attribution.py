"""Why did a token run (or skip) a block's FFN? Attribution of one gate logit to the input tokens.

The decision at routed block j for token t is ``g = sigmoid(a + b) >= tau`` (docs/method.md, Eq. 8). We explain the
gate logit ``z = a + b`` at (t, j) in two ways:

* **integrated gradients** (captum) with respect to the input embeddings e (T', d), summed over the
  embedding dimension per input token: ``attr_i = sum_d (e - e0)_{i,d} * mean_k dz/de_{i,d}(e0 + k/n (e - e0))``.
  Completeness: ``sum_i attr_i = z(e) - z(e0)`` up to the quadrature error, which captum reports as
  ``delta``. The hard branches of the blocks before j are step functions of their gates: when one of
  them flips on the path from the baseline e0 to e, z jumps there and the gradient does not see the
  jump, so ``delta`` grows. It is shown with every result. The first routed block (no hard branch
  upstream) always satisfies completeness.
* **token ablation** (captum ``FeatureAblation``): replace one token's embedding by the baseline's and
  take ``z(e) - z(e with token i ablated)``. Needs no gradient: the method for 4-bit (NF4) backbones,
  whose bitsandbytes kernels may drop the autograd path on CPU, or when gradients are switched off.

Two facts keep it cheap. The model is causal, so z at token t depends on tokens 0..t only: the input
is cut after t (exactly the same z). And z is known once block j has decided: a subclass of
:class:`~hero_core.routing.RoutingCall` captures ``a + b`` with its graph and stops the forward pass
there, so the blocks above j are never run.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from .config import check_tau, check_variant
from .routing import RoutingCall

METHODS = ("auto", "integrated_gradients", "ablation")
BASELINES = ("pad", "zeros")  # default first: the pad embedding avoids RMSNorm's steep region near 0


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


def explain(hero, prompt: str, token: int, block: int, *, variant: str = "hero", tau: float | None = None,
            chat_template: bool = False, method: str = "auto", n_steps: int = 32, baseline: str = "pad",
            internal_batch_size: int = 16, max_tokens: int | None = None) -> Attribution:
    """Attribute the gate logit at (``token``, routed block ``block``, 0-based) to the prompt's tokens.

    ``method="auto"`` uses integrated gradients, except on a 4-bit backbone, where it uses token
    ablation. An integrated-gradients run whose gradient is missing or not finite falls back to
    ablation with a notice. Tokenisation is exactly :meth:`HeroModel.trace`'s."""
    from captum.attr import FeatureAblation, IntegratedGradients

    tau = check_tau(hero.config.tau if tau is None else tau)
    enc = hero.encode([prompt], chat_template=chat_template, max_tokens=max_tokens)
    ids = enc.input_ids[0].tolist()
    _check(hero, ids, token, block, variant, method, baseline, n_steps)
    notices = list(enc.notices[0])
    quantized = bool(hero.backbone.quantization)
    chosen = method
    if method == "auto":
        chosen = "ablation" if quantized else "integrated_gradients"
        if quantized:
            notices.append("4-bit backbone: using token ablation (no gradients needed)")

    input_ids = enc.input_ids[:, : token + 1]  # causal: later tokens cannot change this decision
    embeds = hero.model.get_input_embeddings()(input_ids).detach()
    dtype = embeds.dtype if embeds.dtype.is_floating_point else torch.float32
    embeds = embeds.to(dtype)
    base = _baseline(hero, embeds, baseline)
    f = gate_logit_function(hero, variant=variant, tau=tau, block=block, token=token)
    with torch.no_grad():
        z = float(f(embeds)[0])
        z0 = float(f(base)[0])

    scores, delta = None, None
    if chosen == "integrated_gradients" and quantized and not gradients_available(hero):
        notices.append("the 4-bit kernels on this device have no autograd path (bitsandbytes repacks CPU "
                       "weights for inference), so gradients would be silently zero: used token ablation")
        chosen = "ablation"
    if chosen == "integrated_gradients":
        try:
            with torch.enable_grad():
                attr, conv = IntegratedGradients(f).attribute(
                    embeds.clone().requires_grad_(True), baselines=base, n_steps=n_steps,
                    internal_batch_size=internal_batch_size, return_convergence_delta=True)
            scores = attr.detach().float().sum(-1)[0].cpu().double().numpy()
            delta = float(conv.detach().float().reshape(-1)[0])
            if not np.all(np.isfinite(scores)):
                raise RuntimeError("non-finite gradients")
        except RuntimeError as err:
            notices.append(f"integrated gradients failed ({err}); used token ablation instead")
            chosen, scores, delta = "ablation", None, None
    if chosen == "ablation":
        mask = torch.arange(token + 1, device=embeds.device).view(1, -1, 1)  # one feature per token
        with torch.no_grad():
            attr = FeatureAblation(f).attribute(embeds, baselines=base, feature_mask=mask,
                                                perturbations_per_eval=internal_batch_size)
        scores = attr.float()[0, :, 0].cpu().double().numpy()

    tokens = [hero.tokenizer.decode([i]) for i in ids[: token + 1]]
    return Attribution(method=chosen, token=int(token), block=int(block), layer=hero.config.routed_layers[block],
                       tokens=tokens, token_ids=ids[: token + 1], scores=scores, gate_logit=z, baseline_logit=z0,
                       tau=tau, variant=variant, baseline=baseline, delta=delta,
                       n_steps=n_steps if chosen == "integrated_gradients" else None, notices=notices)
