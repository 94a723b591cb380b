"""The import rules of docs/architecture.md, checked on the source (so a new import that breaks one fails)."""

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "hero_core"


def imported(module: str) -> set[str]:
    """Every module name a hero_core module imports (relative imports resolved to hero_core.<name>)."""
    tree = ast.parse((CORE / f"{module}.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = f"hero_core.{node.module}" if node.level else node.module
            names.add(base or "hero_core")
            if node.level and node.module is None:
                names |= {f"hero_core.{a.name}" for a in node.names}
    return names


def test_the_core_never_imports_a_screen():
    for path in CORE.glob("*.py"):
        assert not any(n.startswith("streamlit") for n in imported(path.stem)), path.name


def test_the_equations_know_no_transformers_names():
    for module in ("config", "memory", "router", "trace", "accounting", "warmstart"):
        assert not any(n.startswith("transformers") for n in imported(module)), module


def test_a_trace_loads_without_a_model():
    names = imported("trace")
    assert not names & {"torch", "hero_core.model", "hero_core.backbones", "hero_core.router"}


def test_inference_never_imports_training():
    for module in ("model", "inject", "router", "call_state", "memory", "trace"):
        assert not imported(module) & {"hero_core.train", "hero_core.losses", "hero_core.warmstart"}, module
