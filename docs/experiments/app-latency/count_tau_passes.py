"""How many forward passes Compare's matched tau takes per checkpoint on the app's default prompt.

    python docs/experiments/app-latency/count_tau_passes.py [--reference hero-10-r4] [local-10 hero-25 ...]

Loads the embedded backbone once, traces the reference checkpoint at its own tau, then matches each other
checkpoint's tau to that param skip, printing every pass the search makes (its taus and realised skips).
"""

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "app"))

from components.widgets import DEFAULT_EXAMPLE, EXAMPLES  # noqa: E402

from hero_core.backbones.loading import load_backbone  # noqa: E402
from hero_core.method import tau_search  # noqa: E402
from hero_core.method.model import load_checkpoint  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="*", default=["local-10", "hero-25", "local-25"])
    parser.add_argument("--reference", default="hero-10-r4")
    args = parser.parse_args()
    torch.set_num_threads(1)
    prompt = EXAMPLES[DEFAULT_EXAMPLE]
    backbone = load_backbone(device="cpu")
    reference = load_checkpoint(args.reference, backbone)
    target = reference.trace(prompt, variant=reference.config.variant, tau=reference.config.tau).param_skip
    passes = []
    measure = tau_search._skips_and_gates

    def counted(hero, input_ids, attention_mask, variant, taus, **kwargs):
        out = measure(hero, input_ids, attention_mask, variant, taus, **kwargs)
        passes.append(taus)
        print(f"    pass: tau {[round(t, 4) for t in taus]} -> param skip {[round(v, 4) for v in out[0]]}")
        return out

    tau_search._skips_and_gates = counted
    print(f"{args.reference} at its own tau on the default prompt: param skip {target:.4f}")
    for name in args.checkpoints:
        hero = load_checkpoint(name, backbone)
        enc = hero.encode([prompt])
        passes.clear()
        started = time.perf_counter()
        tau, realised = hero.tau_for_param_skip(enc.input_ids, enc.attention_mask, hero.config.variant, target)
        print(f"  {name}: tau {tau:.4f} realises {realised:.4f} in {len(passes)} passes "
              f"({time.perf_counter() - started:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
