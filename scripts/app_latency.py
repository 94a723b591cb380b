"""How long every page of the app takes, as a person sees it: browser clock, server clock and CPU, per action.

``python scripts/app_latency.py [--repeats 2] [--tokens 200] [--profile] [--only NAME ...]`` serves ``app/main.py``
as ``make run`` does (embedded SmolLM2-135M-Instruct, the default checkpoint) and drives it in headless Chromium on
the same machine, through the actions people take, in this order:

* the first visit after the server starts (the model load included) and a reload;
* a switch to every page at its defaults, through the sidebar;
* a new prompt (fresh held-out text of ``--tokens`` tokens, never seen by the server) pasted into Route explorer,
  Memory view, Why this decision? (a 40-token prompt too) and Compare runs, each routed with the page's button;
* a click on a skip-map cell and a τ change (the sidebar slider, one step);
* Compare opened by link with 1, 2, 4 and 6 checkpoints.

Per action (:func:`hero_core.reports.page_clock.measure`): seconds from the click to the first meaningful content and
to the page drawn and idle, the server's own time (its reruns, timed by app/components/rerun_timing.py), the CPU
seconds of the server and of Chromium, Chromium's script / layout / style seconds, and the SVG nodes on the page.
``--repeats`` runs the whole sequence on a fresh server each time (every repeat is a first user); the table gives
the median and the range. ``--profile`` also profiles every rerun of the server and keeps, per action, the functions
that took the most time. Writes docs/app_latency.json, the table in docs/performance.md and its summary sentence.
Run it on a quiet machine: it takes about 6 minutes a repeat.
"""

from __future__ import annotations

import argparse
import json
import pstats
import statistics
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from hero_core.reports.app_latency_report import latency_lines, latency_table, summary_words
from hero_core.reports.page_clock import CONTENT_JS, instrument, measure
from hero_core.reports.readme_block import replace_block
from hero_core.reports.served_app import embedded_env, served_app
from hero_lens_tools.app_browser import ATTRIBUTE_BUTTON_JS, FIND_SKIP_MAP_JS, SKIP_MAP_JS, browser_tab
from hero_lens_tools.app_load import held_out_prompts

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "app_latency.json"
PERFORMANCE_PAGE = ROOT / "docs" / "performance.md"
PAGES = {"memory": "Memory view", "why": "Why this decision?", "compare": "Compare runs", "learn": "Learn",
         "dataset": "Data set", "generate": "Generate", "explorer": "Route explorer"}
PROMPT_PAGES = ("explorer", "memory", "why", "compare")
COMPARE_CHECKPOINTS = ("hero-10-r4", "local-10", "hero-25", "local-25", "hero-40", "local-40")
# The targets (seconds, browser clock): (first meaningful content, idle), None where none is set.
TARGETS = {"first visit": (8.0, None), "reload": (None, 2.0), "new prompt": (1.0, None), "cell click": (None, 0.5),
           "τ change": (None, 0.5), "page switch": (1.5, 3.0), "compare ×4": (None, 4.0), "compare ×6": (None, 6.0),
           "why, 40 tokens": (None, 5.0)}
SKIP_MAP_DRAWN = f"(() => {{ const g = {FIND_SKIP_MAP_JS}; return !!(g && g.querySelector('.main-svg')); }})()"


class Session:
    """One browser tab on one served app, and the server's rerun log."""

    def __init__(self, tools, base: str, log: Path) -> None:
        self.tools, self.base, self.log = tools, base, log
        self.rows: list[dict] = []

    def time(self, kind: str, what: str, action: Callable[[], None], *, new_document: bool = False,
             **wait) -> dict:
        row = {"kind": kind, "action": what, **measure(self.tools, action, new_document=new_document, log=self.log,
                                                        **wait)}
        if row["exception"] or row["errors"]:
            raise SystemExit(f"{what}: the page shows an error: {row['errors'] or 'an exception'}")
        self.rows.append(row)
        print(f"  {what:<42} content {row['content_s']:6.2f} s · idle {row['idle_s']:6.2f} s · server "
              f"{row['server_s']:6.2f} s ({row['server_reruns']} reruns) · CPU server {row['server_cpu_s']} s, "
              f"Chromium {row['browser_cpu_s']} s (script {row['browser_script_s']} s, layout "
              f"{row['browser_layout_s']} s) · {row['svg_nodes']} SVG nodes", flush=True)
        return row

    def goto(self, path: str) -> Callable[[], None]:
        return lambda: self.tools.send("Page.navigate", {"url": f"{self.base}/{path}"})

    def nav(self, page: str) -> Callable[[], None]:
        js = f"document.querySelector('[data-testid=\"stSidebarNav\"] a[href$=\"/{page}\"]').click(), true"
        return lambda: self.tools.eval(js)

    def paste(self, prompt: str) -> Callable[[], None]:
        """Type ``prompt`` over the prompt box (retrying while Streamlit redraws it), then press the page's button."""
        want = json.dumps(prompt)
        self.tools.wait_for("document.querySelector('textarea') !== null", what="the prompt box")
        for _ in range(5):
            self.tools.eval("(() => { const t = document.querySelector('textarea'); t.focus(); t.select(); "
                            "return true; })()")
            self.tools.send("Input.insertText", {"text": prompt})
            time.sleep(0.2)
            if self.tools.eval(f"document.querySelector('textarea')?.value === {want}"):
                break
        else:
            raise SystemExit("the prompt box never held the pasted prompt")
        return self.mouse_click("[...document.querySelectorAll('button')].find(b => b.innerText.trim() === "
                                "'Route this prompt')")

    def mouse_click(self, element_js: str) -> Callable[[], None]:
        """A real mouse click on the element's centre (the prompt box loses focus first and commits its text, as
        it does under a person's click; an element.click() would leave it uncommitted)."""
        xy = self.tools.eval(f"(() => {{ const e = {element_js}; e.scrollIntoView({{block: 'center'}}); "
                             "const r = e.getBoundingClientRect(); "
                             "return [r.left + r.width / 2, r.top + r.height / 2]; "
                             "})()")

        def click() -> None:
            for kind in ("mousePressed", "mouseReleased"):
                self.tools.send("Input.dispatchMouseEvent", {"type": kind, "x": xy[0], "y": xy[1], "button": "left",
                                                             "clickCount": 1})
        return click

    def click_cell(self, token: int, block: int) -> Callable[[], None]:
        xy = self.tools.eval(
            f"(() => {{ const g = {FIND_SKIP_MAP_JS}; g.scrollIntoView(); const L = g._fullLayout; "
            f"const r = g.getBoundingClientRect(); return [r.left + L._size.l + L.xaxis.l2p({token}), "
            f"r.top + L._size.t + L.yaxis.l2p({block + 1})]; }})()")
        self.tools.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": xy[0], "y": xy[1]})
        time.sleep(0.3)  # plotly resolves a click to the point under the last hover

        def click() -> None:
            for kind in ("mousePressed", "mouseReleased"):
                self.tools.send("Input.dispatchMouseEvent", {"type": kind, "x": xy[0], "y": xy[1], "button": "left",
                                                             "clickCount": 1})
        return click

    def tau_step(self) -> Callable[[], None]:
        self.tools.eval("document.querySelector('[data-testid=\"stSidebar\"] [data-testid=\"stSlider\"] "
                        "input[type=\"range\"]').focus(), true")

        def press() -> None:
            for kind in ("keyDown", "keyUp"):
                self.tools.send("Input.dispatchKeyEvent", {"type": kind, "key": "ArrowRight", "code": "ArrowRight",
                                                           "windowsVirtualKeyCode": 39})
        return press


def page_content_js(title: str) -> str:
    """The first meaningful content of the page titled ``title`` (its own heading, then a chart, metric or table)."""
    return f"(document.querySelector('h1')?.innerText || '').startsWith({json.dumps(title)}) && {CONTENT_JS}"


def map_changed_js(tools) -> str:
    tools.eval(f"window.__heroMapBefore = JSON.stringify({SKIP_MAP_JS}), true")
    return f"JSON.stringify({SKIP_MAP_JS}) !== window.__heroMapBefore"


def one_repeat(prompts: list[str], short_prompt: str, only: set[str] | None, profile_dir: Path | None) -> list[dict]:
    log = Path(tempfile.mkdtemp(prefix="hero-latency-")) / "reruns.jsonl"
    env = {**embedded_env(), "HERO_LENS_TIMINGS": str(log)}
    if profile_dir:
        env["HERO_LENS_PROFILE"] = str(profile_dir)
    wanted = (lambda kind: True) if not only else (lambda kind: kind in only)
    with served_app(env, start_timeout=180) as base, browser_tab() as tools:
        instrument(tools)
        s = Session(tools, base, log)
        s.time("first visit", "first visit (model load included)", s.goto(""), new_document=True,
               content_js=SKIP_MAP_DRAWN)
        s.time("reload", "reload of Route explorer", lambda: tools.send("Page.reload"), new_document=True,
               content_js=SKIP_MAP_DRAWN)
        if wanted("page switch"):
            for page, title in PAGES.items():
                s.time("page switch", f"switch to {title}", s.nav(page), content_js=page_content_js(title))
        if wanted("new prompt"):
            fresh = iter(prompts)
            for page in PROMPT_PAGES:
                if page != "explorer" or s.rows[-1]["action"] != f"switch to {PAGES['explorer']}":
                    measure(tools, s.goto(page), new_document=True)  # opened and settled, not timed
                for _ in range(2 if page == "explorer" else 1):
                    done = map_changed_js(tools) if page in ("explorer", "memory") else None
                    s.time("new prompt", f"new prompt on {PAGES[page]}", s.paste(next(fresh)), done_js=done,
                           **({"content_js": done} if done else {}))
            # the decision the page opens on is attributed at once when it is among the first 24 tokens, else on
            # the button: either way the 40-token target is the attribution drawn
            s.time("why, 40 tokens", "new 40-token prompt on Why this decision?", s.paste(short_prompt))
            if tools.eval(ATTRIBUTE_BUTTON_JS):  # a late decision is attributed on the button: time the click
                s.time("why, 40 tokens", "attribute the 40-token prompt's decision (button)",
                       s.mouse_click(ATTRIBUTE_BUTTON_JS),
                       done_js="document.body.innerText.includes('contribution of each token') || "
                               "[...document.querySelectorAll('.gtitle')].some(t => t.textContent.includes("
                               "'contribution of each token'))")
        if wanted("cell click") or wanted("τ change"):
            measure(tools, s.goto("explorer"), new_document=True)
            s.time("cell click", "click a skip-map cell", s.click_cell(3, 5),
                   done_js="document.body.innerText.includes('Selected: token 3 ')")
            s.time("τ change", "τ one step up (sidebar)", s.tau_step())
        if wanted("compare"):
            for n in (1, 2, 4, 6):
                query = urllib.parse.urlencode({"compare_preset": "Checkpoints"}) + "".join(
                    f"&compare_checkpoints={urllib.parse.quote(c)}" for c in COMPARE_CHECKPOINTS[:n])
                s.time(f"compare ×{n}", f"Compare with {n} checkpoint(s), by link", s.goto(f"compare?{query}"),
                       new_document=True)
        if profile_dir:
            attach_profiles(s.rows, log, profile_dir)
        return s.rows


def attach_profiles(rows: list[dict], log: Path, profile_dir: Path, top: int = 12) -> None:
    """Per action, the functions (own time and cumulative) that took the most of its server reruns."""
    reruns = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    # the rows are in order; give each action the reruns that started between it and the next
    # (measure() recorded how many; they are the next ones in the log)
    for row in rows:
        row["profile"] = None
    cursor = 0
    for row in rows:
        n = row["server_reruns"] or 0
        mine = reruns[cursor:cursor + n]
        cursor += n
        files = [profile_dir / f"{r['number']:04d}-{r['page']}.prof" for r in mine]
        files = [str(f) for f in files if f.exists()]
        if not files:
            continue
        stats = pstats.Stats(*files)
        entries = sorted(stats.stats.items(), key=lambda kv: kv[1][3], reverse=True)  # cumulative time
        row["profile"] = [{"function": f"{Path(fn).name}:{line}:{name}", "cumulative_s": round(ct, 3),
                           "own_s": round(tt, 3)} for (fn, line, name), (_, _, tt, ct, _) in entries[:top]]


def summarise(repeats: list[list[dict]]) -> list[dict]:
    by_action: dict[str, list[dict]] = {}
    for rows in repeats:
        for row in rows:
            by_action.setdefault(row["action"], []).append(row)
    out = []
    for action, rows in by_action.items():
        line = {"action": action, "kind": rows[0]["kind"], "n": len(rows)}
        for key in ("content_s", "idle_s", "server_s", "server_cpu_s", "browser_cpu_s", "browser_script_s",
                    "browser_layout_s", "svg_nodes"):
            values = [r[key] for r in rows if r.get(key) is not None]
            if values:
                line[key] = round(statistics.median(values), 3)
                line[f"{key}_range"] = [min(values), max(values)]
        target = TARGETS.get(rows[0]["kind"]) or TARGETS.get("page switch" if rows[0]["kind"] == "page switch"
                                                              else "", (None, None))
        line["target_content_s"], line["target_idle_s"] = target
        line["met"] = all(limit is None or line.get(key, 0) <= limit
                          for key, limit in (("content_s", target[0]), ("idle_s", target[1])))
        out.append(line)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2, help="whole sequences, each on a fresh server")
    parser.add_argument("--tokens", type=int, default=200, help="length of the fresh prompts")
    parser.add_argument("--profile", action="store_true", help="profile the server's reruns too")
    parser.add_argument("--only", nargs="*", help="action kinds to run beside the first visit and reload: "
                        "'page switch', 'new prompt', 'cell click', 'τ change', 'compare'")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--no-page", action="store_true", help="do not rewrite docs/performance.md's table")
    parser.add_argument("--render", action="store_true",
                        help="measure nothing: draw the page's table and its summary sentence from --out")
    args = parser.parse_args()
    if args.render:
        return render(json.loads(args.out.read_text()))
    per_repeat = 2 + len(PROMPT_PAGES)
    prompts = held_out_prompts(per_repeat * args.repeats + 1, args.tokens)
    short = held_out_prompts(args.repeats + 1, 40)
    repeats = []
    for i in range(args.repeats):
        print(f"repeat {i + 1} of {args.repeats} (fresh server):", flush=True)
        profile_dir = Path(tempfile.mkdtemp(prefix="hero-profile-")) if args.profile else None
        repeats.append(one_repeat(prompts[i * per_repeat:(i + 1) * per_repeat], short[i],
                                  set(args.only) if args.only else None, profile_dir))
    summary = summarise(repeats)
    text = "\n".join(latency_table(summary))
    print("\n" + text)
    args.out.write_text(json.dumps({"prompt_tokens": args.tokens, "repeats": args.repeats,
                                    "measured_on": time.strftime("%Y-%m-%d"), "summary": summary,
                                    "runs": repeats}, indent=1) + "\n")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    if not args.no_page and not args.only:
        render(json.loads(args.out.read_text()))
    return 0


def render(result: dict) -> int:
    """docs/performance.md's table and its summary sentence, from a run's results."""
    replace_block(PERFORMANCE_PAGE, "app-latency", latency_lines(result))
    print(f"updated {PERFORMANCE_PAGE.relative_to(ROOT)}")
    replace_block(PERFORMANCE_PAGE, "app-latency-words", summary_words(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
