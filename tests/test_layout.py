"""The package's layout: its modules import each other without a circle, and algorithms are
named and built only in evohpo.algos."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

from evohpo import config as C
from evohpo.algos import algo_names

PACKAGE = Path(__file__).resolve().parents[1] / "evohpo"
ALGO_CLASSES = {"MATD3"}


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name; a package is its ``__init__.py``."""
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(node: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import in ``node``, at any depth, except in ``if TYPE_CHECKING:`` blocks."""
    out: list[ast.Import | ast.ImportFrom] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for sub in child.orelse:
                is_import = isinstance(sub, ast.Import | ast.ImportFrom)
                out += [sub] if is_import else _import_nodes(sub)
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            out.append(child)
        out += _import_nodes(child)
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that module ``name`` imports.

    ``from evohpo.x import y`` imports the module evohpo.x.y where that is one, else evohpo.x;
    importing a package imports its ``__init__``.
    """
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")
            anchor = anchor[:len(anchor) - node.level + 1]
            base = ".".join([*anchor, base] if base else anchor)
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            if sub in known:
                out.add(sub)
            elif base in known:
                out.add(base)
    out.discard(name)
    return out


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_the_import_graph_sees_function_level_imports() -> None:
    graph = import_graph()
    assert "evohpo.algos.registry" in graph["evohpo.algos"]
    assert "evohpo.envs" in graph["evohpo.config.validate"]  # imported inside a function
    assert "evohpo.algos.matd3" not in graph["evohpo.algos.arch_mutations"]  # TYPE_CHECKING only


def test_find_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_cycles() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_algos_package_imports_no_circle() -> None:
    graph = import_graph()
    algos = {k: {v for v in vs if v.startswith("evohpo.algos")}
             for k, vs in graph.items() if k.startswith("evohpo.algos")}
    cycle = find_cycle(algos)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_algorithm_classes_are_named_only_in_the_algos_package() -> None:
    """Code outside evohpo.algos builds and restores algorithms through the registry."""
    found = []
    for name, path in modules().items():
        if name == "evohpo.algos" or name.startswith("evohpo.algos."):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Name):
                names = {node.id}
            elif isinstance(node, ast.Attribute):
                names = {node.attr}
            elif isinstance(node, ast.alias):
                names = {node.name.rpartition(".")[2], node.asname or ""}
            else:
                continue
            for hit in sorted(names & ALGO_CLASSES):
                where = f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', '?')}"
                found.append(f"{where} {hit}")
    assert not found, "algorithm classes named outside evohpo.algos:\n" + "\n".join(found)


def test_the_registry_knows_every_configurable_algorithm() -> None:
    names = typing.get_args(typing.get_type_hints(C.AlgoConfig)["name"])
    assert set(algo_names()) == set(names)
    assert C.AlgoConfig().name in algo_names()


def test_modules_are_small_and_the_loop_reads_in_one_sitting() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in modules().items()}
    assert sizes["evohpo.loop.trainer"] < 300, sizes["evohpo.loop.trainer"]
    assert not {n: s for n, s in sizes.items() if s > 400}
