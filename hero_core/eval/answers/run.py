"""The answers suite: does routing keep the model's *answers*, not only its perplexity?

Prompts with checkable answers (``answers.jsonl``, written by :mod:`hero_core.eval.answers.prompts`) are
answered greedily with the chat template on, by the dense model and by each routed method
(:func:`run_answers`); each answer is checked (:func:`check_answer`) and :func:`answers_kept` reports the
share of the prompts dense answers correctly that a method also answers correctly, with a 95 % bootstrap
interval over those prompts, per category and overall.

Check types (a row's ``check``):

    contains_any  {"answers": [...]}: one accepted answer occurs as a whole word or phrase (any case)
    integer       {"value": N}: the stated number equals N: "the answer is X" if the text says so, else the
                  number after the last "=" (chat answers often restate "2 + 50 = 52" and then ramble
                  on about the operands), else the last number (the reasoning suite's rule)
    humaneval     {"task_id": ...}: HumanEval's own tests pass on prompt + the chat-style completion
                  (run in a subprocess by :mod:`hero_core.eval.benchmarks.humaneval`)
    one_word      exactly one word (markup and punctuation aside); with "answers", one of them
    uppercase     letters, none lower case; with "answers", one of them occurs
    lowercase     letters, none upper case; with "answers", one of them occurs
    yes_no        {"value": "yes" | "no"}: the answer starts with that word
    comma_list    {"count": k}: the first line (after a colon, if any) is exactly k short comma-separated
                  distinct items; with "answers", each item holds one of them

Routing cost is reported twice per answer: over the **answer tokens** only (the generated tokens the
model processed: every generated token but the last, which is never fed back; the prefill pass that
predicts the first answer token is prompt work), and over every token of the call (system prompt and
chat template included), both from :meth:`hero_core.trace.RoutingTrace.compute`.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hero_core.choices import check_distinct
from hero_core.eval.answers.references import ReferencePolicy
from hero_core.eval.benchmarks import humaneval
from hero_core.eval.suites.registry import answers_match, parse_answer
from hero_core.measures.metrics import bootstrap_ci
from hero_core.method.config import check_variant
from hero_core.method.trace import RoutingTrace

ANSWERS_FILE = Path(__file__).with_name("answers.jsonl")
CHECK_TYPES = ("contains_any", "integer", "humaneval", "one_word", "uppercase", "lowercase", "yes_no", "comma_list")
ROW_FIELDS = ("id", "category", "prompt", "check", "max_new_tokens")
REFERENCE = "dense"
COLUMNS = ("id", "category", "method", "checkpoint", "variant", "tau", "correct", "text", "n_prompt_tokens",
           "n_answer_tokens", "n_tokens", "answer_param_skip", "answer_net_param_skip", "param_skip",
           "net_param_skip")
_AFTER_EQUALS = re.compile(r"=\s*\$?\s*(-?\d[\d,]*(?:\.\d+)?)")
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
_LIST_ITEM_WORDS = 4  # a comma-separated "item" longer than this is a sentence, not a list entry


# == the data =====================================================================================
def load_rows(path: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """The rows of an answers JSONL file (``answers.jsonl`` by default), each checked for its fields."""
    source = Path(path) if path is not None else ANSWERS_FILE
    if not source.is_file():
        raise ValueError(f"no answers file at {source}; run `python -m hero_core.eval.answers.prompts` to write it")
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    check_rows(rows)
    return rows


def check_rows(rows: Sequence[Mapping[str, Any]]) -> None:
    """ValueError unless ``rows`` is non-empty, every row has the fields and a known check, ids are distinct."""
    if not rows:
        raise ValueError("no answers rows given")
    for row in rows:
        missing = [f for f in ROW_FIELDS if f not in row]
        if missing:
            raise ValueError(f"answers row {row.get('id', '?')!r} lacks {missing}")
        _check_type(row)
    ids = [row["id"] for row in rows]
    if len(set(ids)) != len(ids):
        raise ValueError("answers rows must have distinct ids")


def select_rows(rows: Sequence[Mapping[str, Any]], limit: int | None) -> list[Mapping[str, Any]]:
    """The first ``limit`` rows taking each category in turn (so a quick run still touches every category),
    in file order; all rows for None."""
    if limit is None:
        return list(rows)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")
    queues: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        queues.setdefault(row["category"], []).append(row)
    picked: list[Mapping[str, Any]] = []
    while len(picked) < min(limit, len(rows)):
        for queue in queues.values():
            if queue and len(picked) < limit:
                picked.append(queue.pop(0))
    chosen = {id(r) for r in picked}
    return [r for r in rows if id(r) in chosen]


# == checking =====================================================================================
def check_answer(row: Mapping[str, Any], text: str) -> bool:
    """Whether ``text`` (the model's answer, without the prompt) passes the row's check (see the module
    docstring). Depends on nothing but its arguments (a ``humaneval`` check runs the task's tests in a
    subprocess)."""
    kind = _check_type(row)
    check = row["check"]
    if kind == "contains_any":
        return _contains_any(text, check["answers"])
    if kind == "integer":
        return answers_match(parse_integer(text), str(int(check["value"])))
    if kind == "humaneval":
        problem = _problems().get(check["task_id"])
        if problem is None:
            raise ValueError(f"unknown HumanEval task {check['task_id']!r}")
        return humaneval.check_completion(problem, humaneval.completion_from(text, "chat")).passed
    if kind == "one_word":
        words = _WORD.findall(text)
        return len(words) == 1 and ("answers" not in check or _contains_any(words[0], check["answers"]))
    if kind in ("uppercase", "lowercase"):
        wrong_case = str.islower if kind == "uppercase" else str.isupper
        cased = any(ch.isalpha() for ch in text) and not any(wrong_case(ch) for ch in text)
        return cased and ("answers" not in check or _contains_any(text, check["answers"]))
    if kind == "yes_no":
        words = _WORD.findall(text)
        return bool(words) and words[0].lower() == str(check["value"]).lower()
    return _comma_list(text, int(check["count"]), check.get("answers"))


def parse_integer(text: str) -> str | None:
    """The number an answer states (see ``integer`` in the module docstring), as text; None if it has none."""
    if "answer is" not in text.lower():
        after_equals = _AFTER_EQUALS.findall(text)
        if after_equals:
            return after_equals[-1]
    return parse_answer(text)  # "The answer is X", else the last number


def _check_type(row: Mapping[str, Any]) -> str:
    check = row.get("check")
    kind = check.get("type") if isinstance(check, Mapping) else None
    if kind not in CHECK_TYPES:
        raise ValueError(f"answers row {row.get('id', '?')!r}: unknown check type {kind!r}; "
                         f"choose one of {', '.join(CHECK_TYPES)}")
    needs = {"contains_any": "answers", "integer": "value", "humaneval": "task_id", "yes_no": "value",
             "comma_list": "count"}.get(kind)
    if needs is not None and needs not in check:
        raise ValueError(f"answers row {row.get('id', '?')!r}: a {kind} check needs {needs!r}")
    return kind


def _contains_any(text: str, answers: Sequence[str]) -> bool:
    # whole words only: "red" must not match "covered", nor "8" match "18"
    low = text.lower()
    return any(re.search(r"(?<!\w)" + re.escape(a.lower()) + r"(?!\w)", low) for a in answers)


def _comma_list(text: str, count: int, pool: Sequence[str] | None) -> bool:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return False
    line = lines[0].rsplit(":", 1)[-1].strip().rstrip(".!")  # "Here are three: a, b, c." lists a, b, c
    items = [re.sub(r"^(and|or)\s+", "", item.strip(), flags=re.IGNORECASE).strip() for item in line.split(",")]
    if len(items) != count or any(not _WORD.findall(i) or len(_WORD.findall(i)) > _LIST_ITEM_WORDS for i in items):
        return False
    if len({i.lower() for i in items}) != count:
        return False
    return pool is None or all(_contains_any(item, pool) for item in items)


@functools.lru_cache(maxsize=1)
def _problems() -> dict[str, humaneval.HumanEvalProblem]:
    return {p.task_id: p for p in humaneval.load_problems()}


# == running ======================================================================================
def answer_cost(trace: RoutingTrace) -> dict[str, Any]:
    """Token counts and routing cost of one generation's trace: param skip and net param skip over the
    answer tokens (positions from ``trace.n_prompt_tokens`` on; NaN when there are none) and over all."""
    n_prompt = trace.n_prompt_tokens if trace.n_prompt_tokens is not None else trace.n_tokens
    figures = trace.compute()  # per token (T,), as RoutingTrace.param_skip averages them

    def mean(values: np.ndarray) -> float:
        return float(values.mean()) if len(values) else math.nan

    return {"n_prompt_tokens": int(n_prompt), "n_answer_tokens": int(trace.n_tokens - n_prompt),
            "n_tokens": int(trace.n_tokens),
            "answer_param_skip": mean(figures["param_skip"][n_prompt:]),
            "answer_net_param_skip": mean(figures["net_param_skip"][n_prompt:]),
            "param_skip": mean(figures["param_skip"]), "net_param_skip": mean(figures["net_param_skip"])}


@dataclass(frozen=True)
class _Run:
    name: str
    model: Any
    variant: str
    tau: float | None
    reference: ReferencePolicy | None = None  # a reference policy instead of the router's decisions

    @property
    def store_name(self) -> str:
        """The resume folder's key: a reference's skip rate is part of what its answers depend on."""
        return self.name if self.reference is None else f"{self.name}~{self.reference.key}"

    def policy(self, prompt_id: str) -> Callable | None:
        return None if self.reference is None else self.reference.policy_for(prompt_id)


def _runs(hero, methods_or_variants: Sequence[Any]) -> list[_Run]:
    """One run per item, dense first: a variant name runs on ``hero``; a
    :class:`~hero_core.eval.methods.HeroMethod` runs on its own model (another checkpoint, say); a
    reference of :mod:`hero_core.eval.answers.references` runs its policy on its model."""
    runs = [_Run(REFERENCE, hero, "dense", None)]
    for item in methods_or_variants:
        if isinstance(item, str):
            run = _Run(item, hero, check_variant(item), None)
        elif isinstance(item, ReferencePolicy):
            run = _Run(item.name, item.hero, "hero", None, reference=item)
        elif all(hasattr(item, a) for a in ("hero", "variant", "tau", "name")):
            if getattr(item, "policy", None) is not None:
                raise ValueError(f"method {item.name!r} has a routing policy; the answers suite takes a reference "
                                 "policy as a reference of hero_core.eval.answers.references")
            run = _Run(item.name, item.hero, check_variant(item.variant), item.tau)
        else:
            raise ValueError(f"expected a variant name, a HeroMethod or a reference policy, "
                             f"got {type(item).__name__}")
        if run.name != REFERENCE:  # dense always runs once, as the reference
            runs.append(run)
    check_distinct("method names", [r.name for r in runs])
    return runs


def _generate(model, row: Mapping[str, Any], variant: str, tau: float | None, n: int,
              policy=None) -> tuple[str, RoutingTrace]:
    stop = tuple(row.get("stop", ()))
    prefix = row.get("assistant_prefix", "")
    if not prefix:
        return model.generate(row["prompt"], max_new_tokens=n, variant=variant, tau=tau, chat_template=True,
                              stop=stop, policy=policy)
    # A pre-filled assistant turn (code: an opening fence) cannot pass through chat_template=True, which ends
    # at the assistant header: the same template is applied here and the prefix appended, so the tokens are
    # those chat_template=True gives plus the prefix (counted as prompt).
    prompt = model.format_prompt(row["prompt"], chat_template=True) + prefix
    return model.generate(prompt, max_new_tokens=n, variant=variant, tau=tau, chat_template=False, stop=stop,
                          policy=policy)


def run_answers(hero, methods_or_variants: Sequence[Any], rows: Sequence[Mapping[str, Any]], *,
                max_new_tokens: int | None = None, progress: bool = False,
                resume_dir: Path | None = None) -> pd.DataFrame:
    """Greedy chat-template answers of the dense model and of each routed method to every row.

    ``methods_or_variants``: variant names (run on ``hero``) and/or HeroMethods (name, model, variant, tau);
    dense always runs as the reference, once. ``max_new_tokens`` caps each row's own ``max_new_tokens``
    (None: no cap). One frame row per (prompt, method), columns :data:`COLUMNS`. With ``resume_dir``, every
    answer is appended to a JSONL file per run there as soon as it is checked, and answers already there
    (same run, checkpoint, variant, tau, prompt and token cap) are read back instead of generated again: a
    run of several hours that is stopped loses at most one answer."""
    check_rows(rows)
    if max_new_tokens is not None and (isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int)
                                       or max_new_tokens < 1):
        raise ValueError(f"max_new_tokens must be a positive integer or None, got {max_new_tokens!r}")
    from tqdm import tqdm

    records = []
    for run in _runs(hero, methods_or_variants):
        name, model, variant, tau = run.name, run.model, run.variant, run.tau
        store = None
        if resume_dir:
            owner = store_owner(variant, model.backbone.name, model.checkpoint_name)
            store = AnswerStore(resume_dir, run.store_name, owner, variant, tau)
        for row in tqdm(rows, desc=f"{name} · answers", disable=not progress, leave=False):
            n = int(row["max_new_tokens"]) if max_new_tokens is None else min(int(row["max_new_tokens"]),
                                                                               max_new_tokens)
            record = store.get(row["id"], n) if store else None
            if record is None:
                text, trace = _generate(model, row, variant, tau, n, run.policy(row["id"]))
                record = {"id": row["id"], "category": row["category"], "method": name,
                          "checkpoint": model.checkpoint_name, "variant": variant, "tau": float(trace.tau),
                          "correct": check_answer(row, text), "text": text, **answer_cost(trace)}
                if store:
                    store.add(record, n)
            records.append(record)
    return pd.DataFrame.from_records(records, columns=list(COLUMNS))


def store_owner(variant: str, backbone: str, checkpoint: str) -> str:
    """Whose answers a store holds: the backbone for dense (its answers do not depend on any router, so every
    comparison on that backbone shares them), else the checkpoint."""
    return f"backbone={backbone}" if variant == "dense" else checkpoint


def seed_from_report(report: Mapping[str, Any], directory: Path, rows: Sequence[Mapping[str, Any]],
                     backbone: str) -> int:
    """Put the answers of an earlier report (its ``items``, with texts) into ``directory``'s stores, so a run
    with ``resume_dir=directory`` reuses them instead of generating them again: dense's, and each checkpoint's at
    its own tau, and each matched twin at the tau the report records for it (``config.matched``: a run whose
    calibration gives another tau stores under another key and generates them anew). Only prompts among ``rows``
    are taken, under the token cap they were generated with. Returns how many answers were seeded."""
    config = report.get("config", {})
    if config.get("backbone") != backbone:
        raise ValueError(f"the report was made on {config.get('backbone')!r}, not on {backbone!r}")
    if config.get("tau") is not None:
        raise ValueError("the report ran every checkpoint at one --tau; only own-tau reports can be reused")
    own = set(config.get("checkpoints", ()))
    twin_tau = {m["method"]: m["tau"] for m in config.get("matched", {}).values()}
    cap = config.get("answers_tokens")
    by_id = {row["id"]: row for row in rows}
    stores: dict[tuple[str, str, str, float | None], AnswerStore] = {}
    seeded = 0
    for item in report.get("items", ()):
        row = by_id.get(item.get("id"))
        method = item.get("method")
        reusable = method == REFERENCE or method in own or method in twin_tau
        if row is None or not reusable or item.get("text") is None:
            continue
        key = (method, store_owner(item["variant"], backbone, item["checkpoint"]), item["variant"],
               twin_tau.get(method))
        store = stores.setdefault(key, AnswerStore(directory, *key))
        n = int(row["max_new_tokens"]) if cap is None else min(int(row["max_new_tokens"]), int(cap))
        if store.get(item["id"], n) is None:
            store.add(item, n)
            seeded += 1
    return seeded


def stored_answers(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(token cap, record) of every answer in one store file; a line that does not parse (a write cut short) is
    left out, so that answer is generated again."""
    found = []
    if Path(path).is_file():
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            try:
                item = json.loads(line)
                record, cap = item["record"], int(item["max_new_tokens"])
                record["id"]  # noqa: B018  (a record without its prompt id cannot be reused)
            except (ValueError, KeyError, TypeError):
                continue
            found.append((cap, record))
    return found


class AnswerStore:
    """The answers of one run (method name, checkpoint, variant, requested tau) in ``<dir>/<key>.jsonl``, one
    line per answer with the token cap it was generated under. Lines that do not parse (a write cut short) are
    ignored and that answer is generated again."""

    def __init__(self, directory: Path, name: str, checkpoint: str, variant: str, tau: float | None) -> None:
        key = f"{name}__{checkpoint}__{variant}__{'own' if tau is None else f'{tau:.6g}'}"
        self.path = Path(directory) / (re.sub(r"[^A-Za-z0-9._@=-]+", "_", key) + ".jsonl")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.done = {(record["id"], n): record for n, record in stored_answers(self.path)}

    def get(self, prompt_id: str, max_new_tokens: int) -> dict[str, Any] | None:
        return self.done.get((prompt_id, max_new_tokens))

    def add(self, record: Mapping[str, Any], max_new_tokens: int) -> None:
        line = json.dumps({"max_new_tokens": max_new_tokens, "record": dict(record)}, default=float)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
        self.done[(record["id"], max_new_tokens)] = dict(record)


# == what a method keeps ==========================================================================
def answers_kept(frame: pd.DataFrame, method: str, *, reference: str = REFERENCE, seed: int = 0) -> dict[str, Any]:
    """Of the prompts ``reference`` (dense) answers correctly, the share ``method`` also answers correctly
    (``kept``, with its 95 % bootstrap interval ``kept_low``/``kept_high`` over those prompts; None when dense
    has none right), plus both accuracies, the answers the method gets right where dense does not
    (``gained``) and token-weighted param skip on answer tokens and on all tokens: ``{"overall": {...},
    "categories": {category: {...}}}``."""
    for name in (reference, method):
        if name not in set(frame["method"]):
            raise ValueError(f"no rows for method {name!r}; the frame has {sorted(set(frame['method']))}")
    ref = frame[frame["method"] == reference].set_index("id")
    own = frame[frame["method"] == method].set_index("id")
    if set(ref.index) != set(own.index) or not ref.index.is_unique or not own.index.is_unique:
        raise ValueError(f"{method!r} and {reference!r} must answer the same prompts, once each")
    joined = ref[["category", "correct"]].join(own[["correct", "n_answer_tokens", "answer_param_skip",
                                                    "n_tokens", "param_skip"]], lsuffix="_reference")
    return {"method": method, "reference": reference, "overall": _kept(joined, seed),
            "categories": {str(c): _kept(g, seed) for c, g in joined.groupby("category", sort=False)}}


def _kept(joined: pd.DataFrame, seed: int) -> dict[str, Any]:
    dense_ok = joined["correct_reference"].astype(bool).to_numpy()
    own_ok = joined["correct"].astype(bool).to_numpy()
    kept = own_ok[dense_ok].astype(np.float64)
    low, high = bootstrap_ci(kept, seed=seed) if len(kept) else (None, None)
    return {"n": len(joined), "dense_correct": int(dense_ok.sum()), "method_correct": int(own_ok.sum()),
            "dense_accuracy": float(dense_ok.mean()), "method_accuracy": float(own_ok.mean()),
            "kept": float(kept.mean()) if len(kept) else None, "kept_low": low, "kept_high": high,
            "gained": int((own_ok & ~dense_ok).sum()), "answer_tokens": int(joined["n_answer_tokens"].sum()),
            "answer_param_skip": _weighted(joined["answer_param_skip"], joined["n_answer_tokens"]),
            "param_skip": _weighted(joined["param_skip"], joined["n_tokens"])}


def _weighted(values: pd.Series, weights: pd.Series) -> float | None:
    """Token-weighted mean (answers without answer tokens weigh nothing); None when nothing weighs."""
    v, w = values.to_numpy(dtype=np.float64), weights.to_numpy(dtype=np.float64)
    keep = w > 0
    return float((v[keep] * w[keep]).sum() / w[keep].sum()) if keep.any() else None


def answers_report(frame: pd.DataFrame, *, reference: str = REFERENCE, keep_texts: bool = True,
                   seed: int = 0) -> dict[str, Any]:
    """JSON-ready: :func:`answers_kept` of every method but the reference, and the per-answer rows
    (without the answer texts when ``keep_texts`` is False; NaN written as null)."""
    methods = [m for m in dict.fromkeys(frame["method"]) if m != reference]
    items = frame if keep_texts else frame.drop(columns=["text"])
    records = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
               for r in items.to_dict("records")]
    return {"reference": reference, "kept": {m: answers_kept(frame, m, reference=reference, seed=seed)
                                             for m in methods}, "items": records}
