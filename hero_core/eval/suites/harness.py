"""The bridge to lm-evaluation-harness: run a local task YAML on a routed model (:func:`run_lm_eval`), and
write the project's own tasks into ``hero_core/lm_eval_tasks`` (:func:`write_reasoning_mc_task`) or a
BIG-bench task with the exact prompts scored here (:func:`write_bigbench_lm_eval_task`)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hero_core.eval.benchmarks import bigbench
from hero_core.eval.methods import HeroMethod
from hero_core.measures.accounting import ComputeTally, compact

LM_EVAL_TASKS_DIR = Path(__file__).parents[2] / "lm_eval_tasks"


def lm_eval_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("lm_eval") is not None


def _lm_eval_config(task_yaml: Path) -> dict[str, Any]:
    """Load a task YAML with lm-eval's loader and make relative ``data_files`` absolute (relative to the
    YAML), so a task directory works from any working directory."""
    try:  # lm-eval's own loader (handles !function and include:) moved within 0.4.x
        from lm_eval.tasks._yaml_loader import load_yaml

        config = dict(load_yaml(task_yaml))
    except ImportError:
        from lm_eval.utils import load_yaml_config

        config = dict(load_yaml_config(yaml_path=str(task_yaml)))
    kwargs = dict(config.get("dataset_kwargs") or {})
    files = kwargs.get("data_files")
    if files is not None:
        def fix(p: str) -> str:
            return p if os.path.isabs(p) else str((task_yaml.parent / p).resolve())

        kwargs["data_files"] = ({k: fix(v) if isinstance(v, str) else [fix(x) for x in v] for k, v in files.items()}
                                if isinstance(files, dict) else fix(files) if isinstance(files, str)
                                else [fix(x) for x in files])
        config["dataset_kwargs"] = kwargs
    return config


@contextlib.contextmanager
def _hub_offline() -> Iterator[None]:
    """datasets and huggingface_hub in offline mode while inside (what HF_DATASETS_OFFLINE=1 / HF_HUB_OFFLINE=1
    would do, read from the libraries' flags at call time), restored on exit."""
    import datasets.config
    import huggingface_hub.constants

    flags = [(datasets.config, "HF_HUB_OFFLINE"), (datasets.config, "HF_DATASETS_OFFLINE"),
             (huggingface_hub.constants, "HF_HUB_OFFLINE")]
    saved = [getattr(module, name) for module, name in flags]
    for module, name in flags:
        setattr(module, name, True)
    try:
        yield
    finally:
        for (module, name), value in zip(flags, saved):
            setattr(module, name, value)


def run_lm_eval(hero, task_yaml: str | os.PathLike, variant: str = "hero", *, tau: float | None = None,
                limit: int | None = None, batch_size: int = 8) -> dict[str, Any]:
    """Run an lm-evaluation-harness task (a local YAML) on ``hero`` routed as ``variant``.

    The wrapped HF model is handed to ``HFLM(pretrained=model, tokenizer=tok)`` and every forward lm-eval
    makes runs inside one routing call, so the harness scores the routed model; datasets and the Hub stay
    offline for the run (their offline flags, not the process environment). Returns the task's metrics and
    the compute over all scored tokens."""
    if not lm_eval_available():
        raise ValueError("lm-evaluation-harness is not installed: pip install lm-eval==0.4.13")
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM

    from hero_core.method.call_state import routing_call

    task_yaml = Path(task_yaml)
    if not task_yaml.is_file():
        raise ValueError(f"no lm-eval task file at {task_yaml}")
    config = _lm_eval_config(task_yaml)
    lm = HFLM(pretrained=hero.model, tokenizer=hero.tokenizer, batch_size=batch_size,
              device=str(hero.device), max_length=hero.max_tokens)
    method = HeroMethod(hero, variant, tau)
    call = hero.new_call(variant, tau, record=method.routed)
    with _hub_offline(), routing_call(call), torch.no_grad():
        output = simple_evaluate(model=lm, tasks=[config], limit=limit, log_samples=False, bootstrap_iters=0,
                                 verbosity="WARNING")
    tally = ComputeTally(method.profile, method.routed)
    for p in call.passes:
        B, T = p.shape
        active = p.active.cpu().numpy() if p.active is not None else np.ones((B, T), dtype=bool)
        executed = None
        if method.routed and p.records:
            executed = p.executed().view(-1, B, T).cpu().numpy()
        for b in range(B):
            keep = active[b]
            tally.add(None if executed is None else executed[:, b, keep], int(keep.sum()),
                      np.flatnonzero(keep))
    task_name = config.get("task", task_yaml.stem)
    metrics = {k: v for k, v in output["results"].get(task_name, {}).items() if isinstance(v, (int, float))}
    return {"task": task_name, "variant": method.name, "limit": limit, "metrics": metrics,
            "compute": compact(tally.summary())}


def write_reasoning_mc_task(directory: Path = LM_EVAL_TASKS_DIR, n: int = 40, seed: int = 7) -> Path:
    """Write the project's own small lm-eval multiple-choice task (YAML + JSONL) from held-out
    generated reasoning problems: four choices, the true answer and three near misses."""
    import random

    from hero_core.data.reasoning import reasoning_problems

    rng = random.Random(f"mc-{seed}")
    rows = []
    for p in reasoning_problems(n, "eval", seed=seed):
        if p.answer.lstrip("-").isdigit():
            value = int(p.answer)
            pool = sorted({value + d for d in (-10, -3, -2, -1, 1, 2, 3, 10)} - {value})
            wrong = [str(v) for v in rng.sample(pool, 3)]
        else:
            names = [w.strip(".,?") for w in p.question.split() if w[:1].isupper() and w.strip(".,?") != p.answer]
            names = [w for w in dict.fromkeys(names) if w not in ("Who", "The", "Then", "How", "Compute", "First")]
            wrong = names[:3]
            if len(wrong) < 3:
                continue
        choices = [p.answer] + wrong
        rng.shuffle(choices)
        rows.append({"question": p.question, "choices": choices, "label": choices.index(p.answer), "kind": p.kind})
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / "hero_reasoning_mc.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (directory / "hero_reasoning_mc.yaml").write_text(
        "# HeRo Lens' own multiple-choice task for lm-evaluation-harness: held-out generated reasoning\n"
        "# problems (hero_core.data.texts, eval split), the true answer among three near misses.\n"
        "# Regenerate with hero_core.eval.suites.harness.write_reasoning_mc_task(). data_files are relative to\n"
        "# this file; hero_core.eval.suites.harness.run_lm_eval makes them absolute.\n"
        "task: hero_reasoning_mc\n"
        "dataset_path: json\n"
        "dataset_kwargs:\n"
        "  data_files:\n"
        "    test: hero_reasoning_mc.jsonl\n"
        "test_split: test\n"
        "output_type: multiple_choice\n"
        "doc_to_text: \"Question: {{question}}\\nAnswer:\"\n"
        "doc_to_choice: \"{{choices}}\"\n"
        "doc_to_target: label\n"
        "metric_list:\n"
        "  - metric: acc\n"
        "    aggregation: mean\n"
        "    higher_is_better: true\n"
        "metadata:\n"
        "  version: 1.0\n", encoding="utf-8")
    return data


def write_bigbench_lm_eval_task(task: bigbench.MCTask, directory: Path, limit: int | None = None) -> Path:
    """Write a BIG-bench task as a local lm-eval task (YAML + JSONL) with the exact prompts used here,
    so the harness and :func:`score_multiple_choice` can be compared on the same examples."""
    directory.mkdir(parents=True, exist_ok=True)
    safe = task.name.replace("/", "__")
    rows = [{"context": e.context, "choices": list(e.choices), "label": e.target} for e in task.head(limit)]
    (directory / f"{safe}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    path = directory / f"{safe}.yaml"
    path.write_text(
        f"task: bigbench_{safe}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {safe}.jsonl\n"
        "test_split: test\noutput_type: multiple_choice\ndoc_to_text: \"{{context}}\"\n"
        "doc_to_choice: \"{{choices}}\"\ndoc_to_target: label\ntarget_delimiter: \"\"\n"
        "metric_list:\n  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n"
        "metadata:\n  version: 1.0\n", encoding="utf-8")
    return path
