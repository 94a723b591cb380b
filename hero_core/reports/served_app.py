"""The app served on 127.0.0.1 as ``make run`` serves it (app/serve.py), for what measures or drives it: the browser
tests and scripts (through hero_lens_tools.app_browser's Chromium), the latency and load benchmarks.

* :func:`served_app`: the server on a free port, yielding its base URL; :func:`served_process` yields its process too;
* :func:`embedded_env`: this process's environment without test mode, so the app serves the embedded model.

A server that does not answer its health check in time raises :class:`AppDidNotStart`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVE = ROOT / "app" / "serve.py"  # `make run`'s launcher: streamlit run main.py, the default model loading at start


class AppDidNotStart(RuntimeError):
    """``streamlit run`` exited or did not answer its health check in time."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@contextmanager
def served_app(env: dict[str, str] | None = None, start_timeout: float = 90.0) -> Iterator[str]:
    """The app served on 127.0.0.1 (``env``: the process environment, default this one's); yields its base URL."""
    with served_process(env, start_timeout) as (base, _):
        yield base


@contextmanager
def served_process(env: dict[str, str] | None = None, start_timeout: float = 90.0, *,
                   serve: Path = SERVE) -> Iterator[tuple[str, subprocess.Popen]]:
    """:func:`served_app`, yielding the server's process too (its CPU and memory are read off it); ``serve``: the
    launcher to run (another checkout's app/serve.py, to measure its code beside this one's)."""
    port = free_port()
    # The server's output goes to a file, not a pipe: a pipe nobody reads fills up and stalls a long-lived server.
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [sys.executable, str(serve), "--server.port", str(port), "--server.address",
         "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"], cwd=serve.parents[1], env=dict(os.environ) if env is None else env,
        stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                if urllib.request.urlopen(f"{base}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise AppDidNotStart(f"streamlit did not start: {log.read().decode(errors='replace')[-2000:]}")
            time.sleep(0.5)
        yield base, proc
    finally:
        stop(proc)
        log.close()


def embedded_env() -> dict[str, str]:
    """This process's environment without test mode: the app serves the embedded model."""
    return {k: v for k, v in os.environ.items() if k != "HERO_LENS_TINY"}
