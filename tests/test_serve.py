"""`make run`'s launcher (app/serve.py): the app as `streamlit run app/main.py` serves it, with the default model
loaded into the pages' cache while the server starts, before anyone visits."""

import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from hero_core.reports.served_app import SERVE, free_port, stop


def test_the_launcher_serves_the_app_and_loads_the_default_model_before_any_visit():
    port = free_port()
    timings = Path(tempfile.mkdtemp(prefix="hero-serve-")) / "reruns.jsonl"
    env = {**os.environ, "HERO_LENS_TINY": "1", "HERO_LENS_TIMINGS": str(timings)}
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([sys.executable, str(SERVE), "--server.port", str(port), "--server.address",
                                 "127.0.0.1", "--server.headless", "true", "--server.fileWatcherType", "none"],
                                env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline, healthy, output = time.monotonic() + 120, False, ""
            while time.monotonic() < deadline and not (healthy and "default model" in output):
                assert proc.poll() is None, output
                try:
                    health = urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)
                    healthy = health.read() == b"ok"
                except OSError:
                    pass
                log.seek(0)
                output = log.read().decode(errors="replace")
                time.sleep(0.3)
            assert healthy, output
            assert "default model (" in output, output
            assert "loaded in" in output and "Traceback" not in output, output
            assert not timings.exists() or not timings.read_text().strip()  # no page has run: nobody visited
        finally:
            stop(proc)


CANNOT_LOAD = '''import sys

if any(arg.endswith("serve.py") for arg in sys.argv):  # the served app's process only
    import hero_core.method.tiny as tiny

    def cannot_load(**kwargs):
        raise OSError("the model files cannot be read (test)")

    tiny.tiny_hero = cannot_load
'''


def test_a_model_that_fails_to_load_at_start_is_said_and_the_server_keeps_serving(tmp_path):
    """The load at start fails (the model's files cannot be read): the launcher says so, with the error, and the
    server goes on serving (the first page loads the model itself and shows its error)."""
    (tmp_path / "sitecustomize.py").write_text(CANNOT_LOAD)
    port = free_port()
    env = {**os.environ, "HERO_LENS_TINY": "1", "PYTHONPATH": os.pathsep.join(
        [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])])}
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([sys.executable, str(SERVE), "--server.port", str(port), "--server.address",
                                 "127.0.0.1", "--server.headless", "true", "--server.fileWatcherType", "none"],
                                env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline, healthy, output = time.monotonic() + 120, False, ""
            said = "OSError: the model files cannot be read (test)"  # the error, as the launcher logs it
            while time.monotonic() < deadline and not (healthy and said in output):  # polled, to a deadline
                assert proc.poll() is None, output
                try:
                    health = urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)
                    healthy = health.read() == b"ok"
                except OSError:
                    pass
                log.seek(0)
                output = log.read().decode(errors="replace")
                time.sleep(0.3)
            assert healthy and said in output, output
            assert "loaded in" not in output, output
            assert proc.poll() is None, output  # still serving
            health = urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=10)
            assert health.read() == b"ok"
        finally:
            stop(proc)
