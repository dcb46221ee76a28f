"""The package layout keeps its promises: no import circles, and each layer imports only downwards.

The graph is read from the source (``ast``), so it sees imports inside functions
too: a circle hidden behind a function-level import is still a circle. Imports
under ``if TYPE_CHECKING:`` are left out, since they never run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "mcp_tools"
PACKAGE = "mcp_tools"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for path in PACKAGE_DIR.rglob("*.py")
        if "migrations" not in path.parts
    }


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Import statements that can run: everything but the body of ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                yield from _runtime_imports(child)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _runtime_imports(node)


def _imports_of(name: str, path: Path, known: set[str]) -> Iterator[tuple[str, int, str]]:
    """``(imported module, line, statement)`` for each runtime import in one module."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    for node in _runtime_imports(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, f"import {alias.name}"
            continue
        if node.level:
            base_parts = name.split(".") if is_package else name.split(".")[:-1]
            base_parts = base_parts[: len(base_parts) - (node.level - 1)]
            base = ".".join(base_parts + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        statement = f"from {'.' * node.level}{node.module or ''} import {', '.join(a.name for a in node.names)}"
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            yield (submodule if submodule in known else base), node.lineno, statement


def import_graph() -> dict[str, dict[str, tuple[int, str]]]:
    """``{module: {imported mcp_tools module: (line, statement)}}`` for every module of the package."""
    modules = _modules()
    known = set(modules)
    graph: dict[str, dict[str, tuple[int, str]]] = {}
    for name, path in modules.items():
        edges: dict[str, tuple[int, str]] = {}
        for target, line, statement in _imports_of(name, path, known):
            if target in known and target != name:
                edges.setdefault(target, (line, statement))
        graph[name] = edges
    return graph


def external_imports(name: str) -> Iterator[tuple[str, int]]:
    path = _modules()[name]
    for target, line, _ in _imports_of(name, path, set()):
        if not target.startswith(PACKAGE):
            yield target, line


def find_cycle(graph: dict[str, dict[str, tuple[int, str]]]) -> list[str] | None:
    """One import circle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _describe(cycle: list[str], graph: dict[str, dict[str, tuple[int, str]]]) -> str:
    return "\n".join(
        f"  {a} line {graph[a][b][0]}: {graph[a][b][1]}" for a, b in zip(cycle, cycle[1:], strict=False)
    )


def test_the_import_graph_has_no_cycles() -> None:
    graph = import_graph()
    cycle = find_cycle(graph)
    assert cycle is None, "import circle:\n" + _describe(cycle or [], graph)


def test_the_cycle_finder_names_a_planted_circle() -> None:
    graph = {
        "a": {"b": (3, "from . import b")},
        "b": {"c": (4, "from . import c")},
        "c": {"a": (5, "from . import a")},
        "d": {},
    }
    cycle = find_cycle(graph)
    assert cycle == ["a", "b", "c", "a"]
    assert "b line 4: from . import c" in _describe(cycle, graph)


def _package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


#: Which mcp_tools packages each layer may import (besides itself). Top-level modules
#: (Django's face: apps, models, admin, checks, conf, ...) are listed by their name.
ALLOWED = {
    "protocol": set(),
    "engine": {"protocol"},
    "registry": {"protocol", "engine"},
    "interprocess": {"store", "conf", "states"},
    "store": {"protocol", "engine", "conf", "models", "managers", "states"},
    "server": {"protocol", "engine", "registry", "store", "interprocess", "conf", "states"},
    "transports": {"protocol", "registry", "server", "store", "interprocess", "conf"},
}


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_each_layer_imports_only_the_layers_below_it(layer: str) -> None:
    graph = import_graph()
    offending = [
        f"{module} line {line}: {statement}"
        for module, edges in graph.items()
        if _package_of(module) == layer
        for target, (line, statement) in edges.items()
        if _package_of(target) not in ALLOWED[layer] | {layer}
    ]
    assert not offending, f"{layer}/ imports outside {sorted(ALLOWED[layer])}:\n" + "\n".join(offending)


def test_protocol_imports_no_django_or_channels() -> None:
    offending = [
        f"{module} line {line}: {target}"
        for module in _modules()
        if _package_of(module) == "protocol"
        for target, line in external_imports(module)
        if target.split(".")[0] in ("django", "channels", "rest_framework", "asgiref")
    ]
    assert not offending, "protocol/ must stay pure:\n" + "\n".join(offending)


def test_only_the_store_and_the_django_face_touch_the_orm() -> None:
    """The runtime layers reach tables only through the store."""
    runtime_layers = {"protocol", "engine", "registry", "server", "transports", "interprocess"}
    graph = import_graph()
    offending = [
        f"{module} line {line}: {statement}"
        for module, edges in graph.items()
        if _package_of(module) in runtime_layers
        for target, (line, statement) in edges.items()
        if target in ("mcp_tools.models", "mcp_tools.managers")
    ]
    offending += [
        f"{module} line {line}: import {target}"
        for module in _modules()
        if _package_of(module) in runtime_layers
        for target, line in external_imports(module)
        if target == "django.db" or target.startswith("django.db.")
    ]
    assert not offending, "only mcp_tools.store may use the ORM:\n" + "\n".join(offending)


#: Django's face (apps, models and their managers and states, admin, checks, settings) and the
#: public entry points users import by path (routing, urls, testing, the client helper).
TOP_LEVEL = {
    "__init__", "admin", "apps", "checks", "client", "conf", "managers", "models", "routing", "signals", "states", "tasks",
    "testing", "urls",
}


def test_the_top_level_holds_only_django_face_and_public_entry_points() -> None:
    strays = sorted(p.stem for p in PACKAGE_DIR.glob("*.py") if p.stem not in TOP_LEVEL)
    assert not strays, f"modules at the top of mcp_tools/ that belong in a layer package: {strays}"
