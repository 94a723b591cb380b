"""The page's error guard: any error a user's input or the run causes reaches them as a message, never a traceback."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

log = logging.getLogger("hero_lens.app")


@contextmanager
def errors_shown() -> Iterator[None]:
    """Show an error raised inside as the page's message (a ValueError is a user error with a readable text)."""
    try:
        yield
    except ValueError as err:  # every user error in hero_core is a ValueError with a readable message
        st.error(str(err))
    except Exception as err:  # noqa: BLE001 - never show a traceback; log it for the operator
        log.exception("unexpected error in the HeRo Lens app")
        st.error(f"Something went wrong ({type(err).__name__}: {err}). The details are in the server log.")
