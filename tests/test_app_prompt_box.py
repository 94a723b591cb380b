"""The shared prompt box survives a browser that rebuilt it, headless (streamlit.testing AppTest, tiny model).

Why: in the browser test of Why (tests/test_app_browser_defaults.py), switching the attribution method to integrated
gradients sometimes reran the page with an empty prompt ("the prompt is empty: type some text to route"), on a loaded
machine only. The box had been seeded once, through session state, on the page's first run; every later run sent it
with ``set_value`` off and an empty default, so its text lived only in the browser's widget state. Streamlit's
frontend drops a page's widget states when it clears the page (a new-session message it takes for a page change,
while the server keeps them: streamlit#8425, #8830); the box then came back at its default, "", and the next
interaction sent "" as the prompt, which the box's callback also copied into every page's shared prompt.

A browser that rebuilds the box builds it from the element the server last sent: its ``value`` when ``set_value`` is
on, else its ``default``. These tests send the page exactly that, and the prompt must come back.
"""

import pytest
from apptest_helpers import assert_clean, starter

from hero_core.method.tiny import tiny_hero

TIMEOUT = 180


@pytest.fixture
def app(monkeypatch):
    return starter(monkeypatch, TIMEOUT)


def rebuilt(box) -> str:
    """What a browser that lost the box's state shows and sends back: the element the server last sent."""
    return box.proto.value if box.proto.set_value else box.proto.default


def test_why_keeps_its_prompt_when_the_browser_rebuilds_the_box(app):
    """The failing sequence of the browser test: attribute by token ablation, the box rebuilt from that run's
    element, then integrated gradients chosen."""
    at = app("why")
    prompt = at.text_area(key="why_prompt").value
    assert len(tiny_hero(seed=0).trace(prompt).tokens) > 24  # the decision waits for the button
    at.button(key="why_attribute").click().run()
    assert_clean(at)
    box = at.text_area(key="why_prompt")
    box.set_value(rebuilt(box))
    at.radio(key="why_method").set_value("integrated_gradients").run()
    assert_clean(at)  # before the fix: "the prompt is empty: type some text to route"
    assert at.text_area(key="why_prompt").value == prompt
    assert at.session_state["shared_prompt"] == prompt  # the other pages keep it too


@pytest.mark.parametrize("page", ["explorer", "memory", "why"])
def test_every_run_sends_the_prompt_with_the_box(app, page):
    """On every run, not only the first, the box's element carries the prompt (and the chat toggle its state), a
    typed prompt included."""
    at = app(page)
    typed = "A prompt typed into the box."
    at.text_area(key=f"{page}_prompt").input(typed).run()
    at.toggle(key=f"{page}_chat").set_value(True).run()
    for _ in range(2):
        box, chat = at.text_area(key=f"{page}_prompt"), at.toggle(key=f"{page}_chat")
        assert rebuilt(box) == typed
        assert chat.proto.set_value and chat.proto.value is True
        at.run()
    assert_clean(at)
