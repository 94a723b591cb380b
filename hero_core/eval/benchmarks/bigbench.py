"""BIG-bench multiple-choice tasks, offline: fetch once, extract only what is used, parse.

Where the tasks come from
    ``pip download --no-deps bigbench==1.0.0`` (a 358 MB source archive, Apache-2.0) into
    ``$HERO_LENS_CACHE/bigbench`` (default ``~/.cache/hero_lens/bigbench``), run once through the venv's
    own pip. From the archive only ``bigbench/benchmark_tasks/<task>[/<subtask>]/task.json`` members of
    the tasks asked for are extracted, member by member, with path checks; nothing else is unpacked
    and the archive is never committed.

How a task is turned into prompts (exactly as BIG-bench's ``json_task.py`` does for zero-shot)
    prompt = task_prefix + example_input_prefix + input [+ choice_prefix + choice_prefix.join(choices)]
             + example_output_prefix
    with the defaults ``example_input_prefix="\\nQ: "``, ``example_output_prefix="\\nA: "``,
    ``choice_prefix="\\n  choice: "``, ``append_choices_to_input=True``; appended choices are
    ``sorted(choices)`` permuted by ``numpy.random.RandomState(42)`` (BIG-bench re-seeds per example).
    A task whose ``task.json`` has no examples of its own is the union of its subtasks, each subtask
    formatted with its own prefixes. Duplicate examples are dropped (as BIG-bench does).

How an example is scored (``hero_core.eval.scoring.score_multiple_choice``)
    log-likelihood of each choice given the prompt, summed over the choice's tokens (lm-evaluation-
    harness ``acc``); the example's score is the ``target_scores`` value of the highest-scoring choice
    (BIG-bench ``multiple_choice_grade``: 1/0 for single-answer tasks). Chance is BIG-bench's own
    ``random_score``: the mean over examples of ``mean(target_scores)``.

Examples are visited in a fixed order: the deduplicated list shuffled with ``random.Random(
"bigbench-order-<task>")``, so "the first N examples" (``--limit N``) is a fixed, unbiased sample
(several task files list all positives first).

The task-selection rule (:func:`select_tasks`) lives here too: a pure function of *dense* results.
"""

from __future__ import annotations

import hashlib
import html
import json
import logging
import random
import re
import subprocess
import sys
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from hero_core.files import atomic_write

log = logging.getLogger(__name__)

BIGBENCH_VERSION = "1.0.0"
ARCHIVE_NAME = f"bigbench-{BIGBENCH_VERSION}.tar.gz"
SIMPLE_INDEX = "https://pypi.org/simple/bigbench/"
TASKS_PREFIX = "bigbench/benchmark_tasks"
PERMUTATION_SEED = 42  # BIG-bench's default random_seed for the order of appended choices
DEFAULTS = {"example_input_prefix": "\nQ: ", "example_output_prefix": "\nA: ", "choice_prefix": "\n  choice: ",
            "append_choices_to_input": True, "task_prefix": ""}


class BigBenchError(ValueError):
    """BIG-bench data that cannot be had or read; the message says why and what to do."""


# -- candidate pools and the selection rule -------------------------------------------------------
# Candidates per pool, named "<task>" (all subtasks together) or "<task>/<subtask>". Written down
# before any routed model was evaluated; the rule below picks from them using dense results only.
CANDIDATE_POOLS: dict[str, tuple[str, ...]] = {
    "commonsense": ("physical_intuition", "social_iqa", "winowhy", "strategyqa", "causal_judgment",
                    "cause_and_effect", "general_knowledge", "timedial", "implicatures", "sports_understanding",
                    "anachronisms", "riddle_sense", "disambiguation_qa", "hyperbaton"),
    "reasoning": ("elementary_math_qa/question_only", "arithmetic/1_digit_addition", "arithmetic/2_digit_addition",
                  "arithmetic/1_digit_multiplication", "arithmetic/2_digit_subtraction",
                  "logical_deduction/three_objects", "date_understanding", "navigate",
                  "tracking_shuffled_objects/three_objects", "temporal_sequences", "penguins_in_a_table"),
    "code": ("code_line_description", "cs_algorithms"),
}
SELECTION_EXAMPLES = 100  # N: dense accuracy is measured on the first N examples (fixed order above)
SELECTION_MARGIN = 0.05  # ... and must beat chance by at least 5 points
MAIN_SUITE_SIZE = 7  # the paper's headline Retain is over seven multiple-choice tasks


def select_tasks(dense: dict[str, dict[str, float]], *, margin: float = SELECTION_MARGIN,
                 main_size: int = MAIN_SUITE_SIZE,
                 pools: dict[str, tuple[str, ...]] | None = None) -> dict[str, Any]:
    """The written task-selection rule, applied to dense results only.

    ``dense`` maps a candidate task to ``{"accuracy": a, "chance": c}`` measured on its first
    :data:`SELECTION_EXAMPLES` examples by the *dense* model. The rule:

    1. a candidate **passes** when ``accuracy - chance >= margin`` (5 points);
    2. the **main suite** is the ``main_size`` (7) passing commonsense candidates with the largest
       margin over chance (ties: pool order); if fewer than seven commonsense candidates pass, the
       rest are filled with passing reasoning candidates, then code candidates, by margin;
    3. the **extended suite** is every passing reasoning and code candidate (by pool, then margin),
       whether or not it is also in the main suite: a reasoning/code view next to the headline.

    No routed result is an input: the suites are fixed before any routed model is scored.
    Returns ``{"main": [...], "extended": [...], "passed": [...], "failed": [...]}``.
    """
    pools = pools or CANDIDATE_POOLS
    order = {name: i for i, name in enumerate(n for pool in pools.values() for n in pool)}

    def gap(name: str) -> float:
        return dense[name]["accuracy"] - dense[name]["chance"]

    # A tiny tolerance keeps "exactly 5 points" (e.g. 0.55 vs 0.50) from failing on float rounding.
    passing = {name for name in dense if name in order and gap(name) >= margin - 1e-9}

    def ranked(pool: str) -> list[str]:
        return sorted((n for n in pools.get(pool, ()) if n in passing), key=lambda n: (-gap(n), order[n]))

    main = ranked("commonsense")[:main_size]
    for pool in ("reasoning", "code"):
        main += ranked(pool)[: main_size - len(main)]
    extended = [n for pool in ("reasoning", "code") for n in ranked(pool)]
    return {"main": main, "extended": extended, "passed": sorted(passing, key=order.get),
            "failed": sorted((n for n in dense if n in order and n not in passing), key=order.get)}


# -- examples -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MCExample:
    """One multiple-choice example: the full zero-shot prompt and its scored choices."""

    context: str  # task_prefix + input prefix + input (+ appended choices) + output prefix
    choices: tuple[str, ...]  # continuations scored by log-likelihood, in target_scores order
    scores: tuple[float, ...]  # target_scores of each choice (1 = correct)
    subtask: str = ""

    @property
    def target(self) -> int:
        """Index of the first best-scored choice (BIG-bench's ``target``)."""
        return int(np.argmax(self.scores))

    @property
    def chance(self) -> float:
        return float(np.mean(self.scores))


@dataclass
class MCTask:
    name: str
    examples: list[MCExample]  # in the fixed evaluation order
    description: str = ""

    @property
    def chance(self) -> float:
        """BIG-bench's random_score over all examples."""
        return float(np.mean([e.chance for e in self.examples])) if self.examples else 0.0

    def head(self, limit: int | None) -> list[MCExample]:
        return self.examples if limit is None else self.examples[:limit]


def format_example(example: dict, task: dict) -> MCExample:
    """BIG-bench's ``default_format_fn`` + ``task_prefix`` for one zero-shot multiple-choice example."""
    scores = example.get("target_scores")
    if not isinstance(scores, dict) or not scores:
        raise BigBenchError(f"example has no target_scores (not multiple choice): {str(example)[:120]}")
    get = lambda key: task.get(key, DEFAULTS[key])  # noqa: E731
    text = str(example["input"])
    if get("append_choices_to_input"):
        shown = np.random.RandomState(seed=PERMUTATION_SEED).permutation(sorted(scores))
        prefix = get("choice_prefix")
        text = text + prefix + prefix.join(str(c) for c in shown)
    context = str(get("task_prefix")) + get("example_input_prefix") + text + get("example_output_prefix")
    choices = tuple(str(c) for c in scores)
    values = tuple(float(v) for v in scores.values())
    if len(values) > 1 and max(values) <= min(values):
        raise BigBenchError(f"example has no better-scored choice: {str(example)[:120]}")
    return MCExample(context=context, choices=choices, scores=values)


def parse_task(task: dict, name: str, subtask: str = "") -> list[MCExample]:
    """Multiple-choice examples of one task.json (deduplicated, file order). Non-MC examples are skipped."""
    if not isinstance(task, dict):
        raise BigBenchError(f"{name}: task.json must hold a JSON object")
    seen: set[str] = set()
    out = []
    for example in task.get("examples", []):
        key = json.dumps(example, sort_keys=True)
        if key in seen or not isinstance(example, dict) or "input" not in example:
            continue
        seen.add(key)
        if example.get("target_scores"):
            ex = format_example(example, task)
            out.append(MCExample(ex.context, ex.choices, ex.scores, subtask))
    return out


def load_task(name: str, root: Path | None = None) -> MCTask:
    """Load an extracted task (``<task>`` = union of its subtasks, or ``<task>/<subtask>``)."""
    check_task_name(name)
    base = (root or tasks_dir()) / name
    path = base / "task.json"
    if not path.is_file():
        raise BigBenchError(f"BIG-bench task {name!r} is not extracted under {base.parent}; run "
                            f"`python -m hero_core eval --fetch-bigbench` (or call bigbench.ensure_tasks)")
    data = _read_json(path)
    examples = parse_task(data, name)
    if not data.get("examples"):
        for sub in sorted(p for p in base.iterdir() if (p / "task.json").is_file()):
            examples += parse_task(_read_json(sub / "task.json"), f"{name}/{sub.name}", sub.name)
    if not examples:
        raise BigBenchError(f"BIG-bench task {name!r} has no multiple-choice examples")
    random.Random(f"bigbench-order-{name}").shuffle(examples)
    return MCTask(name=name, examples=examples, description=str(data.get("description", "")))


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise BigBenchError(f"{path} is not valid JSON ({err}); delete it and extract again") from None


# -- fetching and extraction ----------------------------------------------------------------------
def bigbench_dir() -> Path:
    from hero_core.backbones.loading import cache_dir

    return cache_dir() / "bigbench"


def tasks_dir() -> Path:
    return bigbench_dir() / "tasks"


def archive_path() -> Path:
    return bigbench_dir() / ARCHIVE_NAME


def check_task_name(name: str) -> str:
    parts = PurePosixPath(name).parts
    if not name or len(parts) > 2 or any(not p.replace("_", "").replace("-", "").isalnum() for p in parts):
        raise BigBenchError(f"bad BIG-bench task name {name!r}: use '<task>' or '<task>/<subtask>' "
                            f"(letters, digits, '_' and '-')")
    return name


def ensure_archive(download: bool = True) -> Path:
    """The bigbench sdist in the cache, downloaded once with the running interpreter's pip."""
    path = archive_path()
    if path.is_file():
        return path
    if not download:
        raise BigBenchError(f"no BIG-bench archive at {path}; "
                            "fetch it with `python -m hero_core eval --fetch-bigbench`")
    path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps",
           f"bigbench=={BIGBENCH_VERSION}", "-d", str(path.parent)]
    log.warning("downloading BIG-bench %s (358 MB, once) into %s", BIGBENCH_VERSION, path.parent)
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode == 0 and path.is_file():
        return path
    # pip prepares an sdist's metadata even with --no-deps, and bigbench's declares a local-file dependency that
    # recent pips refuse; the archive itself is fine, so fetch it from the index directly (hash-checked).
    tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
    try:
        download_from_index(path)
    except (OSError, ValueError) as exc:
        raise BigBenchError(f"could not download bigbench=={BIGBENCH_VERSION} with pip ({' | '.join(tail)}) "
                            f"nor from {SIMPLE_INDEX} ({exc}); place {ARCHIVE_NAME} in {path.parent} by hand") from None
    return path


def archive_link(index_html: str) -> tuple[str, str]:
    """The archive's URL and sha256 in a PEP 503 simple-index page."""
    for url in re.findall(r'href="([^"]+)"', index_html):
        base, _, fragment = html.unescape(url).partition("#sha256=")
        if base.rsplit("/", 1)[-1] == ARCHIVE_NAME and fragment:
            return base, fragment
    raise ValueError(f"{ARCHIVE_NAME} with a sha256 is not listed")


def download_from_index(path: Path) -> None:
    """Stream the archive from PyPI's simple index into ``path``, checking the hash the index gives."""
    with urllib.request.urlopen(SIMPLE_INDEX, timeout=60) as page:
        url, sha256 = archive_link(page.read().decode("utf-8"))
    partial = path.with_suffix(".part")
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=60) as source, open(partial, "wb") as fh:
        while chunk := source.read(1 << 20):
            digest.update(chunk)
            fh.write(chunk)
    if digest.hexdigest() != sha256:
        partial.unlink()
        raise ValueError(f"sha256 mismatch for {url}")
    partial.replace(path)


def _copy_stream(source, path: str) -> None:
    with open(path, "wb") as fh:
        while chunk := source.read(1 << 20):
            fh.write(chunk)


def _member_task(member_name: str) -> str | None:
    """'bigbench-1.0.0/bigbench/benchmark_tasks/a/b/task.json' -> 'a/b' (None if not a task.json)."""
    parts = PurePosixPath(member_name).parts
    if len(parts) < 4 or parts[-1] != "task.json" or ".." in parts or member_name.startswith("/"):
        return None
    text = "/".join(parts[1:-1])
    if not text.startswith(TASKS_PREFIX + "/"):
        return None
    return text[len(TASKS_PREFIX) + 1:]


def extract_tasks(names: list[str], archive: Path | None = None, root: Path | None = None) -> dict[str, Path]:
    """Extract the task.json files of ``names`` (and their subtasks) from the archive, member by member.

    Only regular-file members named ``.../bigbench/benchmark_tasks/<task>[/<sub>]/task.json`` whose
    task is asked for are read; each is written to ``root/<task>[/<sub>]/task.json`` after checking
    that the resolved destination stays inside ``root``. Returns ``{name: directory}``."""
    root = (root or tasks_dir()).resolve()
    wanted = {check_task_name(n).split("/")[0] for n in names}
    archive = archive or ensure_archive()
    found: set[str] = set()
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            task = _member_task(member.name)
            if task is None or task.split("/")[0] not in wanted or not member.isfile():
                continue
            dest = (root / task / "task.json").resolve()
            if root not in dest.parents:
                raise BigBenchError(f"unsafe path in archive: {member.name}")
            source = tar.extractfile(member)
            if source is None:
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(dest, lambda tmp, source=source: _copy_stream(source, tmp))
            found.add(task)
    missing = [n for n in names if n not in found]
    if missing:
        raise BigBenchError(f"no such BIG-bench tasks in {archive.name}: {missing}")
    return {n: root / n for n in names}


def ensure_tasks(names: list[str], download: bool = True) -> dict[str, Path]:
    """Make sure each named task is extracted (fetching the archive once if needed)."""
    missing = [n for n in names if not (tasks_dir() / check_task_name(n) / "task.json").is_file()]
    if missing:
        extract_tasks(missing, ensure_archive(download))
    return {n: tasks_dir() / n for n in names}


def all_candidates() -> list[str]:
    return [n for pool in CANDIDATE_POOLS.values() for n in pool]


def pool_of(name: str) -> str | None:
    return next((pool for pool, names in CANDIDATE_POOLS.items() if name in names), None)
