"""Wrap a Llama-family model's blocks for routing, PEFT-style, without touching its weights.

The only module that knows transformers' module names. For each routed block:

* ``post_attention_layernorm`` is wrapped by :class:`HiddenStateTap`, which hands its input hbar_j
  (the post-attention residual) to the current call;
* ``mlp`` is wrapped by :class:`RoutedFFN`, which receives u_j = LN_ffn(hbar_j), asks the router for
  the gate and runs the hard branch on gathered tokens:
  ``g >= tau: g * FFN(u)``; else ``(1 - g) * Adapter(u)``. The block adds hbar itself.

A forward pre-hook on the decoder stack starts a new :class:`~hero_core.call_state.ForwardPass` with the
call's padding mask. With no routing call active, or in the ``dense`` variant, every wrapper calls its
base layer unchanged, so the wrapped model computes exactly what the backbone does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn as nn

from .call_state import current_call

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    model_type = getattr(model.config, "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(f"model type {model_type!r} is not supported; HeRo Lens wraps "
                         f"{', '.join(SUPPORTED_MODEL_TYPES)} (Llama-style blocks with 'mlp' and "
                         f"'post_attention_layernorm')")
    return model.model.layers


class HiddenStateTap(nn.Module):
    """Wraps LN_ffn to hand its input hbar_j to the routed FFN of the same block."""

    def __init__(self, base_layer: nn.Module) -> None:
        super().__init__()
        self.base_layer = base_layer

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        call = current_call()
        if call is not None and call.variant != "dense":
            call.current.pending_hbar = hidden_states
        return self.base_layer(hidden_states)


class RoutedFFN(nn.Module):
    """Wraps a block's FFN; ``block`` is the routed-block index j (1-based). Holds no parameters of its own:
    the router and adapters come from the current call, so one backbone can serve several routers."""

    def __init__(self, base_layer: nn.Module, block: int) -> None:
        super().__init__()
        self.base_layer = base_layer
        self.block = block

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        call = current_call()
        if call is None or call.variant == "dense":
            return self.base_layer(u)
        fwd = call.current
        hbar, fwd.pending_hbar = fwd.pending_hbar, None
        if hbar is None:
            raise RuntimeError("routed FFN reached without its post-attention state; is the model wrapped twice?")
        router = call.router
        B, T, D = u.shape
        router_dtype = router.eta.dtype
        flat_u = u.reshape(B * T, D)
        flat_hbar = hbar.reshape(B * T, D).to(router_dtype)
        if self.block == 1:  # one new token per row (a decode step): the router's packed inference path
            fwd.path = router.new_path(B * T, call.variant, device=u.device, dtype=router_dtype, packed=T == 1,
                                       memory_read=call.memory_read)
        decision = router.decide(self.block, flat_hbar, fwd.path, call.variant)
        gate = decision.gate
        executed = gate >= call.tau  # (N,) bool
        if call.policy is not None:
            fwd.ffn_input, fwd.ffn_hbar = flat_u, flat_hbar
            executed, gate = call.policy(self.block, gate, fwd)
            fwd.ffn_input = fwd.ffn_hbar = None
        active = fwd.active.reshape(-1) if fwd.active is not None else None
        adapter = router.adapters[self.block - 1]
        scaled = router.config.branch_scaling == "paper"
        if call.straight_through and torch.is_grad_enabled():
            out = self._straight_through(flat_u, gate, executed, active, adapter, scaled)
        else:
            # gate None: the branches run unscaled (FFN(u) or Adapter(u)), as the model was trained.
            out = self._branch(flat_u, gate if scaled else None, executed, active, adapter)
        call.add_record(self.block, decision, executed, fwd.path)
        return out.view(B, T, D)

    def _branch(self, u: torch.Tensor, gate: torch.Tensor | None, executed: torch.Tensor,
                active: torch.Tensor | None, adapter: nn.Module) -> torch.Tensor:
        """Hard branch with real compute skipping: gather each branch's tokens, run it, scatter back.

        u: (N, D); gate (None: unscaled branches), executed, active: (N,). Padding tokens (active False)
        run neither branch. Writes go in place into one output buffer (zeroed only when padding rows must
        stay 0); when one branch takes every token it runs on ``u`` directly, without gather or scatter."""
        run_ffn = executed if active is None else executed & active
        idx_ffn = run_ffn.nonzero().squeeze(1)
        n_ffn = idx_ffn.numel()
        if n_ffn == u.shape[0]:  # every token executes: no gather needed
            ffn = self.base_layer(u)
            return ffn if gate is None else gate[:, None].to(u.dtype) * ffn
        adapter_dtype = adapter.w1.weight.dtype
        if n_ffn == 0 and active is None:  # every token takes the adapter
            skipped = adapter(u.to(adapter_dtype))
            return (skipped if gate is None else (1 - gate[:, None]) * skipped).to(u.dtype)
        out = torch.empty_like(u) if active is None else torch.zeros_like(u)
        if n_ffn:
            ffn = self.base_layer(u.index_select(0, idx_ffn))
            out.index_copy_(0, idx_ffn, ffn if gate is None else gate[idx_ffn, None].to(u.dtype) * ffn)
        run_adapter = ~executed if active is None else ~executed & active
        idx = run_adapter.nonzero().squeeze(1)
        if idx.numel():
            skipped = adapter(u.index_select(0, idx).to(adapter_dtype))
            if gate is not None:
                skipped = (1 - gate[idx, None]) * skipped
            out.index_copy_(0, idx, skipped.to(u.dtype))
        return out


    def _straight_through(self, u: torch.Tensor, gate: torch.Tensor, executed: torch.Tensor,
                          active: torch.Tensor | None, adapter: nn.Module, scaled: bool) -> torch.Tensor:
        """Training variant of the hard branch: same forward value, but g learns what the FFN is worth.

        With the paper's hard branch, a token whose gate fell below tau only ever sees the adapter, so
        nothing tells the router that the FFN would have helped; in our CPU-sized runs every gate then
        collapsed below tau together (distillation loss 1.5 -> 13 in 16 steps). Here both branches run on
        every token and ``(g - sg(g)) * sg(FFN(u) - Adapter(u))`` (value 0) is added, so
        d out / d g = FFN(u) - Adapter(u), the derivative of the soft mixture. No compute is saved in
        training; inference always uses :meth:`_branch`. With ``scaled`` False (unscaled branches) the forward
        value is FFN(u) or Adapter(u) as it will be at inference, and the gate's only gradient is this one."""
        g = gate[:, None].to(u.dtype)
        g_const = g.detach()
        ffn = self.base_layer(u)
        skip = adapter(u.to(adapter.w1.weight.dtype)).to(u.dtype)
        if scaled:
            hard = torch.where(executed[:, None], g_const * ffn, (1 - g_const) * skip)
        else:
            hard = torch.where(executed[:, None], ffn, skip)
        out = hard + (g - g_const) * (ffn - skip).detach()
        return out if active is None else out * active[:, None].to(u.dtype)


def _begin_pass_hook(module: nn.Module, args: tuple, kwargs: dict) -> None:
    call = current_call()
    if call is None:
        return
    input_ids = kwargs.get("input_ids", args[0] if args else None)
    embeds = kwargs.get("inputs_embeds")
    shape = tuple(input_ids.shape[:2]) if input_ids is not None else tuple(embeds.shape[:2])
    mask = kwargs.get("attention_mask")
    call.begin_pass(shape, mask if isinstance(mask, torch.Tensor) and mask.dim() == 2 else None)


def wrapped_layers(model: nn.Module) -> list[int] | None:
    """The layers :func:`inject` wrapped in ``model``, or None for a bare backbone."""
    layers = getattr(model, "_hero_routed_layers", None)
    return list(layers) if layers is not None else None


def inject(model: nn.Module, routed_layers: list[int]) -> None:
    """Wrap the routed blocks of ``model`` in place and freeze every backbone parameter."""
    if wrapped_layers(model) is not None:
        raise ValueError("this model is already wrapped for routing; load a fresh backbone")
    layers = decoder_layers(model)
    if routed_layers[-1] >= len(layers):
        raise ValueError(f"routed layer {routed_layers[-1]} does not exist: the backbone has {len(layers)} blocks")
    for p in model.parameters():
        p.requires_grad_(False)
    for j, index in enumerate(routed_layers, start=1):
        layer = layers[index]
        layer.post_attention_layernorm = HiddenStateTap(layer.post_attention_layernorm)
        layer.mlp = RoutedFFN(layer.mlp, block=j)
    model.model.register_forward_pre_hook(_begin_pass_hook, with_kwargs=True)
    model._hero_routed_layers = list(routed_layers)


def ffn_modules(model: nn.Module) -> list[nn.Module]:
    """The (unwrapped) FFN of every block, for accounting and baselines."""
    return [layer.mlp.base_layer if isinstance(layer.mlp, RoutedFFN) else layer.mlp for layer in decoder_layers(model)]


@contextlib.contextmanager
def unwrapped(model: nn.Module) -> Iterator[nn.Module]:
    """Temporarily take the routing wrappers and the pass hook off ``model``: inside, it *is* the bare
    backbone (same weight tensors). For benchmarks and exports; not for a model shared across threads."""
    layers = decoder_layers(model)
    swapped = []
    for layer in layers:
        if isinstance(layer.mlp, RoutedFFN):
            swapped.append((layer, layer.mlp, layer.post_attention_layernorm))
            layer.mlp = layer.mlp.base_layer
            layer.post_attention_layernorm = layer.post_attention_layernorm.base_layer
    ours = [k for k, hook in model.model._forward_pre_hooks.items() if hook is _begin_pass_hook]
    hooks = {store: {k: getattr(model.model, store).pop(k) for k in ours if k in getattr(model.model, store)}
             for store in ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs")}
    try:
        yield model
    finally:
        for layer, ffn, tap in swapped:
            layer.mlp, layer.post_attention_layernorm = ffn, tap
        for store, popped in hooks.items():
            getattr(model.model, store).update(popped)
