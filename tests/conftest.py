import os

import pytest
import torch

torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
# No background warm-up in the apps the tests start (app/components/warmup.py): it would compete with the tests that
# follow; test_app.py checks what it computes by calling it directly.
os.environ.setdefault("HERO_LENS_WARMUP", "0")


@pytest.fixture(scope="session")
def tiny():
    from hero_core.core.tiny import tiny_hero

    return tiny_hero(seed=0)


@pytest.fixture(scope="session")
def embedded():
    """The embedded SmolLM2-135M-Instruct with fresh routers whose gates are spread around tau."""
    from hero_core.core.backbones import load_backbone
    from hero_core.core.model import HeroModel, fresh_router, spread_gates

    backbone = load_backbone(device="cpu")
    torch.manual_seed(0)
    router = spread_gates(fresh_router(backbone, gate_bias_init=0.0))
    return HeroModel(backbone, router, "test-random")


@pytest.fixture(scope="session")
def embedded_backbone_reference():
    """A second, never-wrapped copy of the embedded backbone."""
    from hero_core.core.backbones import load_backbone

    return load_backbone(device="cpu")
