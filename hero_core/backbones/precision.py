"""Choosing the compute precision: fp32, or bf16 where the hardware runs it faster.

``auto`` measures instead of guessing: CPUs with AVX-512 BF16 or AMX run bf16 matrix products several
times faster than fp32 (4.5x measured on this project's CI machines), older ones emulate bf16 and run
it slower. The probe times one FFN-sized product (512 x 576 by 576 x 1536) in both precisions, once per
process and device type.
"""

from __future__ import annotations

import functools
import time

import torch

from hero_core.choices import check_choice

DTYPES = ("auto", "fp32", "bf16")
# bf16 must win by this factor before ``auto`` takes it: its rounding costs a little quality.
AUTO_MIN_SPEEDUP = 1.5


def check_dtype(name: str) -> str:
    return check_choice("dtype", name, DTYPES)


def _best_time(fn, repeats: int = 5) -> float:
    fn()  # warm-up: first calls pick kernels
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


@functools.lru_cache(maxsize=4)
def bf16_speedup(device_type: str) -> float:
    """fp32 time / bf16 time of one FFN-sized matrix product on ``device_type`` (cached per process)."""
    if device_type == "cuda":
        return float("inf") if torch.cuda.is_bf16_supported() else 0.0
    if device_type != "cpu":
        return 0.0
    a32, b32 = torch.randn(512, 576), torch.randn(576, 1536)
    a16, b16 = a32.bfloat16(), b32.bfloat16()
    return _best_time(lambda: a32 @ b32) / _best_time(lambda: a16 @ b16)


def resolve_dtype(name: str, device: torch.device | str) -> torch.dtype:
    """The torch dtype for ``fp32`` / ``bf16`` / ``auto`` (bf16 only where it is measurably faster)."""
    check_dtype(name)
    if name == "fp32":
        return torch.float32
    if name == "bf16":
        return torch.bfloat16
    device_type = torch.device(device).type
    return torch.bfloat16 if bf16_speedup(device_type) >= AUTO_MIN_SPEEDUP else torch.float32
