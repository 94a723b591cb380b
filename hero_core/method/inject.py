"""Wrap a causal LM's blocks for routing, PEFT-style, without touching its weights.

The only module that works on transformers' modules; where each family keeps its parts is the table in
:mod:`hero_core.backbones.families`, which only this module reads. For each routed block:

* the norm that feeds the FFN (``post_attention_layernorm`` in Llama) is wrapped by :class:`HiddenStateTap`,
  which hands its input hbar_j (the residual the FFN branch starts from) to the current call; a family whose
  FFN reads the residual directly (OLMo 2) has no tap, and its FFN takes hbar_j = u_j itself;
* the FFN (``mlp``), together with a post-FFN norm where the family has one (Gemma 2/3, OLMo 2), is wrapped by
  :class:`RoutedFFN`, which receives u_j = LN_ffn(hbar_j), asks the router for the gate and runs the hard
  branch on gathered tokens: ``g >= tau: g * FFN(u)``; else ``(1 - g) * Adapter(u)``. The block adds hbar itself.

A forward pre-hook on the decoder stack starts a new :class:`~hero_core.method.call_state.ForwardPass` with the
call's padding mask. With no routing call active, or in the ``dense`` variant, every wrapper calls its
base layer unchanged, so the wrapped model computes exactly what the backbone does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn as nn

from hero_core.backbones.families import Family, family_of
from hero_core.method.call_state import current_call
from hero_core.method.packed_router import PackedPath, run_block_fused


def decoder_stack(model: nn.Module) -> nn.Module:
    """The module that runs the decoder blocks (its forward receives the call's input ids and mask)."""
    return getattr(model, family_of(model.config).stack)


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    return getattr(decoder_stack(model), family_of(model.config).layers)


class FFNWithOutputNorm(nn.Module):
    """A family's FFN followed by its post-FFN norm: the addend a skip replaces (see hero_core.backbones.families)."""

    def __init__(self, ffn: nn.Module, norm: nn.Module) -> None:
        super().__init__()
        self.ffn = ffn
        self.norm = norm

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        return self.norm(self.ffn(u))


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


def gated_silu_projections(ffn: nn.Module) -> tuple[nn.Linear, nn.Linear, nn.Linear] | None:
    """(gate, up, down) of an FFN computing ``down(SiLU(gate(u)) * up(u))`` with plain bias-free linear layers
    (Llama, Mistral, Qwen in full precision), which the compiled routed block can run itself; None for any other
    FFN (a quantized layer, a post-FFN norm, another activation), which keeps its module call."""
    parts = tuple(getattr(ffn, name, None) for name in ("gate_proj", "up_proj", "down_proj"))
    act = getattr(ffn, "act_fn", None)
    # transformers builds SiLU as its own SiLUActivation or as nn.SiLU, depending on the version
    silu = isinstance(act, nn.SiLU) or type(act).__name__ == "SiLUActivation"
    if silu and all(type(p) is nn.Linear and p.bias is None for p in parts):
        return parts
    return None


def decision_precision(router, u: torch.Tensor, *, tokens_per_row: int) -> contextlib.AbstractContextManager:
    """The precision a routed block's decision runs in at inference.

    A pass of many tokens per row (a prefill, a trace) on a bf16 backbone decides under bf16 autocast when the
    router was trained under bf16 autocast, as every bundled checkpoint was: its products then run in the
    precision the router learned with, at the backbone's bf16 speed rather than fp32's (the trade, measured:
    docs/experiments/bf16-prefill-profile). hbar still enters in the router's dtype, so the path features'
    differences of large residuals stay in fp32.
    Everything else keeps the fp32 reference: an fp32 backbone, training (its own autocast), and decode steps,
    whose packed and compiled paths are held to the module path's fp32 gates and cost latency, not arithmetic."""
    if tokens_per_row > 1 and not torch.is_grad_enabled() and prefill_decides_in_bf16(router, u.dtype):
        return torch.autocast(u.device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def prefill_decides_in_bf16(router, backbone_dtype: torch.dtype) -> bool:
    """Whether ``router`` on a backbone in ``backbone_dtype`` decides a prefill under bf16 autocast."""
    return backbone_dtype == torch.bfloat16 and router.trained_under_bf16_autocast()


class RoutedFFN(nn.Module):
    """Wraps a block's FFN; ``block`` is the routed-block index j (1-based). Holds no parameters of its own:
    the router and adapters come from the current call, so one backbone can serve several routers."""

    def __init__(self, base_layer: nn.Module, block: int, *, reads_hbar: bool = False) -> None:
        super().__init__()
        self.base_layer = base_layer
        self.block = block
        self.reads_hbar = reads_hbar  # no norm before the FFN: its input u is hbar itself
        # a plain tuple, not submodules: the layers stay registered once, under base_layer
        self._gated_silu = gated_silu_projections(base_layer)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        call = current_call()
        if call is None or call.variant == "dense":
            return self.base_layer(u)
        fwd = call.current
        hbar, fwd.pending_hbar = (u, None) if self.reads_hbar else (fwd.pending_hbar, None)
        if hbar is None:
            raise RuntimeError("routed FFN reached without its post-attention state; is the model wrapped twice?")
        router = call.router
        B, T, D = u.shape
        router_dtype = router.eta.dtype
        flat_u = u.reshape(B * T, D)
        if self.block == 1:  # one new token per row (a decode step): the router's packed inference path
            fwd.path = router.new_path(B * T, call.variant, device=u.device, dtype=router_dtype, packed=T == 1,
                                       memory_read=call.memory_read)
        adapter = router.adapters[self.block - 1]
        scaled = router.config.branch_scaling == "paper"
        if self._takes_fused_block(call, fwd):  # decision and branch in one compiled call, hbar cast there
            decision, executed, out = run_block_fused(
                router, self.block, flat_u, hbar.reshape(B * T, D), fwd.path, call.tau, scaled,
                [layer.weight for layer in self._gated_silu], [adapter.w1.weight, adapter.w2.weight])
            call.add_record(self.block, decision, executed, fwd.path)
            return out.view(B, T, D)
        flat_hbar = hbar.reshape(B * T, D).to(router_dtype)
        with decision_precision(router, u, tokens_per_row=T):
            decision = router.decide(self.block, flat_hbar, fwd.path, call.variant)
        gate = decision.gate
        executed = gate >= call.tau  # (N,) bool
        if call.policy is not None:
            fwd.ffn_input, fwd.ffn_hbar = flat_u, flat_hbar
            executed, gate = call.policy(self.block, gate, fwd)
            fwd.ffn_input = fwd.ffn_hbar = None
        active = fwd.active.reshape(-1) if fwd.active is not None else None
        if call.straight_through and torch.is_grad_enabled():
            out = self._straight_through(flat_u, gate, executed, active, adapter, scaled)
        else:
            # gate None: the branches run unscaled (FFN(u) or Adapter(u)), as the model was trained.
            out = self._branch(flat_u, gate if scaled else None, executed, active, adapter)
        call.add_record(self.block, decision, executed, fwd.path)
        return out.view(B, T, D)

    def _takes_fused_block(self, call, fwd) -> bool:
        """Whether this block of this step runs as one compiled call (decision and branch): a decode step on the
        compiled path, a gated SiLU FFN, and nothing the call adds around the branch (a policy, padding rows,
        the straight-through gradient)."""
        return (self._gated_silu is not None and isinstance(fwd.path, PackedPath) and fwd.path.fused is not None
                and call.policy is None and fwd.active is None and not torch.is_grad_enabled())

    def _branch(self, u: torch.Tensor, gate: torch.Tensor | None, executed: torch.Tensor,
                active: torch.Tensor | None, adapter: nn.Module) -> torch.Tensor:
        """Hard branch with real compute skipping: gather each branch's tokens, run it, scatter back.

        u: (N, D); gate (None: unscaled branches), executed, active: (N,). Padding tokens (active False)
        run neither branch. Writes go in place into one output buffer (zeroed only when padding rows must
        stay 0); when one branch takes every token it runs on ``u`` directly, without gather or scatter."""
        run_ffn = executed if active is None else executed & active
        # every token executes (always the case at one decode token whose FFN runs): no gather, and no index
        # list, whose nonzero() costs more than the check at one token
        if bool(run_ffn.all()):
            ffn = self.base_layer(u)
            return ffn if gate is None else gate[:, None].to(u.dtype) * ffn
        idx_ffn = run_ffn.nonzero().squeeze(1)
        n_ffn = idx_ffn.numel()
        adapter_dtype = adapter.w1.weight.dtype
        if n_ffn == 0 and active is None:  # every token takes the adapter
            skipped = adapter(u.to(adapter_dtype))
            return (skipped if gate is None else (1 - gate[:, None]) * skipped).to(u.dtype)
        out = torch.empty_like(u) if active is None else torch.zeros_like(u)
        if n_ffn:
            ffn = self.base_layer(u.index_select(0, idx_ffn))
            # .to: under autocast over an fp32 backbone the FFN's output is bf16 and the buffer fp32 (a no-op else)
            out.index_copy_(0, idx_ffn, (ffn if gate is None else gate[idx_ffn, None].to(u.dtype) * ffn).to(u.dtype))
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
    family = family_of(model.config)
    layers = decoder_layers(model)
    if routed_layers[-1] >= len(layers):
        raise ValueError(f"routed layer {routed_layers[-1]} does not exist: the backbone has {len(layers)} blocks")
    for p in model.parameters():
        p.requires_grad_(False)
    for j, index in enumerate(routed_layers, start=1):
        layer = layers[index]
        ffn = getattr(layer, family.ffn)
        if family.ffn_output_norm is not None:  # the norm moves inside the routed unit; its slot runs nothing
            ffn = FFNWithOutputNorm(ffn, getattr(layer, family.ffn_output_norm))
            setattr(layer, family.ffn_output_norm, nn.Identity())
        if family.ffn_input_norm is not None:
            setattr(layer, family.ffn_input_norm, HiddenStateTap(getattr(layer, family.ffn_input_norm)))
        setattr(layer, family.ffn, RoutedFFN(ffn, block=j, reads_hbar=family.ffn_input_norm is None))
    decoder_stack(model).register_forward_pre_hook(_begin_pass_hook, with_kwargs=True)
    model._hero_routed_layers = list(routed_layers)


def _routed_unit_base(family: Family, layer: nn.Module) -> nn.Module:
    unit = getattr(layer, family.ffn)
    if isinstance(unit, RoutedFFN):
        return unit.base_layer
    if family.ffn_output_norm is not None:  # a bare block: the same unit, built around its own modules
        return FFNWithOutputNorm(unit, getattr(layer, family.ffn_output_norm))
    return unit


def ffn_modules(model: nn.Module) -> list[nn.Module]:
    """Per block, the unit a skip replaces, unwrapped: the FFN, followed by the family's post-FFN norm where it
    has one. Called on u it gives the block's FFN addend, which the adapter stands in for (warm start, oracle)."""
    family = family_of(model.config)
    return [_routed_unit_base(family, layer) for layer in decoder_layers(model)]


def ffn_parameter_count(model: nn.Module) -> int:
    """Parameters of one block's FFN proper (its post-FFN norm left out; 4-bit weights at their real shape):
    what the paper's param skip counts per skipped block."""
    from hero_core.backbones.loading import count_parameters

    unit = ffn_modules(model)[0]
    return count_parameters(unit.ffn if isinstance(unit, FFNWithOutputNorm) else unit)


def matmul_parameter_count(model: nn.Module) -> int:
    """Weights of every matrix product in a dense token's forward (blocks and LM head; 4-bit at real shape).
    GPT-2 keeps its projections as transformers' ``Conv1D`` (a transposed linear layer), so they count too."""
    total = 0
    for module in model.modules():
        if isinstance(module, nn.Linear) or type(module).__name__ == "Conv1D":
            w = module.weight
            quant_state = getattr(w, "quant_state", None)
            total += int(quant_state.shape.numel()) if quant_state is not None else w.numel()
    return total


def routed_unit(model: nn.Module, index: int) -> nn.Module:
    """What routing runs or skips in block ``index`` of a wrapped model (:class:`RoutedFFN`): a forward hook on it
    sees u as input and the block's FFN addend as output, post-FFN norm included."""
    unit = getattr(decoder_layers(model)[index], family_of(model.config).ffn)
    if not isinstance(unit, RoutedFFN):
        raise ValueError(f"block {index} is not wrapped for routing")
    return unit


def hbar_site(model: nn.Module, index: int) -> nn.Module:
    """The module of block ``index`` whose first input is hbar: the FFN's norm, or the routed FFN where the
    family has no norm before it (a forward pre-hook on it sees hbar)."""
    family = family_of(model.config)
    layer = decoder_layers(model)[index]
    return getattr(layer, family.ffn_input_norm) if family.ffn_input_norm is not None else getattr(layer, family.ffn)


@contextlib.contextmanager
def unwrapped(model: nn.Module) -> Iterator[nn.Module]:
    """Temporarily take the routing wrappers and the pass hook off ``model``: inside, it *is* the bare
    backbone (same weight tensors). For benchmarks and exports; not for a model shared across threads."""
    family = family_of(model.config)
    swapped = []
    for layer in decoder_layers(model):
        routed = getattr(layer, family.ffn)
        if not isinstance(routed, RoutedFFN):
            continue
        slots = {family.ffn: routed}
        ffn = routed.base_layer
        if isinstance(ffn, FFNWithOutputNorm):
            slots[family.ffn_output_norm] = getattr(layer, family.ffn_output_norm)
            setattr(layer, family.ffn_output_norm, ffn.norm)
            ffn = ffn.ffn
        setattr(layer, family.ffn, ffn)
        if family.ffn_input_norm is not None:
            tap = slots[family.ffn_input_norm] = getattr(layer, family.ffn_input_norm)
            setattr(layer, family.ffn_input_norm, tap.base_layer)
        swapped.append((layer, slots))
    stack = decoder_stack(model)
    ours = [k for k, hook in stack._forward_pre_hooks.items() if hook is _begin_pass_hook]
    hooks = {store: {k: getattr(stack, store).pop(k) for k in ours if k in getattr(stack, store)}
             for store in ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs")}
    try:
        yield model
    finally:
        for layer, slots in swapped:
            for name, module in slots.items():
                setattr(layer, name, module)
        for store, popped in hooks.items():
            getattr(stack, store).update(popped)
