"""The app driven headless through ``streamlit.testing`` (no browser, no server): Route explorer opened on a local
model directory and a checkpoint directory, and what the page shows, for the GPU check's ``--model-dir`` flow.

hero_core never imports streamlit or the app, so this lives beside the app; ``scripts/gpu_check.py`` and
tests/test_gpu_check.py hand :func:`open_route_explorer` to hero_core.own_model_check, which checks the page
against the CLI's trace.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

APP_MAIN = Path(__file__).resolve().with_name("main.py")
# The app's helpers are the top-level package `components`, as when streamlit runs main.py from this folder; a
# caller that loads this file by path (the script) has not put the folder on the import path.
if str(APP_MAIN.parent) not in sys.path:
    sys.path.insert(0, str(APP_MAIN.parent))

from components.settings import CUSTOM_CHECKPOINT  # noqa: E402


def open_route_explorer(model_dir: Path, checkpoint: Path, device: str, prompt: str, timeout: float) -> dict:
    """Sidebar Backbone -> local directory ``model_dir``, Checkpoint -> directory… ``checkpoint``, ``device``, and
    ``prompt`` as the shared prompt; one run of app/main.py. Returns the page's exceptions and errors (``problems``),
    the sidebar captions, every plotly chart's spec by title and the page title; the app's caches are cleared after,
    so its cached model goes."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP_MAIN), default_timeout=timeout)
    at.session_state["sb_backbone_kind"] = "local directory"
    at.session_state["sb_backbone_path"] = str(model_dir)
    at.session_state["sb_checkpoint"] = CUSTOM_CHECKPOINT
    at.session_state["sb_checkpoint_path"] = str(checkpoint)
    at.session_state["sb_device"] = device
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
