"""The multi-process path users take on several GPUs, run here with two CPU processes under accelerate."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hero_core.method import checkpoint as ckpt

SCRIPT = """
import sys
from hero_core.method.model import HeroModel, fresh_router
from hero_core.method.tiny import tiny_backbone
from hero_core.train.train import train
from hero_core.train.train_config import TrainConfig
from hero_core.train.train_data import training_blocks, teacher_targets
backbone = tiny_backbone(seed=0)
hero = HeroModel(backbone, fresh_router(backbone, gate_bias_init=1.0), "training")
cfg = TrainConfig(out=sys.argv[1], steps=3, batch_size=4, seq_len=32, data_blocks=8, target_skip=0.3,
                  data_mix={"code": 1.0, "reasoning": 1.0}, dtype="fp32", warm_start=False, lr=1e-2, save_every=100)
if len(sys.argv) > 2:  # the parent fills the dense-teacher cache once, so the ranks only read it
    teacher_targets(hero, cfg, training_blocks(hero, cfg, cfg.data_blocks), progress=False)
else:
    train(cfg, hero, progress=False)
    from accelerate import PartialState
    state = PartialState(cpu=True)  # each rank says it ran and how many ranks there were
    open(f"{sys.argv[1]}.rank{state.process_index}", "w").write(str(state.num_processes))
"""


@pytest.mark.skipif(shutil.which("accelerate") is None and not (Path(sys.executable).parent / "accelerate").exists(),
                    reason="accelerate's launcher is not installed")
def test_two_cpu_processes_train_like_one(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    launcher = shutil.which("accelerate") or str(Path(sys.executable).parent / "accelerate")
    subprocess.run([sys.executable, str(script), str(tmp_path / "prep"), "prepare"], check=True, timeout=300)
    subprocess.run([sys.executable, str(script), str(tmp_path / "one")], check=True, timeout=300)
    # --multi_gpu starts one process per rank through torch.distributed (gloo on a CPU-only machine); "--cpu" alone
    # would start a single process and make the comparison trivial.
    subprocess.run([launcher, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                    "--mixed_precision", "no", "--dynamo_backend", "no", str(script), str(tmp_path / "two")],
                   check=True, timeout=600)
    ranks = sorted(tmp_path.glob("two.rank*"))
    assert [p.name for p in ranks] == ["two.rank0", "two.rank1"] and all(p.read_text() == "2" for p in ranks)
    one, two = ckpt.read_checkpoint(tmp_path / "one"), ckpt.read_checkpoint(tmp_path / "two")
    from hero_core.method.model import fresh_router
    from hero_core.method.tiny import tiny_backbone

    # the untrained router at the widths training gave it (sized to the backbone), before its three steps
    start = fresh_router(tiny_backbone(seed=0), gate_bias_init=1.0, head_hidden=one.config.head_hidden,
                         d_encoder=one.config.d_encoder).state_dict()
    moved = 0.0
    for key, value in one.state_dict.items():
        # Each rank takes half of every batch; the averaged gradient equals the full batch's, so after three
        # AdamW steps the weights agree up to float summation order (stored as float16).
        assert torch.allclose(value.float(), two.state_dict[key].float(), atol=2e-3), key
        moved = max(moved, float((value.float() - start[key].float()).abs().max()))
    assert moved > 1e-2  # training moved the weights far more than the tolerance: the agreement is not trivial
    assert one.training["steps_done"] == two.training["steps_done"] == 3
