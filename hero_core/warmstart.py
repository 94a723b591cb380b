"""Adapter warm start: fit each block's adapter to its own FFN before end-to-end training.

A skipped token takes ``Adapter(u) = W_2 SiLU(W_1 u)`` instead of ``FFN(u)``. Started cold (W_2 = 0) the
adapter is a plain skip, and the router's first skips cost the full FFN output. Fitting every adapter by
least squares to its FFN on the inputs the dense model actually feeds it (local distillation) costs no
backward pass through the backbone: one dense forward to collect ``(u_j, FFN_j(u_j))`` pairs, then a
small regression per block. Measured on SmolLM2-135M: R^2 0.48-0.96 by block, about two minutes on one core.
"""

from __future__ import annotations

import logging
import time

import torch
import torch.nn.functional as F

from .inject import ffn_modules

log = logging.getLogger(__name__)


def collect_ffn_pairs(model: torch.nn.Module, blocks: torch.Tensor, routed_layers: list[int],
                      max_tokens: int) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """Run the dense model on ``blocks`` and keep, per routed layer, up to ``max_tokens`` FFN inputs/outputs."""
    ffns = ffn_modules(model)
    pairs: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {i: [] for i in routed_layers}
    hooks = []
    for index in routed_layers:
        def keep(module, args, output, index=index):
            pairs[index].append((args[0].detach().flatten(0, 1).float().cpu(),
                                 output.detach().flatten(0, 1).float().cpu()))
        hooks.append(ffns[index].register_forward_hook(keep))
    seen = 0
    try:
        with torch.no_grad():
            for row in range(len(blocks)):
                if seen >= max_tokens:
                    break
                batch = blocks[row: row + 1].to(next(model.parameters()).device)
                model(input_ids=batch, use_cache=False)  # no routing call active: the wrapped model is dense
                seen += batch.numel()
    finally:
        for hook in hooks:
            hook.remove()
    return {i: (torch.cat([u for u, _ in p])[:max_tokens], torch.cat([y for _, y in p])[:max_tokens])
            for i, p in pairs.items()}


def fit_adapter(adapter: torch.nn.Module, u: torch.Tensor, target: torch.Tensor, *, epochs: int = 6,
                batch: int = 512, lr: float = 3e-3, seed: int = 0) -> float:
    """Minimise ||Adapter(u) - FFN(u)||^2 by Adam; returns R^2 on the pairs (1 = perfect, 0 = plain skip)."""
    generator = torch.Generator().manual_seed(seed)
    params = [p for p in adapter.parameters()]
    device, dtype = params[0].device, params[0].dtype
    u, target = u.to(device, dtype), target.to(device, dtype)
    if not adapter.w2.weight.detach().any():  # W_2 starts at 0, which leaves W_1 without gradient
        torch.nn.init.normal_(adapter.w2.weight, std=1e-3, generator=generator)
    optimizer = torch.optim.Adam(params, lr=lr)
    steps = max(1, epochs * len(u) // batch)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    with torch.enable_grad():
        for _ in range(steps):
            rows = torch.randint(0, len(u), (batch,), generator=generator)
            loss = F.mse_loss(adapter(u[rows]), target[rows])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
    with torch.no_grad():
        residual = (adapter(u) - target).pow(2).sum()
        total = (target - target.mean(0)).pow(2).sum()
    return float(1.0 - residual / total.clamp_min(1e-12))


def warm_start_adapters(model: torch.nn.Module, router, blocks: torch.Tensor, *, max_tokens: int = 8192,
                        progress: bool = True) -> dict:
    """Fit every adapter of ``router`` to its FFN on dense-pass inputs; returns per-block R^2 and timing."""
    from tqdm import tqdm

    t0 = time.perf_counter()
    layers = router.config.routed_layers
    pairs = collect_ffn_pairs(model, blocks, layers, max_tokens)
    r2 = []
    for j, index in enumerate(tqdm(layers, desc="adapter warm start", disable=not progress)):
        u, y = pairs.pop(index)
        r2.append(round(fit_adapter(router.adapters[j], u, y, seed=j), 4))
    report = {"tokens": int(min(max_tokens, blocks.numel())), "r2_by_block": r2,
              "r2_median": float(torch.tensor(r2).median()), "seconds": round(time.perf_counter() - t0, 1)}
    log.info("adapter warm start: median R^2 %.3f in %.0f s", report["r2_median"], report["seconds"])
    return report
