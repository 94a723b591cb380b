"""The notebooks executed, as Markdown pages a reader opens without Jupyter: ``python scripts/render_notebooks.py
[--only NAME ...]`` (``make notebooks``) runs each of notebooks/ from top to bottom on this interpreter and writes
docs/notebooks/<name>.md with its figures beside it: the prose as it is, each code cell with what it printed and drew.

Bounded in size, so the pages stay small in git and quick to open: what a cell printed (its stdout; warnings and
progress bars on stderr are left out) keeps its first :data:`MAX_OUTPUT_LINES` lines (the page says how many it left
out); a plotly figure becomes one PNG at its own size (:func:`hero_core.viz.figure_export.figure_image` at scale 1),
an image output is kept as its PNG. A table prints as
text (its ``text/plain``), Markdown a cell displayed is inlined. The teaching notebook's solutions (cells tagged
``solution``, hidden in Jupyter) stay folded behind a "Solution" line.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from hero_core.files import atomic_write_text, say_wrote

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
PAGES = ROOT / "docs" / "notebooks"

MAX_OUTPUT_LINES = 40
MAX_LINE_CHARS = 300
PLOTLY = "application/vnd.plotly.v1+json"


def clipped(text: str) -> str:
    """``text`` cut to :data:`MAX_OUTPUT_LINES` lines of at most :data:`MAX_LINE_CHARS` characters."""
    lines = text.rstrip("\n").splitlines()
    kept = [line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " …" for line in lines[:MAX_OUTPUT_LINES]]
    if len(lines) > MAX_OUTPUT_LINES:
        kept.append(f"… ({len(lines) - MAX_OUTPUT_LINES} more lines)")
    return "\n".join(kept)


def fenced(text: str, language: str = "") -> list[str]:
    fence = "````" if "```" in text else "```"
    return [f"{fence}{language}", text, fence]


def plotly_png(spec: Mapping) -> bytes:
    """A notebook's plotly output as a PNG at the figure's own size."""
    import plotly.graph_objects as go

    from hero_core.viz.figure_export import figure_image

    return figure_image(go.Figure(spec), "png", scale=1.0)


def notebook_page(nb: Mapping, stem: str, *, render_plotly: Callable[[Mapping], bytes] = plotly_png
                  ) -> tuple[str, dict[str, bytes]]:
    """The Markdown page of executed notebook ``nb`` and its images by file name (under ``<stem>_files/``, a
    folder beside the page)."""
    images: dict[str, bytes] = {}

    def image(data: bytes) -> str:
        name = f"{stem}_files/figure-{len(images) + 1}.png"
        images[name] = data
        return f"![figure {len(images)}]({name})"

    lines = [f"<!-- Rendered from notebooks/{stem}.ipynb by scripts/render_notebooks.py (make notebooks); "
             "edit the notebook, not this page. -->", ""]
    for cell in nb["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "markdown":
            lines += [source, ""]
        elif cell["cell_type"] == "code":
            lines += code_cell(cell, source, image, render_plotly)
    return "\n".join(lines).rstrip("\n") + "\n", images


def code_cell(cell: Mapping, source: str, image: Callable[[bytes], str],
              render_plotly: Callable[[Mapping], bytes]) -> list[str]:
    """A code cell's source and outputs; a solution folded away."""
    body = [*fenced(source, "python"), ""]
    for output in cell.get("outputs", []):
        body += output_lines(output, image, render_plotly)
    if "solution" in cell.get("metadata", {}).get("tags", []):
        return ["<details><summary>Solution</summary>", "", *body, "</details>", ""]
    return body


def output_lines(output: Mapping, image: Callable[[bytes], str],
                 render_plotly: Callable[[Mapping], bytes]) -> list[str]:
    """One output of a code cell: printed text, displayed Markdown, a figure or an error."""
    kind = output["output_type"]
    if kind == "stream":  # what the cell printed; its stderr (warnings, progress bars) is the machine's, not the page's
        text = _text(output["text"])
        return [*fenced(clipped(text), "text"), ""] if output.get("name") == "stdout" and text.strip() else []
    if kind == "error":
        return [*fenced(clipped(f"{output['ename']}: {output['evalue']}"), "text"), ""]
    data = output.get("data", {})
    if "text/markdown" in data:
        return [_text(data["text/markdown"]), ""]
    if PLOTLY in data:
        return [image(render_plotly(data[PLOTLY])), ""]
    if "image/png" in data:
        return [image(base64.b64decode(_text(data["image/png"]))), ""]
    if "text/plain" in data:
        return [*fenced(clipped(_text(data["text/plain"])), "text"), ""]
    return []


def _text(value: str | list[str]) -> str:
    return "".join(value) if isinstance(value, list) else value


def execute(path: Path, timeout: int = 1800) -> dict:
    """Notebook ``path`` run from top to bottom in a kernel on this interpreter, one torch thread (as the tests run
    it), in its own folder; its outputs filled in."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    env = {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel spec runs "python": make that this interpreter
    try:
        NotebookClient(nb, kernel_name="python3", timeout=timeout, allow_errors=False,
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return nb


def write_page(nb: Mapping, stem: str, out: Path = PAGES) -> list[Path]:
    """The page and its figures under ``out`` (the figures' old folder replaced); the paths written."""
    page, images = notebook_page(nb, stem)
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out / f"{stem}_files", ignore_errors=True)
    written = [atomic_write_text(out / f"{stem}.md", page, mode=0o644)]
    for name, data in images.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
        written.append(out / name)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these notebooks (file names or stems) only")
    parser.add_argument("--out", type=Path, default=PAGES, help="where the pages go (default: %(default)s)")
    args = parser.parse_args(argv)
    paths = sorted(NOTEBOOKS.glob("*.ipynb"))
    if args.only:
        paths = [p for p in paths if p.name in args.only or p.stem in args.only]
        if not paths:
            raise SystemExit(f"no notebook named {' or '.join(args.only)} in {NOTEBOOKS}")
    start = time.perf_counter()
    pages = []
    for path in paths:
        print(f"running {path.name} …", flush=True)
        written = write_page(execute(path), path.stem, args.out)
        size = sum(p.stat().st_size for p in written)
        print(f"  {written[0]}: {len(written) - 1} figures, {size / 1024:.0f} KiB")
        pages.append(written[0])
    return say_wrote(*pages, took_s=round(time.perf_counter() - start))
