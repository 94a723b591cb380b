"""The import rules of docs/architecture.md, checked on the source (so a new import that breaks one fails)."""

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "hero_core"


def modules() -> list[str]:
    """Every hero_core module, subpackages included, as a dotted name below hero_core ("eval.suites")."""
    return sorted(".".join(p.relative_to(CORE).with_suffix("").parts) for p in CORE.rglob("*.py"))


def imported(module: str) -> set[str]:
    """Every module name a hero_core module imports (relative imports resolved to hero_core.<name>)."""
    path = CORE.joinpath(*module.split(".")).with_suffix(".py")
    package = ["hero_core", *module.split(".")[:-1]]
    if path.name == "__init__.py":
        package.append(path.parent.name)
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1])
                full = f"{base}.{node.module}" if node.module else base
                names.add(full)
                if node.module is None:
                    names |= {f"{base}.{a.name}" for a in node.names}
            else:
                names.add(node.module)
    return names


def test_the_core_never_imports_a_screen():
    assert {"eval.suites.runner", "bench.run"} <= set(modules())  # the subpackages are checked too
    for module in modules():
        assert not any(n.startswith("streamlit") for n in imported(module)), module


def test_the_library_never_imports_the_tooling():
    """hero_lens_tools (the browser harness) drives the app for tests and scripts; the library never needs it."""
    for module in modules():
        assert not any(n.startswith("hero_lens_tools") for n in imported(module)), module


def test_the_equations_know_no_transformers_names():
    for module in ("method.config", "method.memory", "method.router", "method.trace", "measures.accounting",
                   "train.warmstart"):
        assert not any(n.startswith("transformers") for n in imported(module)), module


def test_a_trace_loads_without_a_model():
    names = imported("method.trace")
    assert not names & {"torch", "hero_core.method.model", "hero_core.backbones.loading", "hero_core.method.router"}


def test_inference_never_imports_training():
    for module in ("method.model", "method.inject", "method.router", "method.call_state", "method.memory",
                   "method.trace"):
        assert not imported(module) & {"hero_core.train.train", "hero_core.train.train_data", "hero_core.train.losses",
                                    "hero_core.train.warmstart"}, module


def test_relative_imports_resolve_in_subpackages():
    assert ("hero_core.measures.accounting" in imported("eval.suites.harness")
            and "hero_core.eval.methods" in imported("eval.suites.harness"))


def test_no_module_is_over_500_lines():
    long = {m: n for m in modules() if (n := len(CORE.joinpath(*m.split(".")).with_suffix(".py")
                                               .read_text().splitlines())) > 500}
    assert not long, long


# Which folders each folder may import (docs/architecture.md), from the bottom up: the root's utilities (choices,
# files: "") and measures, words; backbones; data; the method; then train / analysis; eval; viz; bench; reports; cli.
# Nothing imports upwards, so a newcomer reads each folder knowing only the ones below it.
BASE = {"", "measures", "words"}
MAY_IMPORT = {
    "measures": {"measures", ""},
    "words": {"words"},
    "backbones": BASE | {"backbones"},
    "data": BASE | {"backbones", "data"},
    "method": BASE | {"backbones", "data", "method"},
    "train": BASE | {"backbones", "data", "method", "train"},
    "analysis": BASE | {"backbones", "data", "method", "analysis"},
    "eval": BASE | {"backbones", "data", "method", "analysis", "eval"},
    "viz": BASE | {"backbones", "data", "method", "analysis", "eval", "viz"},
    "bench": BASE | {"backbones", "data", "method", "train", "bench"},
    "reports": BASE | {"backbones", "data", "method", "analysis", "eval", "viz", "bench", "reports"},
    "cli": BASE | {"backbones", "data", "method", "train", "analysis", "eval", "viz", "bench", "reports", "cli"},
}


def layer(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 2 or CORE.joinpath(parts[1]).is_dir() else ""


def test_layers_import_downwards():
    assert set(MAY_IMPORT) == {p.name for p in CORE.iterdir() if (p / "__init__.py").exists()}
    for module in modules():
        if "." not in module:
            continue
        own = module.split(".")[0]
        used = {layer(n) for n in imported(module) if n.startswith("hero_core.") and n != "hero_core"}
        assert used <= MAY_IMPORT[own], (module, used - MAY_IMPORT[own])


# Each evaluation workflow is a package with one entry point (docs/architecture.md); what they share stays at the top.
EVAL_ENTRY_POINTS = {
    "suites": ("runner", "evaluate"),
    "frontier": ("curves", "frontier"),
    "answers": ("run", "run_answers"),
    "sweep": ("run", "sweep"),
    "study": ("runner", "run_study"),
}


def test_the_evaluation_is_laid_out_by_workflow():
    evaluation = CORE / "eval"
    assert len(list(evaluation.glob("*.py"))) <= 8, sorted(p.name for p in evaluation.glob("*.py"))
    packages = {p.name for p in evaluation.iterdir() if (p / "__init__.py").exists()}
    assert set(EVAL_ENTRY_POINTS) <= packages, packages
    for package, (module, function) in EVAL_ENTRY_POINTS.items():
        tree = ast.parse((evaluation / package / f"{module}.py").read_text())
        assert function in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, (package, function)


def test_the_package_root_stays_small():
    top = list(CORE.glob("*.py"))
    assert len(top) <= 16, sorted(p.name for p in top)


def _private_imports(paths, root: Path) -> list[str]:
    """``from x import _name`` anywhere in ``paths``, as "file:line name"."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                found += [f"{path.relative_to(root)}:{node.lineno} {a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_module_imports_another_modules_private_names():
    assert _private_imports(CORE.rglob("*.py"), CORE) == []


def test_no_app_module_or_script_imports_another_modules_private_names():
    root = CORE.parent
    assert _private_imports([*(root / "app").rglob("*.py"), *(root / "scripts").rglob("*.py")], root) == []


def test_no_script_app_or_library_module_edits_the_import_path():
    """scripts/, app/ and the tooling run against the installed packages (docs/architecture.md), so none touches
    ``sys.path``."""
    root = CORE.parent
    found = []
    for path in [*CORE.rglob("*.py"), *(root / "scripts").rglob("*.py"), *(root / "app").rglob("*.py"),
                 *(root / "hero_lens_tools").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name)
                    and node.value.id == "sys"):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == []
