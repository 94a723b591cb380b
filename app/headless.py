"""The app driven headless through ``streamlit.testing`` (no browser, no server): Route explorer opened on a local
model directory and a checkpoint directory, and what the page shows, for the GPU check's ``--model-dir`` flow.

hero_core never imports streamlit or the app, so this lives beside the app; ``scripts/gpu_check.py`` and
tests/test_gpu_check.py hand :func:`open_route_explorer` to hero_core.cli.own_model_check, which checks the page
against the CLI's trace.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path

APP_MAIN = Path(__file__).resolve().with_name("main.py")


def _app_components():
    """The app's helper package ``components``, the very module objects app/main.py imports when it runs.

    Streamlit puts main.py's folder on the import path only while the script runs, so a caller that loads this file
    by path (the script) cannot import ``components`` beforehand. The package is loaded from its file by an explicit
    spec instead and registered under its own name; its submodules are then found through the package's ``__path__``,
    and the app's run reuses them rather than loading a second copy."""
    if "components" not in sys.modules:
        init = APP_MAIN.with_name("components") / "__init__.py"
        spec = importlib.util.spec_from_file_location("components", init, submodule_search_locations=[str(init.parent)])
        package = importlib.util.module_from_spec(spec)
        sys.modules["components"] = package
        spec.loader.exec_module(package)
    return importlib.import_module("components.settings")


CUSTOM_CHECKPOINT = _app_components().CUSTOM_CHECKPOINT
SIDEBAR = importlib.import_module("components.sidebar_keys")  # the sidebar's widget keys


def open_route_explorer(model_dir: Path, checkpoint: Path, device: str, prompt: str, timeout: float) -> dict:
    """Sidebar Backbone -> local directory ``model_dir``, Checkpoint -> directory… ``checkpoint``, ``device``, and
    ``prompt`` as the shared prompt; one run of app/main.py. Returns the page's exceptions and errors (``problems``),
    the sidebar captions, every plotly chart's spec by title and the page title; the app's caches are cleared after,
    so its cached model goes."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP_MAIN), default_timeout=timeout)
    at.session_state[SIDEBAR.BACKBONE_KIND] = "local directory"
    at.session_state[SIDEBAR.BACKBONE_PATH] = str(model_dir)
    at.session_state[SIDEBAR.CHECKPOINT] = CUSTOM_CHECKPOINT
    at.session_state[SIDEBAR.CHECKPOINT_PATH] = str(checkpoint)
    at.session_state[SIDEBAR.DEVICE] = device
    at.session_state["shared_prompt"] = prompt
    at.run()
    page = {"problems": [f"exception: {e.value}" for e in at.exception] + [f"error: {e.value}" for e in at.error],
            "captions": [c.value for c in at.sidebar.caption], "charts": {},
            "page_title": [t.value for t in at.title][:1]}
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        page["charts"][spec["layout"].get("title", {}).get("text", "")] = spec
    st.cache_resource.clear()  # let the app's cached model go
    st.cache_data.clear()
    return page
