"""The package's layers: imports point one way, with no cycle, lazy imports included.

Every ``import`` statement in ``torchrecorder/`` (at module level or inside a
function) is read with :mod:`ast`; each module belongs to one layer, and a
layer may import only the layers below it (see docs/architecture.md):

    base (errors, _text, nodes, backend, _files, _fused, _progress)
    graph
    recording          projection
    renderer (reads graph + projection)     export, summary
                                            hooks (recorders, layer selection)
                                            capture
    display            diff (pairing, the Diff, its drawing and page)
    recorder
    api, the command line, the package itself, the docs tools (scraper, sphinxext)
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable

import pytest

import torchrecorder

PACKAGE_DIR = os.path.dirname(os.path.abspath(torchrecorder.__file__))

#: layer -> module name prefixes (a module belongs to the layer of its longest matching prefix)
LAYERS: dict[str, tuple[str, ...]] = {
    "base": ("torchrecorder.errors", "torchrecorder._text", "torchrecorder.nodes", "torchrecorder.backend",
             "torchrecorder._files", "torchrecorder._fused", "torchrecorder.opargs", "torchrecorder.opnames",
             "torchrecorder._stack", "torchrecorder._progress", "torchrecorder.seed",
             "torchrecorder._lines", "torchrecorder._compiled"),
    "graph": ("torchrecorder.graph",),
    "recording": ("torchrecorder.recording",),
    "projection": ("torchrecorder.projection", "torchrecorder.cost"),
    "renderer": ("torchrecorder.renderer",),
    "outputs": ("torchrecorder.export", "torchrecorder.export_backward", "torchrecorder.summary",
                "torchrecorder.summary_rows"),
    "hooks": ("torchrecorder.hooks",),
    "capture": ("torchrecorder.capture",),
    "display": ("torchrecorder.display",),
    "diff": ("torchrecorder.diff",),
    "recorder": ("torchrecorder.recorder",),
    "api": ("torchrecorder.api", "torchrecorder.__main__", "torchrecorder.factory",
            "torchrecorder.diff_cli", "torchrecorder.graph_breaks",
            "torchrecorder.scraper", "torchrecorder.sphinxext", "torchrecorder"),
}
#: layer -> the layers it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "base": set(),
    "graph": {"base"},
    "recording": {"base", "graph"},
    "projection": {"base", "graph"},
    "renderer": {"base", "graph", "projection"},
    "outputs": {"base", "graph", "projection"},
    "hooks": {"base", "graph", "projection", "outputs"},
    "capture": {"base", "graph", "projection", "outputs", "hooks"},
    "display": {"base", "graph", "projection", "renderer", "outputs"},
    "diff": {"base", "graph", "projection", "renderer", "outputs"},
    "recorder": {"base", "graph", "recording", "projection", "renderer", "outputs", "display"},
    "api": {"base", "graph", "recording", "projection", "renderer", "outputs", "display", "recorder",
            "hooks", "capture", "diff"},
}
MAX_LINES = 600


def _module_name(path: str) -> str:
    rel = os.path.relpath(path, os.path.dirname(PACKAGE_DIR))[:-3].replace(os.sep, ".")
    return rel[: -len(".__init__")] if rel.endswith(".__init__") else rel


def _modules() -> dict[str, str]:
    """Module name -> file path, for every module of the package."""
    out = {}
    for root, _, files in os.walk(PACKAGE_DIR):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(root, f)
                out[_module_name(path)] = path
    return out


def _imports(name: str, path: str, known: Iterable[str]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its source (with each imported
    submodule's parent packages, which Python runs first, but not the package root)."""
    known = set(known)
    is_package = path.endswith("__init__.py")
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets.add(mod)
            targets.update(f"{mod}.{a.name}" for a in node.names)
    out = set()
    for t in targets:
        parts = t.split(".")
        for i in range(2, len(parts) + 1):  # the parent packages too, but not the root
            candidate = ".".join(parts[:i])
            # a package a module sits in is already being imported: no edge to it
            if candidate in known and candidate != name and not name.startswith(candidate + "."):
                out.add(candidate)
    return out


def _layer(module: str) -> str:
    best, layer = -1, ""
    for name, prefixes in LAYERS.items():
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, layer = len(p), name
    if not layer:
        raise LookupError(f"{module} is in no layer: add it to LAYERS")
    return layer


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Imports that go up or sideways across layers."""
    out = []
    for module, targets in sorted(graph.items()):
        mine = _layer(module)
        for t in sorted(targets):
            theirs = _layer(t)
            if theirs != mine and theirs not in ALLOWED[mine]:
                out.append(f"{module} ({mine}) imports {t} ({theirs})")
    return out


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle found by a depth-first search of the import graph (one per back edge)."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                cycles.append([*path[path.index(t):], t])
            elif t not in state:
                visit(t)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    return cycles


@pytest.fixture(scope="module")
def package_imports() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_every_module_has_a_layer(package_imports: dict[str, set[str]]) -> None:
    assert len(package_imports) > 20
    for module in package_imports:
        _layer(module)


def test_imports_point_down_the_layers(package_imports: dict[str, set[str]]) -> None:
    assert layer_violations(package_imports) == []


def test_no_import_cycle(package_imports: dict[str, set[str]]) -> None:
    assert import_cycles(package_imports) == []


def test_the_checks_catch_what_they_look_for(package_imports: dict[str, set[str]]) -> None:
    """A renderer importing the recorder (an upward, lazy-style import) and a cycle are found."""
    bad = {k: set(v) for k, v in package_imports.items()}
    bad["torchrecorder.renderer.base"].add("torchrecorder.recorder")
    assert layer_violations(bad) == [
        "torchrecorder.renderer.base (renderer) imports torchrecorder.recorder (recorder)"]
    bad["torchrecorder.graph"].add("torchrecorder.renderer.base")
    assert any("torchrecorder.graph" in c for c in import_cycles(bad))


def test_lazy_imports_are_read_too(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(str(tmp_path), "x.py")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("def f():\n    from .recorder import Recorder\n    return Recorder\n")
    known = {"torchrecorder.recorder", "torchrecorder.x"}
    assert _imports("torchrecorder.x", path, known) == {"torchrecorder.recorder"}


def test_no_module_over_600_lines() -> None:
    for name, path in _modules().items():
        with open(path, encoding="utf-8") as fh:
            lines = sum(1 for _ in fh)
        assert lines <= MAX_LINES, f"{name} has {lines} lines"


def _shipped_scripts() -> list[str]:
    """The JavaScript files the package ships and wrote itself (not the vendored ``_vendor/``)."""
    out = []
    for root, _, files in os.walk(PACKAGE_DIR):
        if os.path.basename(root) == "_vendor":
            continue
        out.extend(os.path.join(root, f) for f in files if f.endswith(".js"))
    return sorted(out)


def test_no_shipped_script_over_600_lines() -> None:
    """The size rule covers the page's JavaScript as well as the Python modules."""
    scripts = _shipped_scripts()
    assert any(p.endswith("page_state.js") for p in scripts)
    for path in scripts:
        with open(path, encoding="utf-8") as fh:
            lines = sum(1 for _ in fh)
        assert lines <= MAX_LINES, f"{os.path.relpath(path, PACKAGE_DIR)} has {lines} lines"


def test_the_page_inlines_every_part_of_its_script() -> None:
    """Each ``page_*.js`` is one of the page's scripts (a file left out would never run)."""
    from torchrecorder.renderer.html_page import PAGE_SCRIPTS

    parts = sorted(os.path.basename(p) for p in _shipped_scripts() if os.path.basename(p).startswith("page_"))
    assert sorted(PAGE_SCRIPTS) == parts and len(set(PAGE_SCRIPTS)) == len(PAGE_SCRIPTS)


def test_invariants_raise_instead_of_asserting() -> None:
    """No ``assert`` statement in the package: they vanish under ``python -O``."""
    for name, path in _modules().items():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
        asserts = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Assert)]
        assert asserts == [], f"{name} asserts on lines {asserts}"
