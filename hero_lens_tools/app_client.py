"""A visitor of the served app that speaks Streamlit's own protocol: no browser, the server sees a real client.

A browser tab talks to ``streamlit run`` over one websocket, ``/_stcore/stream``: it sends ``BackMsg`` protobufs
(``rerun_script`` with the page, the query string and the widgets' values) and receives ``ForwardMsg`` protobufs
(the page's elements as deltas, the query string the page wrote, ``script_finished``). :class:`Visitor` does the
same, so a load benchmark can open sixteen sessions on a 2-core machine where sixteen Chromiums would take the CPU
the server is measured on. What a visitor is shown is read off the elements: the metrics' labels and values, the
markdown, the tables (Arrow), and which widget keys were drawn.

Like the browser, a visitor sends the value of every widget drawn by the last run that the server set (an element
drawn with ``set_value``: the sidebar's τ restored from the link, say) or that the visitor changed: a widget missing
from a rerun's states reads as its default, so a τ the server set would fall back to the slider's minimum.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

FINISHED = {ForwardMsg.ScriptFinishedStatus.Value(name) for name in
            ("FINISHED_SUCCESSFULLY", "FINISHED_WITH_COMPILE_ERROR", "FINISHED_FRAGMENT_RUN_SUCCESSFULLY")}
FRAGMENT_FINISHED = ForwardMsg.ScriptFinishedStatus.Value("FINISHED_FRAGMENT_RUN_SUCCESSFULLY")
ERROR_ALERT = 1  # Alert.Format.ERROR
# the field of WidgetState a widget's value goes in, and the element field the server set it in (set_value)
STATE_FIELDS = {"slider": ("double_array_value", "value"), "text_area": ("string_value", "value"),
                "text_input": ("string_value", "value"), "checkbox": ("bool_value", "value"),
                "selectbox": ("string_value", "raw_value"), "radio": ("string_value", "raw_value"),
                "multiselect": ("string_array_value", "raw_values"), "number_input": ("double_value", "value"),
                "button_group": ("string_array_value", "raw_values")}


@dataclass
class Run:
    """One rerun as the visitor saw it: seconds from the request to each element and to the end."""

    started: float
    elements: list[tuple[float, str, str, object]] = field(default_factory=list)  # (s, kind, widget key, proto)
    finished_s: float | None = None
    errors: list[str] = field(default_factory=list)

    def first(self, kind: str, key_suffix: str = "") -> float | None:
        """Seconds to the first element of ``kind`` (whose widget key ends with ``key_suffix``), or None."""
        return next((s for s, k, key, _ in self.elements if k == kind and key.endswith(key_suffix)), None)

    def metrics(self) -> dict[str, str]:
        return {el.label: el.body for _, kind, _, el in self.elements if kind == "metric"}

    def markdown(self, starts: str) -> list[str]:
        return [el.body for _, kind, _, el in self.elements if kind == "markdown" and el.body.startswith(starts)]

    def tables(self) -> list[dict]:
        """Every dataframe shown, as {column: [values]} (read with pyarrow)."""
        import pyarrow.ipc

        out = []
        for _, kind, _, el in self.elements:
            if kind == "dataframe" and el.arrow_data.data:
                out.append(pyarrow.ipc.open_stream(io.BytesIO(el.arrow_data.data)).read_all().to_pydict())
        return out


def widget_key(element_id: str) -> str:
    """The user key a widget id ends with (``$$ID-<hash>-<key>``), or "" for an unkeyed widget."""
    return element_id.split("-", 2)[2] if element_id.startswith("$$ID-") and element_id.count("-") >= 2 else ""


class Visitor:
    """One browser-like session on the app at ``base`` (http://host:port)."""

    def __init__(self, base: str, *, timeout: float = 600.0) -> None:
        from websockets.sync.client import connect

        self.timeout = timeout
        self.ws = connect(base.replace("http", "ws", 1) + "/_stcore/stream", subprotocols=["streamlit"],
                          max_size=None, open_timeout=timeout, close_timeout=5)
        self.query = ""
        self.pages: dict[str, str] = {}  # url path -> page script hash, from the navigation message
        self.page = ""  # the page shown now (its script hash): a rerun without one would go to the app's root
        self.ids: dict[str, str] = {}  # widget key -> widget id, from the elements drawn so far
        self.values: dict[str, object] = {}  # widget key -> the proto of the element last drawn
        self.state: dict[str, tuple[str, object]] = {}  # widget id -> (WidgetState field, value), as a browser keeps
        self.drawn: dict[str, str] = {}  # widget id -> element kind, drawn by the last run

    def close(self) -> None:
        self.ws.close()

    def value(self, key: str):
        """The value the widget ``key`` holds now, as the browser would send it (None if never set)."""
        found = self.state.get(self.ids.get(key, ""))
        if found is None:
            return None
        field, value = found
        return value[0] if field == "double_array_value" and len(value) == 1 else value

    def open(self, page: str = "") -> Run:
        """The first visit, as a link to ``/page`` (the app's root forwards to its first page)."""
        return self.rerun(page=page, query="")

    def switch(self, page: str) -> Run:
        """A click on ``page`` in the sidebar's navigation (the query string starts afresh, as in a browser)."""
        return self.rerun(page=page, query="")

    def rerun(self, *, page: str | None = None, query: str | None = None, widgets: dict | None = None) -> Run:
        """Send one ``rerun_script`` and read the server's messages until the run ends; ``widgets``: {key: value}
        of the widgets drawn earlier (str: text, bool: toggle, True for a button's click, a float: slider)."""
        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = self.query if query is None else query
        if page is not None:
            state.page_name = page
            if page in self.pages:
                state.page_script_hash = self.pages[page]
        elif self.page:
            state.page_script_hash = self.page
        trigger = None
        for key, value in (widgets or {}).items():
            wid = self.ids[key]
            kind = self.drawn.get(wid, "button")
            if kind == "button":
                trigger = wid
            else:
                field = STATE_FIELDS[kind][0]
                self.state[wid] = (field, [value] if field.endswith("array_value") else value)
        for wid in self.drawn:
            if wid in self.state:
                field, value = self.state[wid]
                widget = state.widget_states.widgets.add()
                widget.id = wid
                if field.endswith("array_value"):
                    getattr(widget, field).data.extend(value)
                else:
                    setattr(widget, field, value)
        if trigger is not None:
            widget = state.widget_states.widgets.add()
            widget.id, widget.trigger_value = trigger, True
        run = Run(started=time.perf_counter())
        self.ws.send(msg.SerializeToString())
        self._read(run)
        return run

    def _read(self, run: Run) -> None:
        deadline = run.started + self.timeout
        drawn: dict[str, str] = {}
        while True:
            data = self.ws.recv(timeout=max(0.1, deadline - time.perf_counter()))
            now = time.perf_counter() - run.started
            fwd = ForwardMsg()
            fwd.ParseFromString(data)
            kind = fwd.WhichOneof("type")
            if kind == "navigation":
                self.pages = {p.url_pathname: p.page_script_hash for p in fwd.navigation.app_pages}
                self.page = fwd.navigation.page_script_hash
            elif kind == "page_info_changed":
                self.query = fwd.page_info_changed.query_string
            elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                element = fwd.delta.new_element
                what = element.WhichOneof("type")
                proto = getattr(element, what)
                key = widget_key(getattr(proto, "id", "") or "")
                if key:
                    self.ids[key] = proto.id
                    self.values[key] = proto
                    drawn[proto.id] = what
                    if what in STATE_FIELDS and proto.set_value:
                        field, source = STATE_FIELDS[what]
                        value = getattr(proto, source)
                        self.state[proto.id] = (field, list(value) if field.endswith("array_value") else value)
                run.elements.append((now, what, key, proto))
                if what == "exception":
                    run.errors.append(f"exception: {proto.message[:300]}")
                elif what == "alert" and proto.format == ERROR_ALERT:
                    run.errors.append(f"error: {proto.body[:300]}")
            elif kind == "script_finished" and fwd.script_finished in FINISHED:
                run.finished_s = now
                if fwd.script_finished == FRAGMENT_FINISHED:
                    self.drawn.update(drawn)
                else:
                    self.drawn = drawn
                return
