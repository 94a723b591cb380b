"""The depth memory in training: its own learning rate (an AdamW parameter group) and what the training log
records of it each step. Measured why it needs both: docs/experiments/memory-diagnosis."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from hero_core.method.config import VARIANTS

if TYPE_CHECKING:
    from hero_core.train.train_config import TrainConfig

# The parameters that choose where the memory reads (and what it stores): their gradients are 1e-4..1e-2 of the
# heads' per unit of relative change, so at the shared learning rate Adam moves them too little to matter.
MEMORY_PARAMETERS = frozenset({"to_q.weight", "to_k.weight", "to_v.weight", "eta", "memory_log_scale"})


def param_groups(router: torch.nn.Module, cfg: TrainConfig) -> list[dict]:
    """Two AdamW groups: the memory's own parameters at ``memory_lr_scale`` x the rate, everything else at 1x."""
    named = list(router.named_parameters())
    return [{"params": [p for n, p in named if n not in MEMORY_PARAMETERS], "lr_scale": 1.0},
            {"params": [p for n, p in named if n in MEMORY_PARAMETERS], "lr_scale": cfg.memory_lr_scale}]


def memory_log_row(router, records: list) -> dict[str, float]:
    """What the step's memory did, for the training log: the mean normalised entropy of its reads (1 = uniform;
    rows with at least two entries to choose from), the range of rho and the softmax temperature."""
    if not VARIANTS[router.config.variant].memory_read or not records:
        return {}
    entropies = []
    for record in records[2:]:  # block j >= 3 reads >= 2 entries
        alpha = record.memory_attention.float().clamp_min(1e-12)
        entropies.append(float((-(alpha * alpha.log()).sum(1) / math.log(alpha.shape[1])).mean()))
    rho = router.forgetting().detach()
    row = {"memory_entropy": sum(entropies) / len(entropies) if entropies else float("nan"),
           "rho_min": float(rho.min()), "rho_max": float(rho.max())}
    scale = router.memory_scale()
    if scale is not None:
        row["memory_scale"] = float(scale.detach()) * math.sqrt(router.config.d_memory)  # x 1/sqrt(d_m)
    return row
