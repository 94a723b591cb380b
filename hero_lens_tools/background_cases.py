"""The two cases where a visitor used to wait on the server's background work, each timed with that work on and off
(``scripts/app_load.py --background``).

* **A τ step during its prefetch.** A first visit draws Route explorer; the server then traces the run one τ step
  either side in the background (components.prefetch); the visitor steps τ at once, while that trace runs.
* **Compare during the warm-up.** A first visit draws Route explorer; the server then computes Compare's opening
  view in the background (components.warmup); the visitor opens Compare at once, while that runs.

Each case runs on a fresh server as ``make run`` starts it, and again with the background work off
(``HERO_LENS_WARMUP=0``, both cases on one fresh server): the visitor then computes everything itself, which is what
a visitor who does not wait for the background should take.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hero_core.reports.served_app import embedded_env
from hero_lens_tools.app_client import Visitor
from hero_lens_tools.app_load import served


def tau_step(visitor: Visitor) -> dict:
    tau = round(visitor.value("sb_tau") + 0.01, 2)
    step = visitor.rerun(widgets={"sb_tau": tau})
    return {"action_s": step.finished_s, "result_s": step.first("plotly_chart", "explorer_map"), "errors": step.errors}


def open_compare(visitor: Visitor) -> dict:
    compare = visitor.switch("compare")
    return {"action_s": compare.finished_s, "result_s": compare.first("dataframe"), "errors": compare.errors}


CASES: dict[str, Callable[[Visitor], dict]] = {"τ step during its prefetch": tau_step,
                                               "Compare during the warm-up": open_compare}


def one_server(names: list[str], *, background: bool, serve: Path | None = None) -> dict:
    """A fresh server, a first visit, then each case of ``names`` at once, in turn."""
    env = embedded_env()
    if not background:
        env["HERO_LENS_WARMUP"] = "0"
    with served(serve, env) as (base, _):
        visitor = Visitor(base)
        try:
            first = visitor.open("")
            rows = {name: CASES[name](visitor) for name in names}
        finally:
            visitor.close()
    return {name: {"first_page_s": first.finished_s, **row} for name, row in rows.items()}


def measure(repeats: int, *, serve: Path | None = None, say: Callable[[str], None] = print) -> dict:
    """Every case with the background work on (a fresh server per case: the case comes right after the first
    page) and off (the cases in turn on one fresh server: nothing runs in the background to wait for), ``repeats``
    times."""
    out: dict = {name: {"on": [], "off": []} for name in CASES}
    for _ in range(repeats):
        runs = [("on", one_server([name], background=True, serve=serve)) for name in CASES]
        runs.append(("off", one_server(list(CASES), background=False, serve=serve)))
        for side, rows in runs:
            for name, row in rows.items():
                out[name][side].append(row)
                say(f"  {name}, background {side}: {row['action_s']:.2f} s (first page {row['first_page_s']:.1f} s)")
    return out
