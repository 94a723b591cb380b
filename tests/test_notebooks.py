"""Notebooks: committed without outputs, and each runs headlessly from top to bottom without an error.

Outputs are stripped in git (small diffs, no stale numbers) and produced here by executing every notebook
with nbclient on the project's own interpreter. Notebook 02 runs on fewer texts per domain here
(``HERO_LENS_NB_ITEMS``): same cells, same code paths, less time. Readers get the executed notebooks as pages in
docs/notebooks/ (``make notebooks``): each executed notebook here is also rendered as such a page, and the committed
pages are checked to be there, whole and bounded in size.
"""

import json
import os
import re
import sys
import time
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
PAGES = NOTEBOOKS.parent / "docs" / "notebooks"
PAGES_MAX_BYTES = 4 * 2**20  # the three pages and their figures together
EXPECTED = ("01_quickstart.ipynb", "02_reasoning_vs_code.ipynb", "03_teaching_demo.ipynb")
TEST_ITEMS = "4"  # texts per domain for notebook 02 under test (12 by default)


def load(name: str) -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOKS / name, as_version=4)


def test_the_notebooks_are_all_there():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", EXPECTED)
def test_committed_notebooks_are_valid_and_stripped(name):
    nb = load(name)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{name}: a code cell has saved outputs; strip them before committing"
            assert cell.execution_count is None, f"{name}: a code cell has an execution count; strip outputs"


def test_quickstart_needs_under_ten_lines():
    first = next(c for c in load("01_quickstart.ipynb").cells if c.cell_type == "code")
    lines = [line for line in first.source.splitlines() if line.strip()]
    assert len(lines) < 10
    assert "plot.skip_map(trace)" in first.source and "plot.memory_map(trace" in first.source
    assert not any(line.startswith("from hero_core.") for line in lines)  # the top-level API only


def test_teaching_notebook_hides_each_solution():
    cells = load("03_teaching_demo.ipynb").cells
    solutions = [c for c in cells if "solution" in c.metadata.get("tags", [])]
    assert len(solutions) == 5
    for cell in solutions:
        assert cell.metadata["jupyter"]["source_hidden"] is True
        assert "check(" in cell.source  # the solution runs the same check as the student's answer


def test_the_rendered_pages_are_there_and_bounded():
    """docs/notebooks/ holds a page per notebook (make notebooks), every figure a page links to exists, and the
    whole folder stays small enough for git."""
    for name in EXPECTED:
        page = PAGES / f"{Path(name).stem}.md"
        assert page.is_file(), f"{page} is missing: run make notebooks"
        text = page.read_text(encoding="utf-8")
        linked = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
        assert linked, f"{page.name} shows no figure"
        assert all((PAGES / link).is_file() for link in linked), page.name
        assert "```python" in text and "```text" in text  # code and what it printed
    assert sum(p.stat().st_size for p in PAGES.rglob("*") if p.is_file()) < PAGES_MAX_BYTES


# -- execution -----------------------------------------------------------------------------------------------
def outputs_of(nb: nbformat.NotebookNode) -> list[dict]:
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs]


def markdown_outputs(nb: nbformat.NotebookNode) -> list[str]:
    return [out["data"]["text/markdown"] for out in outputs_of(nb) if "text/markdown" in out.get("data", {})]


def execute(nb: nbformat.NotebookNode, monkeypatch) -> float:
    from nbclient import NotebookClient

    # The kernel spec runs "python": make that this interpreter (the project's venv under `make test`).
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("HERO_LENS_NB_ITEMS", TEST_ITEMS)
    # One torch thread in the kernel: when anything else holds a core (a training run beside `make test`),
    # two threads on two cores oversubscribe and notebook 02 ran 25x slower here (> 600 s per cell).
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("HERO_LENS_EXPORT_FIGURES", raising=False)
    start = time.perf_counter()
    NotebookClient(nb, kernel_name="python3", timeout=600, allow_errors=False,
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return time.perf_counter() - start


def assert_renders(nb: nbformat.NotebookNode, name: str) -> None:
    """The executed notebook as the page make notebooks writes: every plotly figure an image, every text output
    cut to the page's bound (the PNG export itself is the figure export's, tested there)."""
    from hero_core.reports.notebook_pages import MAX_OUTPUT_LINES, PLOTLY, notebook_page

    page, images = notebook_page(nb, Path(name).stem, render_plotly=lambda spec: b"png")
    figures = [out for out in outputs_of(nb) if PLOTLY in out.get("data", {})]
    assert len(images) >= len(figures) > 0
    for block in re.findall(r"```text\n(.*?)\n```", page, flags=re.S):
        assert block.count("\n") <= MAX_OUTPUT_LINES, name


def assert_offline_figures(nb: nbformat.NotebookNode, name: str) -> None:
    figures = [out for out in outputs_of(nb) if "application/vnd.plotly.v1+json" in out.get("data", {})]
    assert figures, f"{name} drew no plotly figure"
    text = json.dumps(outputs_of(nb))
    assert re.search(r"<script[^>]*\bsrc=", text) is None, f"{name}: an output loads a script from elsewhere"
    assert "cdn.plot.ly" not in text and "cdnjs" not in text


@pytest.mark.slow
def test_quickstart_runs(monkeypatch):
    nb = load("01_quickstart.ipynb")
    seconds = execute(nb, monkeypatch)
    assert_offline_figures(nb, "01")
    assert_renders(nb, "01_quickstart.ipynb")
    text = "".join(out.get("text", "") for out in outputs_of(nb))
    assert "router checkpoint:" in text or "UNTRAINED" in text  # it always says which router it used
    print(f"01_quickstart: {seconds:.0f} s")


@pytest.mark.slow
def test_reasoning_vs_code_runs_and_states_computed_findings(monkeypatch):
    nb = load("02_reasoning_vs_code.ipynb")
    seconds = execute(nb, monkeypatch)
    assert_offline_figures(nb, "02")
    assert_renders(nb, "02_reasoning_vs_code.ipynb")
    findings = [m for m in markdown_outputs(nb) if "Findings" in m]
    assert len(findings) == 5  # one per analysis section, each built from the computed tables
    for text in findings:
        assert "nan" not in text.lower().split() and "{" not in text
    summary = markdown_outputs(nb)[-1]
    assert f"On {TEST_ITEMS} texts per domain" in summary
    print(f"02_reasoning_vs_code ({TEST_ITEMS} texts per domain): {seconds:.0f} s")


@pytest.mark.slow
def test_teaching_demo_runs_and_checks_answers(monkeypatch):
    nb = load("03_teaching_demo.ipynb")
    # Answer exercise 1 correctly and exercise 4 wrongly: the checks must tell them apart.
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith("ex1_runs = None"):
            cell.source = "ex1_runs = [True, False, True]\nex1_scale = [0.880797, 0.731059, 0.5]"
        if cell.cell_type == "code" and cell.source.startswith("ex4_layer = None"):
            cell.source = "ex4_layer = -1"
    seconds = execute(nb, monkeypatch)
    assert_offline_figures(nb, "03")
    assert_renders(nb, "03_teaching_demo.ipynb")
    text = "".join(out.get("text", "") for out in outputs_of(nb))
    assert "✓ Exercise 1 (which run): correct" in text and "✓ Exercise 1 (scales): correct" in text
    assert "✗ Exercise 4" in text
    assert "✎ Exercise 2: not answered yet" in text
    print(f"03_teaching_demo: {seconds:.0f} s")
