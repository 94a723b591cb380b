"""HeRo Lens: see which FFNs each token skips, why, and what the depth memory changes.

Run with ``make run`` (``python app/serve.py``: ``streamlit run app/main.py`` with the default model loading as the
server starts; a plain ``streamlit run app/main.py`` serves the same app). Set ``HERO_LENS_TINY=1`` for the tiny random
test model. This script draws the shared sidebar, picks the page and turns user errors into messages.
"""

from __future__ import annotations

import streamlit as st
from components import saved as saved_traces
from components import settings as app_settings
from components.error_guard import errors_shown
from components.glossary import render_glossary
from components.link_view import restore_from_url, write_to_url
from components.rerun_timing import timed_rerun
from components.runtime import load_model
from components.warmup import warm_defaults
from components.widgets import show_callback_error

from hero_core.backbones.pool import SHARED_BACKBONES

URL_PROBLEMS = "url_problems"  # session state: what the link could not restore, until a visible page shows it
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
    # every value of a repeated parameter (a multiselect's: ?compare_variants=hero&compare_variants=no_history)
    st.switch_page(PAGES[0][0], query_params={name: st.query_params.get_all(name) for name in st.query_params})


def main(record: dict) -> None:
    st.set_page_config(page_title="HeRo Lens", page_icon=":material/route:", layout="wide")
    home = st.Page(_home, title="HeRo Lens", url_path="home", default=True, visibility="hidden")
    page = st.navigation([home, *(st.Page(path, title=title, icon=icon, url_path=url)
                                  for path, title, icon, url in PAGES)])
    record["page"] = page.url_path or "home"
    with errors_shown():  # everything of the page, its link and its sidebar included: a message, never a traceback
        _run(page, shown=page.url_path != home.url_path)


def _run(page, *, shown: bool) -> None:
    """The link restore, the shared sidebar and the page itself (``shown``: a visible page, not the root's
    forward)."""
    url_problems = restore_from_url()
    if url_problems:  # kept until a visible page shows them: the root page forwards before anyone sees it
        st.session_state[URL_PROBLEMS] = url_problems
    settings = app_settings.render_sidebar()
    if shown:
        for problem in st.session_state.pop(URL_PROBLEMS, []):
            st.warning(f"The link could not be restored in full: {problem}.")
    render_glossary()
    show_callback_error()
    # a saved trace draws without any model: then a model loads only where a page asks for one
    live = saved_traces.render_sidebar() is None
    if live:
        _describe_model(settings)
    page.run()
    write_to_url(app_settings.current())
    if live:  # after the page, so the first visitor's page is served first; a saved trace loads no model
        warm_defaults(settings)


def _describe_model(settings: app_settings.Settings) -> None:
    """Load the sidebar's model (under its spinner) and say in the sidebar what it is."""
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


with timed_rerun() as rerun_record:
    main(rerun_record)
