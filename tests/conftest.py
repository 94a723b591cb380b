import os

import pytest
import torch

# make test runs the suite in pytest-xdist workers (one per core here); each worker's torch takes its share of the
# cores: two 1-thread processes beat one 2-thread one on this project's 2-core machine.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
torch.set_num_threads(max(1, min(2, (os.cpu_count() or 1) // _WORKERS)))
# No background warm-up in the apps the tests start (app/components/warmup.py): it would compete with the tests that
# follow; test_app.py checks what it computes by calling it directly.
os.environ.setdefault("HERO_LENS_WARMUP", "0")


@pytest.fixture(scope="session")
def tiny():
    from hero_core.method.tiny import tiny_hero

    return tiny_hero(seed=0)


@pytest.fixture(scope="session")
def embedded():
    """The embedded SmolLM2-135M-Instruct with fresh routers whose gates are spread around tau."""
    from hero_core.backbones.loading import load_backbone
    from hero_core.method.model import HeroModel, fresh_router, spread_gates

    backbone = load_backbone(device="cpu")
    torch.manual_seed(0)
    router = spread_gates(fresh_router(backbone, gate_bias_init=0.0))
    return HeroModel(backbone, router, "test-random")


@pytest.fixture(scope="session")
def embedded_backbone_reference():
    """A second, never-wrapped copy of the embedded backbone."""
    from hero_core.backbones.loading import load_backbone

    return load_backbone(device="cpu")
