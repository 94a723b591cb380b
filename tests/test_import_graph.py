"""The import graph of ``hero_core`` has no cycle, imports inside functions included.

A function-level import hides a cycle from Python (the module is loaded by the time the function runs) but not
from the reader: two modules that import each other are one module split in two. This test reads every module
under ``hero_core/`` with :mod:`ast` (nothing is imported) and builds the graph from *every* import statement in
the file, wherever it sits:

* module level, inside functions and methods, inside ``try`` and ``if`` blocks, and inside
  ``if TYPE_CHECKING:`` blocks: a type-only import still says the two modules know each other, so it counts
  like any other;
* ``importlib.import_module("hero_core.x")`` and ``__import__("hero_core.x")`` with a literal name count too
  (a name built at run time, as ``hero_core.cli.main`` does for its subcommands, cannot be read and is left out).

How an import becomes an edge (only edges between modules of ``hero_core`` are kept):

* ``import a.b.c`` is an edge to ``a.b.c``;
* ``from a.b import c`` is an edge to the submodule ``a.b.c`` when there is one, and otherwise to the package
  ``a.b`` (its ``__init__``), whose namespace ``c`` comes from;
* relative imports resolve against the importing module's package (a package's ``__init__`` is its own
  package): ``from .. import x`` in ``hero_core/method/model.py`` is ``from hero_core import x``.

A package's ``__init__`` that re-exports from its children is an edge parent -> child, like any import. The parent
packages Python initialises on the way to a module (``import hero_core.method.model`` runs ``hero_core/__init__.py``
first) are *not* edges: every module would otherwise sit in a cycle with each ancestor that re-exports anything,
and that ordering is Python's, not the code's. The top-level ``hero_core/__init__.py`` imports a few names from
``core`` eagerly (edges ``hero_core`` -> those modules) and leaves ``plot`` to be imported as a submodule on demand
(no code there, so no edge); a module that imports *from* ``hero_core`` itself (``from hero_core import
HeroModel``) gets an edge to ``hero_core`` and so into whatever it re-exports, as it should.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "hero_core"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE
DYNAMIC_IMPORTS = {"import_module", "__import__"}


def module_files(root: Path = ROOT, package: str = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Every module under ``root``: dotted name -> (file, is it a package ``__init__``)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        modules[".".join((package, *parts))] = (path, is_package)
    return modules


def imported_names(tree: ast.AST, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` that the parsed module ``module`` imports, anywhere in its body."""
    own_package = module if is_package else module.rpartition(".")[0]
    targets: set[str] = set()

    def add(name: str) -> None:
        if name in known:
            targets.add(name)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = own_package.split(".")
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                add(sub if sub in known else source)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in DYNAMIC_IMPORTS and isinstance(node.args[0].value, str):
                add(node.args[0].value)
    targets.discard(module)
    return targets


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the modules it imports, for every module under ``root``."""
    modules = module_files(root, package)
    known = set(modules)
    return {name: imported_names(ast.parse(path.read_text(encoding="utf-8"), str(path)), name, is_package, known)
            for name, (path, is_package) in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path ``[a, b, ..., a]``, or None when the graph is acyclic (depth-first)."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path, on_path = [start], {start}
        stack = [iter(sorted(graph.get(start, ())))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
            elif nxt in on_path:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in done:
                path.append(nxt)
                on_path.add(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def test_the_cycle_finder_finds_a_hand_made_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"a"}}) == ["a", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set(), "d": {"a", "c"}}) is None


def test_imports_resolve_as_the_docstring_says(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .sub.leaf import thing\n")
    (pkg / "sub" / "__init__.py").write_text("from . import leaf\n")
    (pkg / "sub" / "leaf.py").write_text(
        "def f():\n    from .. import other\n    from ..other import x\n    from pkg import sub\n")
    (pkg / "other.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub import leaf\n"
        "import importlib\nimportlib.import_module('pkg.sub.leaf')\n")
    graph = import_graph(pkg, "pkg")
    assert graph == {"pkg": {"pkg.sub.leaf"}, "pkg.sub": {"pkg.sub.leaf"},
                     "pkg.sub.leaf": {"pkg.other", "pkg.sub"}, "pkg.other": {"pkg.sub.leaf"}}
    assert find_cycle(graph) == ["pkg.sub.leaf", "pkg.other", "pkg.sub.leaf"]


def test_hero_core_imports_have_no_cycle():
    graph = import_graph()
    assert len(graph) > 50 and graph["hero_core"], "the graph should cover the package"
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle in hero_core (imports inside functions count): " + " -> ".join(cycle)
