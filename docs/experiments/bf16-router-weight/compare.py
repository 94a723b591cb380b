"""Beside a bf16 backbone, the compiled decode step reads the router's first layer in bf16. How far do the gates
and decisions move from the module path (the reference, router in fp32)? Greedy answers to the first prompts of the
answers suite with the default checkpoint in bf16, once per decode path, compared token by token while the texts
agree.

Needs commit 6b025c9, where the change lived (since reverted): ``git checkout 6b025c9``. On a later tree the
compiled step reads fp32 weights, so the comparison measures that instead.

    OMP_NUM_THREADS=1 python docs/experiments/bf16-router-weight/compare.py --prompts 24 --out compare.json
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
import torch


def answers(hero, rows, path: str, tokens: int) -> list[tuple[str, object]]:
    os.environ["HERO_DECODE_PATH"] = path
    return [hero.generate(r["prompt"], max_new_tokens=tokens, chat_template=True) for r in rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=24)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--checkpoint", default=None, help="default: the bundled default")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from hero_core import load_hero
    from hero_core.eval.answers.run import load_rows, select_rows

    hero = load_hero(args.checkpoint, dtype="bf16")
    rows = select_rows(load_rows(), args.prompts)
    reference, fused = answers(hero, rows, "module", args.tokens), answers(hero, rows, "fused", args.tokens)
    gate_diffs, flips, compared, same_text = [], 0, 0, 0
    for (text_ref, trace_ref), (text_new, trace_new) in zip(reference, fused):
        same_text += text_ref == text_new
        # the decode steps (the prompt's prefill takes the module path in both runs), while both runs have read
        # the same tokens
        n = next((i for i, (a, b) in enumerate(zip(trace_ref.tokens, trace_new.tokens)) if a != b),
                 min(len(trace_ref.tokens), len(trace_new.tokens)))
        start = trace_ref.n_prompt_tokens
        g_ref, g_new = trace_ref.gate[:, start:n], trace_new.gate[:, start:n]
        gate_diffs.append(np.abs(g_ref - g_new).ravel())
        flips += int(((g_ref >= trace_ref.tau) != (g_new >= trace_new.tau)).sum())
        compared += g_ref.size
    diffs = np.concatenate(gate_diffs)
    result = {"checkpoint": hero.checkpoint_name, "prompts": len(rows), "max_new_tokens": args.tokens,
              "same_answer_text": same_text, "decode_decisions_compared": compared, "decisions_flipped": flips,
              "gate_abs_diff": {"median": float(np.median(diffs)), "p99": float(np.quantile(diffs, 0.99)),
                                "max": float(diffs.max())}}
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
