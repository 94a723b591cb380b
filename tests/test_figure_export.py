"""Figures for papers: PNG / SVG through kaleido (offline, with the installed Chromium) and the compact HTML bundle."""

import shutil

import plotly.graph_objects as go
import pytest

from hero_core.viz.figure_export import ExportError, figure_image, figures_html
from hero_core.viz.figures import figure_html, layer_skip_bars, skip_heatmap

PLOTLY_JS_MARK = "plotly.js v"  # the banner at the top of the inlined library


@pytest.fixture(scope="module")
def figures(tiny):
    trace = tiny.trace("The cat sat on the mat.")
    return {"skip map": skip_heatmap(trace), "layer skip rates": layer_skip_bars([trace], ["hero"]),
            "bars": go.Figure(go.Bar(y=[1, 3, 2]))}


def test_bundle_inlines_plotly_once(figures):
    bundle = figures_html(figures, "three <figures>")
    single = figure_html(figures["bars"])
    assert bundle.count(PLOTLY_JS_MARK) == single.count(PLOTLY_JS_MARK) >= 1
    assert len(bundle) < 1.5 * len(single)  # three figures, one copy of plotly.js
    assert bundle.count("<section>") == 3 and "three &lt;figures&gt;" in bundle
    assert "<script src=" not in bundle  # nothing loads from the network: opens offline


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("google-chrome") or shutil.which("chrome")),
                    reason="PNG/SVG export renders in an installed Chrome or Chromium")
def test_png_and_svg(figures):
    png = figure_image(figures["bars"], "png")
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    svg = figure_image(figures["layer skip rates"], "svg")
    assert b"<svg" in svg[:500]


def test_unknown_format_is_an_error(figures):
    with pytest.raises(ExportError, match="unknown image format"):
        figure_image(figures["bars"], "gif")
