"""Many visitors on the served app at once: ``python scripts/app_load.py [--visitors 1 4 8 16] [--tokens 200]``.

Serves the app as ``make run`` does and drives visitors that speak Streamlit's own websocket protocol: 1 (each of the
sixteen prompts alone, one after another: the baseline and the reference numbers), then 4, 8 and 16 at once, each on
a fresh server (hero_lens_tools/app_load.py says what each visitor does and what is measured). Writes
docs/app_load.json and the table in docs/performance.md.

``--background`` times the two cases where a visitor used to wait for the server's background work (a τ step during
its prefetch, Compare during the warm-up), each with that work on and off (hero_lens_tools/background_cases.py),
stored under ``--label``; ``--serve DIR/app/serve.py`` serves another checkout's app (the code before a change) with
``PYTHONPATH=DIR``. ``--render`` measures nothing and redraws the page from the JSON. About 10 minutes for the load on
a 2-core machine, 5 for the cases.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from hero_core.reports.app_load_report import BLOCK, load_lines
from hero_core.reports.readme_block import replace_block
from hero_lens_tools import app_load, background_cases

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "app_load.json"
PAGE = ROOT / "docs" / "performance.md"
CONDITIONS = ("Measured on this project's 2-core machine beside the other work it runs (the load average at the start "
              "of each row is in docs/app_load.json); the lone baseline ran in the same invocation, so the ratios "
              "compare like with like.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--visitors", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--tokens", type=int, default=200, help="length of each visitor's prompt")
    parser.add_argument("--background", action="store_true", help="time the background-work cases instead")
    parser.add_argument("--repeats", type=int, default=1, help="fresh servers per background case")
    parser.add_argument("--label", default="after", help="the background cases' label (e.g. before / after)")
    parser.add_argument("--serve", type=Path, default=None, help="another checkout's app/serve.py")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--render", action="store_true", help="measure nothing: redraw the page from --out")
    args = parser.parse_args()
    result = _read(args.out)
    if args.serve is not None:  # the other checkout's hero_core too, in the server's process
        os.environ["PYTHONPATH"] = str(args.serve.resolve().parents[1])
    if args.background:
        print(f"background-work cases ({args.label}):", flush=True)
        result.setdefault("background", {})[args.label] = background_cases.measure(args.repeats, serve=args.serve)
    elif not args.render:
        result["load"] = measure_load(args)
    elif result.get("load", {}).get("runs"):  # the rows and targets again from the raw runs (the summaries' code)
        result["load"]["phases"], result["load"]["targets"] = app_load.summarise(result["load"]["runs"])
        args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    if not args.render:
        args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {args.out}")
    replace_block(PAGE, BLOCK, load_lines(result))
    print(f"updated {PAGE.relative_to(ROOT)}")
    return 0


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def measure_load(args) -> dict:
    counts = sorted(set(args.visitors))
    prompts = app_load.held_out_prompts(max(counts), args.tokens)
    print(f"{max(counts)} visitors alone, one after another (the baseline):", flush=True)
    raw = {"1": app_load.load(prompts, together=False, serve=args.serve)}
    for n in (c for c in counts if c > 1):
        print(f"{n} visitors at once:", flush=True)
        raw[str(n)] = app_load.load(prompts[:n], together=True, serve=args.serve)
    phases, goals = app_load.summarise(raw)
    command = "python scripts/app_load.py" + ("" if counts == [1, 4, 8, 16] else " --visitors " +
                                              " ".join(map(str, counts)))
    out = {"measured_on": time.strftime("%Y-%m-%d"), "command": command, "prompt_tokens": args.tokens,
           "conditions": CONDITIONS, "phases": phases, "targets": goals, "runs": raw}
    for row in out["targets"]:
        print(f"  {row}")
    return out


if __name__ == "__main__":
    sys.exit(main())
