"""Measuring one run of a study, at the tau that meets the study's param skip on its own calibration split:
held-out perplexity per domain (per-text NLL sums against dense), multiple-choice accuracy against dense on the
study's items, and the fixed references at the same skip (static pruning, random skipping, the oracle: the run's
own adapters, :mod:`hero_core.eval.baselines`).

Every run reads the same texts and items in the same order (the paired bootstrap relies on it): the built-in
domains' eval split, or the held-out split of ``--data`` by hash (hero_core.data.splits). Each measurement is
stored as soon as it is done (``<run>.ppl.json``, ``<run>.refs.json``, ``<run>.mc.json`` under the study's
measures folder) with the settings it was taken at, and reused while they match.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from hero_core.eval.study.stats import TextSums

REFERENCES = ("static", "random", "oracle")  # named as the frontier names them (hero_core.words.reference_labels)
# What a study stored two of them as before it used the frontier's names (docs/seeds/): read, never written.
OLD_REFERENCE_NAMES = {"static_pruning": "static", "random_skip": "random"}
CALIBRATION_BLOCKS, CALIBRATION_LEN = 8, 128


def store_file(store: Path, name: str, kind: str) -> Path:
    return store / f"{name.replace('/', '__')}.{kind}.json"


def stored(path: Path, settings: dict) -> dict | None:
    """The measurement at ``path`` when it was taken at ``settings``; None otherwise (or when there is none)."""
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if data.get("settings") == settings else None


def stored_references(path: Path, settings: dict) -> dict | None:
    """:func:`stored` for a run's references, one stored under the old names read under today's (its settings
    too), so a measurement taken before the rename is reused, not taken again."""
    if not path.is_file():
        return None
    data = with_reference_names(json.loads(path.read_text(encoding="utf-8")))
    return data if data.get("settings") == settings else None


def with_reference_names(data: dict) -> dict:
    """``data`` (a run's stored references, or a study report's reference summary) with every reference stored
    under an :data:`OLD_REFERENCE_NAMES` name renamed: the keys of its ``references`` and ``calibration_skip`` and
    the list in its ``settings``."""
    def today(name: str) -> str:
        return OLD_REFERENCE_NAMES.get(name, name)

    out = dict(data)
    for key in ("references", "calibration_skip"):
        if isinstance(out.get(key), dict):
            out[key] = {today(name): value for name, value in out[key].items()}
    if isinstance(out.get("settings"), dict) and isinstance(out["settings"].get("references"), list):
        out["settings"] = out["settings"] | {"references": [today(name) for name in out["settings"]["references"]]}
    return out


def write(path: Path, data: dict) -> None:
    from hero_core.files import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data) + "\n")


def ppl_settings(spec) -> dict:
    """The settings a perplexity measurement depends on (the bundled store's files carry exactly these)."""
    out = {"limit": spec.limit, "max_tokens": spec.max_tokens, "target_skip": spec.skip} | matched_at(spec)
    return out | ({"data": spec.data} if spec.data else {})


def matched_at(spec) -> dict:
    """What a measurement's tau was matched at, where it is not the param skip (files measured before net matching
    existed carry no such key, and stay valid)."""
    return {"match": "net", "net_saving": spec.net_saving} if spec.match == "net" else {}


def skip_to_measure_at(hero, blocks, spec, *, routed: bool = True) -> float:
    """The param skip a run is measured at: the study's ``skip``, or under ``match="net"`` the skip that saves the
    study's net share of FLOPs on the calibration blocks (``routed``: the router charged; False for a reference,
    which computes none)."""
    if spec.match == "param":
        return spec.skip
    from hero_core.measures.accounting import ffns_for_net_saving

    positions = np.tile(np.arange(blocks.shape[1]), blocks.shape[0])
    ffns = ffns_for_net_saving(spec.net_saving, hero.profile, hero.config.n_routed, positions, routed=routed)
    return min(ffns * hero.profile.ffn_params / hero.profile.total_params, 0.95)


# -- the texts every run reads ------------------------------------------------------------------------------------
def data_items(path: str, tokenizer) -> dict[str, list[str]]:
    """The items of ``--data`` by split (hash of the text, as training splits them)."""
    from hero_core.data.corpus import chat_formatter, corpus_files, read_source
    from hero_core.data.splits import split_of

    out: dict[str, list[str]] = {"train": [], "eval": []}
    for file in corpus_files(path):
        for item in read_source(file, chat_formatter(tokenizer)).items:
            out[split_of(item)].append(item)
    return out


def held_out_texts(hero, spec) -> dict[str, list[str]]:
    """Held-out texts per domain: the built-in domains' eval split, or ``--data``'s held-out items ("data")."""
    if spec.data:
        texts = data_items(spec.data, hero.tokenizer)["eval"][: spec.limit]
        if not texts:
            raise ValueError(f"--data {spec.data!r} has no held-out items (one in five by hash): add text")
        return {"data": texts}
    from hero_core.data.texts import held_out_texts as built_in_held_out

    return built_in_held_out(spec.limit, hero)


def calibration(hero, spec):
    """Token blocks of the calibration split (train split, never the held-out texts) for tau and the references."""
    import torch

    if not spec.data:
        from hero_core.eval.calibration import calibration_blocks

        return calibration_blocks(hero)
    from hero_core.data.blocks import token_blocks

    blocks = token_blocks(data_items(spec.data, hero.tokenizer)["train"], hero.tokenizer, CALIBRATION_LEN)
    if not blocks:
        raise ValueError(f"--data {spec.data!r} is too short for one {CALIBRATION_LEN}-token calibration block")
    return torch.tensor(blocks[:CALIBRATION_BLOCKS], dtype=torch.long)


# -- the measurements -------------------------------------------------------------------------------------------
def _sums(hero, methods, texts: list[str], max_tokens: int, desc: str) -> dict[str, dict]:
    """Per method: per-text NLL sums against dense and the mean param skip on the held-out text."""
    from hero_core.eval.engine import run_texts
    from hero_core.eval.methods import HeroMethod
    from hero_core.measures.accounting import mean_param_skip, token_compute

    rows: dict[str, list] = {m.name: [] for m in methods}
    for text in run_texts(hero, methods, texts, HeroMethod(hero, "dense"), max_tokens=max_tokens, batch_size=2,
                          desc=desc):
        for m in methods:
            run = text.runs[m.name]
            skip = mean_param_skip(run.executed, m.profile)
            saved = token_compute(run.executed, m.profile)["flop_share_saved"].mean()
            rows[m.name].append((run.nll_sum, run.dense_nll_sum, run.n_pred, skip, saved))
    out = {}
    for name, cells in rows.items():
        nll, dense, n_pred, skip, saved = (np.asarray(col, dtype=float) for col in zip(*cells, strict=True))
        out[name] = {"param_skip": float(skip.mean()), "net_saved": float(saved.mean()),
                     **TextSums(nll, dense, n_pred).to_json()}
    return out


def measure_ppl(hero, texts: dict[str, list[str]], blocks, spec) -> dict:
    """The run at the tau meeting the study's skip on ``blocks``: per domain its param skip and per-text sums."""
    from hero_core.eval.methods import HeroMethod

    tau, realised = hero.tau_for_param_skip(blocks, None, hero.config.variant, skip_to_measure_at(hero, blocks, spec),
                                            iters=10)
    method = HeroMethod(hero, hero.config.variant, tau=tau, name="run")
    domains = {d: _sums(hero, [method], t, spec.max_tokens, f"{hero.checkpoint_name} {d}")["run"]
               for d, t in texts.items()}
    return {"tau": tau, "calibration_skip": realised, "domains": domains}


def measure_references(hero, texts: dict[str, list[str]], blocks, spec) -> dict:
    """Static pruning, random skipping and the oracle at the study's skip, each with the run's adapters."""
    from hero_core.eval.baselines import matched_policies, oracle_skipping, oracle_threshold_for_skip
    from hero_core.eval.methods import HeroMethod
    from hero_core.method.tau_search import realised_skip

    texts_of_blocks = [hero.tokenizer.decode(b) for b in blocks.tolist()]
    skip = skip_to_measure_at(hero, blocks, spec, routed=False)  # a reference computes no router
    fixed = matched_policies(hero, skip, texts_of_blocks)
    threshold, oracle_skip = oracle_threshold_for_skip(hero, blocks, skip)
    policies = {"static": fixed["static"], "random": fixed["random"], "oracle": oracle_skipping(hero, threshold)}
    methods = [HeroMethod(hero, "hero", name=name, policy=policy) for name, policy in policies.items()]
    calibration_skip = {"static": realised_skip(hero, blocks, "hero", 0.5, policy=policies["static"]),
                        "oracle": oracle_skip}
    per_domain = {d: _sums(hero, methods, t, spec.max_tokens, f"{hero.checkpoint_name} references {d}")
                  for d, t in texts.items()}
    return {"oracle_threshold": threshold, "calibration_skip": calibration_skip,
            "references": {name: {d: per_domain[d][name] for d in texts} for name in REFERENCES}}


# -- multiple choice ---------------------------------------------------------------------------------------------
def read_tasks(path: str) -> list:
    """``--tasks``: a JSONL of {question, choices, answer} (answer: the right choice's index or its text)."""
    from hero_core.eval.benchmarks.bigbench import MCExample

    items = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        try:
            question, choices, answer = row["question"], [str(c) for c in row["choices"]], row["answer"]
        except KeyError as err:
            raise ValueError(f"{path}:{number}: every item needs question, choices and answer ({err} missing)") from err
        right = answer if isinstance(answer, int) else choices.index(str(answer)) if str(answer) in choices else -1
        if not 0 <= right < len(choices) or len(choices) < 2:
            raise ValueError(f"{path}:{number}: answer {answer!r} is not one of its {len(choices)} choices")
        items.append(MCExample(f"Question: {question}\nAnswer:", tuple(f" {c}" for c in choices),
                               tuple(float(i == right) for i in range(len(choices)))))
    if not items:
        raise ValueError(f"--tasks {path!r} holds no items")
    return items


def measure_mc(hero, items: list, tau: float | None) -> list[float]:
    """Per-item grades (1 / 0) of the run at ``tau`` (None: dense) on the multiple-choice items."""
    from hero_core.eval.methods import HeroMethod
    from hero_core.eval.scoring import score_multiple_choice

    method = HeroMethod(hero, "dense") if tau is None else HeroMethod(hero, hero.config.variant, tau=tau)
    return score_multiple_choice(method, items)["grades"]


def tasks_settings(spec) -> dict:
    import hashlib

    digest = hashlib.sha256(Path(spec.tasks).read_bytes()).hexdigest()[:16]
    return {"tasks": digest, "target_skip": spec.skip} | matched_at(spec)


# -- BIG-bench ----------------------------------------------------------------------------------------------------
BIGBENCH_LIMIT = 100  # examples per task: the bundled checkpoints' Retain at 100 (docs/experiments/retain-100)


def bigbench_examples(spec) -> dict[str, list]:
    """The main suite's tasks from ``--bigbench``: the archive, a BIG-bench checkout, or a folder of extracted
    tasks (``<task>/task.json``), first :data:`BIGBENCH_LIMIT` examples each. Never downloads; raises
    BigBenchError (the report says why) where the tasks are not there."""
    from hero_core.eval.benchmarks.bigbench import BigBenchError, extract_tasks, load_task
    from hero_core.eval.suites.registry import load_eval_tasks

    names = load_eval_tasks()["main"]
    path = Path(spec.bigbench).expanduser()
    if path.is_file():
        root = spec.store / "bigbench_tasks"
        extract_tasks(names, archive=path, root=root)
    elif (path / "bigbench" / "benchmark_tasks").is_dir():  # a checkout of the BIG-bench repository
        root = path / "bigbench" / "benchmark_tasks"
    elif path.is_dir():
        root = path
    else:
        raise BigBenchError(f"{path} is not on this machine")
    return {name: load_task(name, root).head(BIGBENCH_LIMIT) for name in names}


def measure_bigbench(hero, examples: dict[str, list], tau: float | None) -> dict[str, list[float]]:
    """Per task, per-example grades of the run at ``tau`` (None: dense)."""
    from hero_core.eval.methods import HeroMethod
    from hero_core.eval.scoring import score_multiple_choice

    method = HeroMethod(hero, "dense") if tau is None else HeroMethod(hero, hero.config.variant, tau=tau)
    return {task: score_multiple_choice(method, items)["grades"] for task, items in examples.items()}


def bigbench_settings(spec) -> dict:
    return {"bigbench_limit": BIGBENCH_LIMIT, "target_skip": spec.skip} | matched_at(spec)


# -- answers kept --------------------------------------------------------------------------------------------------
ANSWERS_TOKENS = 48  # each answer's new tokens at most: the suite's short answers fit; its longer ones are cut


def answers_settings(spec) -> dict:
    return {"answers": spec.answers, "max_new_tokens": ANSWERS_TOKENS, "target_skip": spec.skip} | matched_at(spec)


def answer_rows(spec) -> dict:
    """``--answers N``: the first N prompts of the answers suite (every category in turn), and where the answers are
    kept, so dense's are generated once for the whole study and an interrupted run loses at most one answer."""
    from hero_core.eval.answers.run import load_rows, select_rows

    return {"rows": select_rows(load_rows(), spec.answers), "store": spec.store / "answers"}


def measure_answers(hero, items: dict, tau: float | None) -> list[float]:
    """Per prompt, 1 where the run at ``tau`` (None: dense) answers it correctly (greedy, chat template)."""
    from hero_core.eval.answers.run import REFERENCE, run_answers
    from hero_core.eval.methods import HeroMethod

    name = REFERENCE if tau is None else f"routed:{hero.checkpoint_name}"
    methods = [] if tau is None else [HeroMethod(hero, hero.config.variant, tau, name=name)]
    frame = run_answers(hero, methods, items["rows"], max_new_tokens=ANSWERS_TOKENS, resume_dir=items["store"])
    correct = frame[frame.method == name].set_index("id")["correct"]
    return [float(correct[row["id"]]) for row in items["rows"]]
