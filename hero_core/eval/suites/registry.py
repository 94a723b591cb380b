"""The evaluation suites, one registry entry each (:data:`SUITES`): name, run, scores, headline.

    ``main``       seven BIG-bench tasks fixed by the selection rule
                   (:func:`hero_core.eval.benchmarks.bigbench.select_tasks`, dense results only, stored in
                   ``hero_core/eval_tasks.json``): the headline Retain.
    ``extended``   every selected reasoning and code BIG-bench task (may overlap ``main``).
    ``humaneval``  pass@1, greedy, completions run in a subprocess (:mod:`hero_core.eval.benchmarks.humaneval`); chat
                   prompt style when the model has a chat template (``--humaneval-style``).
    ``reasoning``  exact match of generated answers ("The answer is X", else the last number) on
                   held-out generated problems (``reasoning.reasoning_problems``), three-shot.
    ``domains``    NLL, perplexity, top-1 agreement and KL(dense || routed) on held-out chat / code /
                   reasoning text, with param skip, net param skip, FLOP share saved, per-layer skip rates.

Adding a suite is one :class:`Suite` entry in :data:`SUITES`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hero_core.eval.benchmarks import bigbench, humaneval
from hero_core.eval.engine import run_texts
from hero_core.eval.methods import Method
from hero_core.eval.scoring import DEFAULT_BATCH_TOKENS, score_multiple_choice
from hero_core.measures.accounting import ComputeTally, compact
from hero_core.measures.metrics import pooled_perplexity_ratio

EVAL_TASKS_FILE = Path(__file__).parents[2] / "eval_tasks.json"
DEFAULT_DOMAIN_TOKENS = 512  # domain texts are cut here
REASONING_SHOTS = 3
REASONING_STOPS = ("\nQuestion:", "\n\n")


def load_eval_tasks(path: Path | None = None) -> dict[str, Any]:
    """The committed task selection (``hero_core/eval_tasks.json`` unless ``path`` is given)."""
    path = Path(path) if path is not None else EVAL_TASKS_FILE
    if not path.is_file():
        raise ValueError(f"no task selection at {path}; run `python -m hero_core eval --select-tasks` once "
                         f"(dense model) to fix the BIG-bench suites")
    return json.loads(path.read_text(encoding="utf-8"))


def evaluate_bigbench(method: Method, tasks: Sequence[str], limit: int | None, *, progress: bool = False,
                      batch_tokens: int = DEFAULT_BATCH_TOKENS) -> dict[str, Any]:
    """Accuracy of each BIG-bench task on its first ``limit`` examples, and compute over all of them."""
    bigbench.ensure_tasks(list(tasks))
    tally = ComputeTally(method.profile, method.routed)
    per_task = {}
    for name in tasks:
        task = bigbench.load_task(name)
        task_tally = ComputeTally(method.profile, method.routed)
        result = score_multiple_choice(method, task.head(limit), batch_tokens=batch_tokens, tally=task_tally,
                                       progress=progress, desc=f"{method.name} · {name}")
        result.pop("picks")
        result["compute"] = compact(task_tally.summary())
        per_task[name] = result
        tally.merge(task_tally)
    accuracies = [r["accuracy"] for r in per_task.values()]
    return {"tasks": per_task, "mean_accuracy": float(np.mean(accuracies)) if accuracies else None,
            "compute": tally.summary()}


def evaluate_humaneval(method: Method, limit: int | None, *, max_new_tokens: int = 300, style: str = "auto",
                       timeout_s: float = humaneval.DEFAULT_TIMEOUT_S, progress: bool = False,
                       keep_completions: bool = True) -> dict[str, Any]:
    """HumanEval pass@1 with greedy decoding. ``style`` is ``completion`` (raw prompt, the original
    protocol), ``chat`` (instruction + pre-filled code fence) or ``auto`` (chat when the tokenizer has
    a chat template); see :mod:`hero_core.eval.benchmarks.humaneval`."""
    from tqdm import tqdm

    if style == "auto":
        style = "chat" if getattr(method.tokenizer, "chat_template", None) else "completion"
    template = None
    if style == "chat":
        def template(text: str) -> str:
            return method.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                        add_generation_prompt=True)
    problems = humaneval.load_problems(limit)
    tally = ComputeTally(method.profile, method.routed)
    rows = []
    for problem in tqdm(problems, desc=f"{method.name} · humaneval", disable=not progress, leave=False):
        prompt = humaneval.build_prompt(problem, style, template)
        gen = method.generate(prompt, max_new_tokens, humaneval.stop_sequences(style))
        tally.add(gen.executed, gen.n_tokens)
        completion = humaneval.completion_from(gen.text, style)
        result = humaneval.check_completion(problem, completion, timeout_s=timeout_s)
        row = {"task_id": problem.task_id, "status": result.status, "detail": result.detail}
        if keep_completions:
            row["completion"] = completion
        rows.append(row)
    passed = sum(r["status"] == "passed" for r in rows)
    # per-problem 1/0 in problem order: kept when the problem rows (with their texts) are dropped, for the
    # bootstrap over problems of hero_core.eval.suites.retain
    grades = [float(r["status"] == "passed") for r in rows]
    return {"pass@1": passed / len(rows) if rows else None, "n": len(rows), "passed": passed, "style": style,
            "grades": grades, "compute": tally.summary(), "problems": rows}


_ANSWER = re.compile(r"[Tt]he answer is[:\s]*\$?\s*(-?[\d,]*\.?\d+|[A-Za-z][\w'-]*)")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def parse_answer(text: str) -> str | None:
    """The answer in generated text: 'The answer is X' (first occurrence), else the last number."""
    match = _ANSWER.search(text)
    if match:
        return match.group(1)
    numbers = _NUMBER.findall(text)
    return numbers[-1] if numbers else None


def normalize_answer(answer: str | None) -> str:
    if answer is None:
        return ""
    text = answer.strip().rstrip(".").replace(",", "").lower()
    try:
        value = float(text)
        return str(int(value)) if value == int(value) else str(value)
    except ValueError:
        return text


def answers_match(predicted: str | None, answer: str) -> bool:
    return normalize_answer(predicted) == normalize_answer(answer) and predicted is not None


def reasoning_exemplars(shots: int = REASONING_SHOTS) -> list[str]:
    """``shots`` worked *train*-split problems, cycling through the problem kinds (arithmetic story,
    expression, ordering) so each kind is shown once before any repeats."""
    from hero_core.data.reasoning import reasoning_problems

    pool = reasoning_problems(max(60, 10 * shots), "train", seed=12345)
    kinds = sorted({p.kind for p in pool})
    by_kind = {k: [p for p in pool if p.kind == k] for k in kinds}
    return [by_kind[kinds[i % len(kinds)]][i // len(kinds)].text for i in range(shots)]


def reasoning_prompt(question: str, shots: int = REASONING_SHOTS) -> str:
    """Few-shot prompt: ``shots`` worked train-split problems, then ``Question: ...\\nAnswer:``."""
    return "\n\n".join(reasoning_exemplars(shots) + [f"Question: {question}\nAnswer:"])


def evaluate_reasoning(method: Method, limit: int | None, *, shots: int = REASONING_SHOTS,
                       max_new_tokens: int = 96, progress: bool = False) -> dict[str, Any]:
    """Exact match of the generated answer on held-out generated problems (``reasoning.reasoning_problems``)."""
    from tqdm import tqdm

    from hero_core.data.reasoning import reasoning_problems

    problems = reasoning_problems(limit or 100, "eval")
    tally = ComputeTally(method.profile, method.routed)
    rows = []
    for problem in tqdm(problems, desc=f"{method.name} · reasoning", disable=not progress, leave=False):
        gen = method.generate(reasoning_prompt(problem.question, shots), max_new_tokens, REASONING_STOPS)
        tally.add(gen.executed, gen.n_tokens)
        predicted = parse_answer(gen.text)
        rows.append({"kind": problem.kind, "answer": problem.answer, "predicted": predicted,
                     "correct": answers_match(predicted, problem.answer), "generated": gen.text})
    correct = sum(r["correct"] for r in rows)
    by_kind: dict[str, list[bool]] = {}
    for r in rows:
        by_kind.setdefault(r["kind"], []).append(r["correct"])
    return {"exact_match": correct / len(rows) if rows else None, "n": len(rows), "correct": correct,
            "by_kind": {k: float(np.mean(v)) for k, v in by_kind.items()}, "compute": tally.summary(),
            "problems": rows}


def evaluate_domains(hero, methods: Sequence[Method], reference: Method, limit: int | None, *,
                     max_tokens: int = DEFAULT_DOMAIN_TOKENS, batch_size: int = 2, progress: bool = False,
                     domains: Sequence[str] = ("chat", "code", "reasoning")) -> dict[str, dict[str, Any]]:
    """Per domain and method: NLL, perplexity, top-1 agreement and KL(dense || routed), plus compute.

    Each batch of held-out texts is run once through ``reference`` (dense) and then every method
    (:func:`hero_core.eval.engine.run_texts`), so dense logits never need storing. Perplexity retention is the
    inverse of the pooled perplexity ratio. Returns ``{method: {domain: figures}}``."""
    from hero_core.data.texts import domain_texts

    out: dict[str, dict[str, Any]] = {m.name: {} for m in methods}
    for domain in domains:
        texts = domain_texts(domain, "eval", limit or 20, hero=hero)
        acc = {m.name: {"nll": 0.0, "nll_dense": 0.0, "kl": 0.0, "agree": 0.0, "n_pred": 0, "n_pos": 0,
                        "tally": ComputeTally(m.profile, m.routed)} for m in methods}
        for text in run_texts(hero, methods, texts, reference, max_tokens=max_tokens, batch_size=batch_size,
                              desc=f"domain {domain}", progress=progress, leave=False):
            for m in methods:
                run, a = text.runs[m.name], acc[m.name]
                a["tally"].add(run.executed, run.n_tokens, np.arange(run.n_tokens))
                a["nll"] += run.nll_sum
                a["nll_dense"] += run.dense_nll_sum
                a["kl"] += run.kl_sum
                a["agree"] += run.agree_sum
                a["n_pred"] += run.n_pred
                a["n_pos"] += run.n_tokens
        for m in methods:
            a = acc[m.name]
            nll = a["nll"] / max(a["n_pred"], 1)
            nll_dense = a["nll_dense"] / max(a["n_pred"], 1)
            out[m.name][domain] = {
                "texts": len(texts), "tokens": a["n_pos"], "nll": nll, "perplexity": math.exp(nll),
                "nll_dense": nll_dense, "perplexity_dense": math.exp(nll_dense),
                "perplexity_retention": 1.0 / pooled_perplexity_ratio(a["nll"], a["nll_dense"], a["n_pred"]),
                "kl_from_dense": a["kl"] / max(a["n_pos"], 1), "top1_agreement": a["agree"] / max(a["n_pos"], 1),
                "compute": a["tally"].summary()}
    return out


# == the registry ==================================================================================
@dataclass
class RunOptions:
    """What every suite may read, set once per :func:`hero_core.eval.evaluate` call."""

    hero: Any
    limit: int | None
    progress: bool = False
    selection: dict[str, Any] = field(default_factory=dict)  # the committed BIG-bench task selection
    humaneval_tokens: int = 300
    humaneval_style: str = "auto"
    reasoning_tokens: int = 96
    domain_tokens: int = DEFAULT_DOMAIN_TOKENS
    keep_samples: bool = True


@dataclass(frozen=True)
class Suite:
    """One suite. ``run(method, options) -> result``, or with ``joint`` ``run(methods, reference, options)
    -> {method name: result}`` (one pass over the data for every method); ``scores(result)`` are the
    per-task scores Retain compares with dense (None: no Retain); ``headline(result)`` the summary rows."""

    name: str
    run: Callable[..., Any]
    scores: Callable[[dict], dict[str, float]] | None
    headline: Callable[[dict], list[dict[str, Any]]]
    joint: bool = False
    uses_selection: bool = False  # reads the BIG-bench task selection (eval_tasks.json)


def _headline(suite: str, key: str, metric: str) -> Callable[[dict], list[dict[str, Any]]]:
    def rows(result: dict) -> list[dict[str, Any]]:
        return [{"suite": suite, "score": result.get(key), "metric": metric, "retain": result.get("retain"),
                 **compact(result["compute"])}]
    return rows


def _single(key: str, label: str) -> Callable[[dict], dict[str, float]]:
    return lambda result: {label: result[key]} if result[key] is not None else {}


def _task_accuracies(result: dict) -> dict[str, float]:
    return {t: r["accuracy"] for t, r in result["tasks"].items()}


def _domain_rows(result: dict) -> list[dict[str, Any]]:
    return [{"suite": f"domain:{domain}", "score": r["perplexity"], "metric": "perplexity",
             "retain": 100.0 * r["perplexity_retention"], "top1_agreement": r["top1_agreement"],
             "kl_from_dense": r["kl_from_dense"], **compact(r["compute"])} for domain, r in result.items()]


def _bigbench_suite(name: str) -> Suite:
    return Suite(name, lambda m, o: evaluate_bigbench(m, o.selection[name], o.limit, progress=o.progress),
                 _task_accuracies, _headline(name, "mean_accuracy", "mean accuracy"), uses_selection=True)


SUITES: dict[str, Suite] = {s.name: s for s in (
    _bigbench_suite("main"),
    _bigbench_suite("extended"),
    Suite("humaneval",
          lambda m, o: evaluate_humaneval(m, o.limit, max_new_tokens=o.humaneval_tokens, style=o.humaneval_style,
                                          progress=o.progress, keep_completions=o.keep_samples),
          _single("pass@1", "humaneval"), _headline("humaneval", "pass@1", "pass@1")),
    Suite("reasoning", lambda m, o: evaluate_reasoning(m, o.limit, max_new_tokens=o.reasoning_tokens,
                                                       progress=o.progress),
          _single("exact_match", "reasoning"), _headline("reasoning", "exact_match", "exact match")),
    # perplexity retention exp(nll_dense - nll) is reported per domain instead of a Retain
    Suite("domains", lambda ms, ref, o: evaluate_domains(o.hero, ms, ref, o.limit, max_tokens=o.domain_tokens,
                                                         progress=o.progress),
          None, _domain_rows, joint=True),
)}
