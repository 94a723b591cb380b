"""One compiled router decision (block 2, one token) of the default checkpoint, timed hot (weights in cache) and
cold (a 64 MB buffer written before each call evicts them, as a decode step's 540 MB of backbone weights do), with
the four large matrices stored in bf16 (as at commit c289a86) and in fp32, twice each in turn.

Needs commit c289a86, where the change lived (since reverted): ``git checkout c289a86``.

    OMP_NUM_THREADS=1 .venv/bin/python docs/experiments/bf16-decode-weights/cold_decide.py
"""

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from hero_core import load_hero  # noqa: E402
from hero_core.core import packed_router  # noqa: E402
from hero_core.core.packed_router import _fused_arguments  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    router = load_hero("hero-10-r4", dtype="fp32").router
    hbar = torch.randn(1, router.config.d_model)
    evict = torch.empty(64 * 2**20 // 4)
    shipped = packed_router.stored_for_decode
    for storage in ("bf16", "fp32", "bf16", "fp32"):
        packed_router.stored_for_decode = shipped if storage == "bf16" else (lambda router, matrix: matrix)
        router.__dict__.pop("_inference_weights", None)
        path = router.new_path(1, "hero", device="cpu", dtype=torch.float32, packed=True)
        path.fused.decide(hbar, 1, *_fused_arguments(router, 1, path))
        path.hbar_prev, path.delta_prev, path.dist_prev = hbar, hbar, hbar[:, 0]
        path.p_hist = path.m_hist = hbar[:, 0].sigmoid()
        args = _fused_arguments(router, 2, path)
        for _ in range(100):
            path.fused.decide(hbar, 2, *args)
        started = time.perf_counter()
        for _ in range(2000):
            path.fused.decide(hbar, 2, *args)
        hot = (time.perf_counter() - started) / 2000
        cold = 0.0
        for _ in range(300):
            evict.add_(1.0)
            started = time.perf_counter()
            path.fused.decide(hbar, 2, *args)
            cold += time.perf_counter() - started
        print(f"{storage} weights: hot {hot * 1e6:.1f} us, cold {cold / 300 * 1e6:.1f} us per decision")


if __name__ == "__main__":
    main()
