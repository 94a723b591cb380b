"""How a link holds the prompt: in the address bar when it is short, by id in the local prompt store when not.

Why: a 2,500-character prompt used to stay out of the address bar while the previous, shorter prompt stayed in it,
so a copied link silently reopened the wrong prompt. Now a link always names the prompt shown, or the page says
plainly that it cannot.
"""

from __future__ import annotations

import logging

from hero_core.data import prompt_store

log = logging.getLogger(__name__)
URL_PROMPT = "prompt"  # ?prompt=... pre-fills the prompt (used by links and the browser test)
URL_PROMPT_ID = "prompt_id"  # ?prompt_id=<hash>: a long prompt kept in the local store
MAX_URL_PROMPT = 2000  # longer prompts stay out of the address bar


def prompt_params(prompt: str) -> dict[str, str | None]:
    """The query parameters that name ``prompt`` (None: remove that parameter)."""
    if len(prompt) <= MAX_URL_PROMPT:
        return {URL_PROMPT: prompt, URL_PROMPT_ID: None}
    try:
        return {URL_PROMPT: None, URL_PROMPT_ID: prompt_store.save(prompt)}
    except OSError:  # a read-only cache: the link then holds no prompt, and link_note says so
        log.warning("could not store a long prompt for its link", exc_info=True)
        return {URL_PROMPT: None, URL_PROMPT_ID: None}


def link_note(prompt: str) -> str | None:
    """What the page says under a prompt too long for the address bar (None: the link holds it as text)."""
    if len(prompt) <= MAX_URL_PROMPT:
        return None
    key = prompt_params(prompt)[URL_PROMPT_ID]
    if key is None:
        return (f"This prompt ({len(prompt):,} characters) is too long for a link and could not be stored on this "
                "machine: a copied link will not hold it.")
    return (f"This prompt ({len(prompt):,} characters) is too long for the address bar: the link names it as "
            f"`prompt_id={key}`, kept in this machine's prompt store ({prompt_store.store_dir()}). The link opens it "
            "wherever that store is; elsewhere the page says it is missing.")


def prompt_from_link(params) -> tuple[str | None, str | None]:
    """(prompt, problem) from query parameters: the text of ``prompt``, or the stored prompt ``prompt_id`` names;
    a problem sentence when the named prompt is not here (never another prompt in its place)."""
    text = params.get(URL_PROMPT)
    if text:
        return text, None
    key = params.get(URL_PROMPT_ID)
    if not key:
        return None, None
    stored = prompt_store.load(key)
    if stored is None:
        return None, (f"the link names a stored prompt (prompt_id {key!r}) that is not in this machine's prompt "
                      "store, so it cannot be shown here; the page opens on its example prompt instead")
    return stored, None
