"""Figures for papers: PNG and SVG through kaleido, and one compact offline HTML page for many figures.

Why kaleido 1.x (pinned in requirements.txt) and not 0.2.1: plotly 7 only drives kaleido >= 1
(``plotly.io`` refuses the 0.2.x renderer that bundled its own Chromium). Kaleido 1.x renders in a
Chrome or Chromium already installed on the machine (Debian's ``chromium`` here and in the Docker image)
and never downloads one at run time: only an explicit ``plotly.io.get_chrome()`` would, and nothing here
calls it. Checked offline (no network namespace): a PNG takes ~9 s on a cold start, ~3 s after.
"""

from __future__ import annotations

import html
from collections.abc import Mapping

import plotly.graph_objects as go

IMAGE_FORMATS = ("png", "svg")
DEFAULT_SIZE = (1000, 520)  # px, when the figure sets none; PNGs are rendered at 2x for print


class ExportError(ValueError):
    """An image could not be rendered; the message says what to install."""


def figure_image(fig: go.Figure, fmt: str = "png", *, scale: float = 2.0) -> bytes:
    """The figure as PNG or SVG bytes, at its own size (or :data:`DEFAULT_SIZE`)."""
    if fmt not in IMAGE_FORMATS:
        raise ExportError(f"unknown image format {fmt!r}; use one of {', '.join(IMAGE_FORMATS)}")
    import plotly.io as pio

    width = fig.layout.width or DEFAULT_SIZE[0]
    height = fig.layout.height or DEFAULT_SIZE[1]
    try:
        return pio.to_image(fig, format=fmt, width=width, height=height, scale=scale if fmt == "png" else 1)
    except (RuntimeError, ValueError) as err:  # kaleido missing, or no Chrome/Chromium to render with
        raise ExportError(f"could not render the figure as {fmt.upper()} ({err}). PNG and SVG need kaleido and an "
                          "installed Chrome or Chromium (e.g. apt-get install chromium); the HTML export "
                          "works without them.") from None


def figures_html(figures: Mapping[str, go.Figure], title: str = "HeRo Lens figures") -> str:
    """One standalone offline page holding every figure, with plotly.js inlined once (the first figure)
    and the others referring to it: a bundle of n figures is ~4.6 MB + their data, not n × 4.6 MB."""
    parts = []
    for i, (name, fig) in enumerate(figures.items()):
        div = fig.to_html(full_html=False, include_plotlyjs=i == 0, config={"displaylogo": False})
        parts.append(f"<section><h2>{html.escape(name)}</h2>{div}</section>")
    body = "\n".join(parts) or "<p>No figures.</p>"
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            "<style>body{font-family:sans-serif;margin:2em}section{margin-bottom:2em}</style></head>"
            f"<body><h1>{html.escape(title)}</h1>\n{body}\n</body></html>")
