"""Serve the app as ``make run`` does: ``streamlit run app/main.py``, with the default model loading from the moment
the server process starts.

``python app/serve.py [streamlit options]`` takes ``streamlit run``'s options. Without it the first visitor waited for
the model after their page had asked for it: 4-6 s of server time on a 2-core CPU, most of it importing the model's
libraries (transformers' Llama modules alone 3.5 s), then reading the weights and one warm-up pass. Here a thread
loads the sidebar's default model into the very cache the pages read while the server boots and waits for its first
visitor: one who comes later finds it loaded, one who comes at once waits only for what is left (it joins the load).
The load is the first job of the server's background work (app/components/background.py), the one at normal
priority. ``streamlit run app/main.py`` serves the same app, loading on the first visit.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

MAIN = Path(__file__).resolve().with_name("main.py")
log = logging.getLogger("hero_lens.serve")


def _load_default_model() -> None:
    try:
        # imported here, on the loading thread: these imports are most of the load (the server boots meanwhile)
        started = time.perf_counter()
        from components.runtime import load_default_model  # this file's folder is on the path, as main.py's is

        hero = load_default_model()
        print(f"HeRo Lens: default model ({hero.checkpoint_name}) loaded in {time.perf_counter() - started:.1f} s "
              "while the server started", file=sys.stderr, flush=True)
    except Exception:  # noqa: BLE001 - the first page loads the model itself and shows any error readably
        log.exception("loading the default model at start failed; the first page will load it")


def main() -> int:
    from components.background import BACKGROUND, LOAD  # this file's folder is on the path, as main.py's is
    from streamlit.web import cli

    BACKGROUND.submit(_load_default_model, name="the default model's load", priority=LOAD, lowest=False)
    sys.argv = ["streamlit", "run", str(MAIN), *sys.argv[1:]]
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
