"""HeRo Lens: see which FFNs each token skips, why, and what the depth memory changes.

Run with ``streamlit run app/main.py`` (``make run``). Set ``HERO_LENS_TINY=1`` for the tiny random
test model. This script draws the shared sidebar, picks the page and turns user errors into messages.
"""

from __future__ import annotations

import logging

import streamlit as st
from components import saved as saved_traces
from components import settings as app_settings
from components.glossary import render_glossary
from components.rerun_timing import timed_rerun
from components.runtime import load_model
from components.urlstate import restore_from_url, write_to_url
from components.warmup import warm_defaults
from components.widgets import show_callback_error

from hero_core.core.backbone_pool import SHARED_BACKBONES

log = logging.getLogger("hero_lens.app")

PAGES = (
    ("views/explorer.py", "Route explorer", ":material/grid_on:", "explorer"),
    ("views/learn.py", "Learn: dynamic depth", ":material/school:", "learn"),  # the guided tour, second
    ("views/memory.py", "Memory view", ":material/memory:", "memory"),
    ("views/compare.py", "Compare runs", ":material/compare:", "compare"),
    ("views/dataset.py", "Data set", ":material/dataset:", "dataset"),
    ("views/generate.py", "Generate", ":material/edit_note:", "generate"),
    ("views/why.py", "Why this decision?", ":material/help:", "why"),
    ("views/study.py", "Study", ":material/science:", "study"),
)


def _home() -> None:
    """The app's root: forwards to the first page, query parameters (a shared view) included.

    Streamlit serves its default page at "/" only and still reserves that page's url_path, so with the explorer
    as the default, opening /explorer directly answered "Page not found". The default is this hidden page
    instead, and every visible page keeps a URL that opens it."""
    st.switch_page(PAGES[0][0], query_params=st.query_params.to_dict())


def main(record: dict) -> None:
    st.set_page_config(page_title="HeRo Lens", page_icon=":material/route:", layout="wide")
    home = st.Page(_home, title="HeRo Lens", url_path="home", default=True, visibility="hidden")
    page = st.navigation([home, *(st.Page(path, title=title, icon=icon, url_path=url)
                                  for path, title, icon, url in PAGES)])
    record["page"] = page.url_path or "home"
    url_problems = restore_from_url()
    if url_problems:  # kept until a visible page shows them: the root page forwards before anyone sees it
        st.session_state["url_problems"] = url_problems
    settings = app_settings.render_sidebar()
    st.session_state["sb_settings"] = settings
    if page.url_path != home.url_path:
        for problem in st.session_state.pop("url_problems", []):
            st.warning(f"The link could not be restored in full: {problem}.")
    render_glossary()
    show_callback_error()
    try:
        # a saved trace draws without any model: then a model loads only where a page asks for one
        live = saved_traces.render_sidebar() is None
        if live:
            hero = load_model(settings.model)
            st.sidebar.caption(f"Loaded **{hero.backbone.name}**{' (NF4)' if hero.backbone.quantization else ''} · "
                               f"checkpoint **{hero.checkpoint_name}** · {hero.config.n_routed} routed layers · "
                               f"{hero.device}")
            if not settings.model.tiny:  # what a researcher sizing memory needs: routers share their backbone
                st.sidebar.caption(f"Backbones in memory: {len(SHARED_BACKBONES)} (loaded {SHARED_BACKBONES.loads} "
                                   "time(s) in this server); every router checkpoint runs on its backbone's one copy.")
            if hero.checkpoint_name == "untrained":
                st.sidebar.warning("No trained checkpoint fits this backbone: the routers are untrained, so gates "
                                   "sit near 1 and every FFN runs.")
        page.run()
        write_to_url(app_settings.current())
        if live:  # after the page, so the first visitor's page is served first; a saved trace loads no model
            warm_defaults(settings)
    except ValueError as err:  # every user error in hero_core is a ValueError with a readable message
        st.error(str(err))
    except Exception as err:  # noqa: BLE001 - never show a traceback; log it for the operator
        log.exception("unexpected error in the HeRo Lens app")
        st.error(f"Something went wrong ({type(err).__name__}: {err}). The details are in the server log.")


with timed_rerun() as rerun_record:
    main(rerun_record)
