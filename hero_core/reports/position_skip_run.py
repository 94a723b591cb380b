"""FFNs skipped per token by absolute position, on 2,048-token sequences of held-out text.

``OMP_NUM_THREADS=1 python scripts/position_skip.py [--checkpoints NAME ...] [--sequences 2]``
packs each domain's eval-split texts (chat, code, reasoning) into sequences of ``--max-tokens`` tokens, traces them
under every checkpoint (hero_core.eval.frontier.position_skip.measure) and reports skip per absolute-position bin
(token 0 alone, 1-15, 16-127, 128-511, 512-2047), param skip with and without the first token, and
skip(512-2047) / skip(16-127) against the 0.75 target. It writes docs/experiments/position-skip/results.json, renders
README.md beside it and draws docs/figures/position_skip.png; ``--report`` only re-renders the page and the figure from
results.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from hero_core.data.results_json import command_line, measured_or_saved
from hero_core.eval.frontier import position_skip as ps
from hero_core.files import say_wrote

# This module measures, renders and is the command line of scripts/position_skip.py (its docstring's first
# paragraph is --help); the numbers, tables and figure are hero_core.eval.frontier.position_skip.
ROOT = Path(__file__).resolve().parents[2]

OUT = ROOT / "docs" / "experiments" / "position-skip"
FIGURE = ROOT / "docs" / "figures" / "position_skip.png"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoints", nargs="+", default=list(ps.DEFAULT_CHECKPOINTS),
                   help="bundled checkpoint names or directories, each loaded via hero_core.method.model.load_hero "
                        f"(default: {' '.join(ps.DEFAULT_CHECKPOINTS)})")
    p.add_argument("--sequences", "--limit", dest="sequences", type=int, default=2,
                   help="sequences of --max-tokens tokens per domain (default 2; --limit is the same flag)")
    p.add_argument("--max-tokens", type=int, default=ps.SEQUENCE_TOKENS,
                   help=f"tokens per sequence (default {ps.SEQUENCE_TOKENS}, the most HeroModel traces)")
    p.add_argument("--domains", nargs="+", default=["chat", "code", "reasoning"], help="held-out domains to read")
    p.add_argument("--device", default="cpu", help="cpu | cuda | auto")
    p.add_argument("--out", type=Path, default=OUT, help="folder for results.json and README.md")
    p.add_argument("--figure", type=Path, default=FIGURE, help="where the PNG figure goes")
    p.add_argument("--report", action="store_true", help="only re-render README.md and the figure from results.json")
    args = p.parse_args(argv)
    if args.sequences < 1:
        p.error("--sequences must be at least 1")
    return args


def measure(args: argparse.Namespace, command: str) -> dict:
    started = time.perf_counter()
    tokens = ps.measure(args.checkpoints, args.domains, args.sequences, args.max_tokens, device=args.device,
                        progress=lambda msg: print(f"[{time.perf_counter() - started:6.0f} s] {msg}", file=sys.stderr))
    summary = ps.summarise(tokens)
    seconds = time.perf_counter() - started
    meta = {"command": command, "checkpoints": list(args.checkpoints), "max_tokens": args.max_tokens,
            "sequences_per_domain": {d: args.sequences for d in args.domains}, "device": args.device,
            "seconds": seconds, "n_routed": int((tokens.ffn_executed + tokens.ffn_skipped).iloc[0])}
    return {"meta": meta, "summary": summary}


def render(results: dict, out: Path, figure: Path) -> None:
    from hero_core.viz.figure_export import figure_image

    (out / "README.md").write_text(ps.readme(results), encoding="utf-8")
    figure.parent.mkdir(parents=True, exist_ok=True)
    figure.write_bytes(figure_image(ps.position_skip_figure(results["summary"]), "png"))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    path = args.out / "results.json"
    command = command_line("position_skip", sys.argv[1:] if argv is None else argv, "1")
    results = measured_or_saved(path, args.report, lambda: measure(args, command), indent=2)
    render(results, args.out, args.figure)
    print(ps.markdown_table(results["summary"]))
    return say_wrote(path, args.out / "README.md", args.figure)


if __name__ == "__main__":
    raise SystemExit(main())
