"""The package's layout: its modules import each other without a circle (type-only imports
included), and so do the tests and the scripts of benchmarks/ and docs/; each module is small
enough to read in one sitting, the top level stays small, and algorithms are named and built only
in evohpo.algos."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

from evohpo import config as C
from evohpo.algos import algo_names

PACKAGE = Path(__file__).resolve().parents[1] / "evohpo"
ROOT = PACKAGE.parent
# scripts run as `python benchmarks/x.py`: each imports its neighbours as top-level modules
SCRIPT_FOLDERS = ("benchmarks", "docs")
ALGO_CLASSES = {"MATD3"}
MAX_LINES = 350      # a module reads in one sitting
MAX_TOP_LEVEL = 14   # modules directly in evohpo/ (files evohpo/*.py)


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name; a package is its ``__init__.py``."""
    out: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def tree_modules() -> dict[str, Path]:
    """Every module of the tree by the name it is imported by: the package's and the tests' by
    dotted name, and each script of benchmarks/ and docs/ by its file's name, as its neighbours
    import it (``from results_tables import table`` is benchmarks/results_tables.py: a script
    runs with its folder on the path)."""
    out = {**modules(), **modules(ROOT / "tests")}
    for folder in SCRIPT_FOLDERS:
        for path in sorted((ROOT / folder).glob("*.py")):
            assert path.stem not in out, f"{path} has the name of {out[path.stem]}"
            out[path.stem] = path
    return out


def _import_nodes(node: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import in ``node``, at any depth: in functions, and in ``if TYPE_CHECKING:`` blocks
    too (a type-only import is still a dependency, and a circle through it is still a circle)."""
    return [n for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom)]


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
    """What each module of the tree imports of the tree."""
    known = tree_modules()
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


def test_the_import_graph_sees_the_scripts_and_the_tests() -> None:
    """Scripts import their neighbours by file name; tests import each other as tests.x."""
    graph = import_graph()
    assert {"_common", "evohpo.envs"} <= graph["throughput"]  # `from _common import ...`
    assert {"results_control", "results_tables"} <= graph["results_page"]
    assert "evohpo.config" in graph["gen_config"]
    assert "tests.test_checkpoint" in graph["tests.test_console"]


def test_the_import_graph_counts_type_only_imports(tmp_path: Path) -> None:
    mod = tmp_path / "m.py"
    mod.write_text("from typing import TYPE_CHECKING\n"
                   "if TYPE_CHECKING:\n    from evohpo.envs.spec import EnvSpec\n"
                   "else:\n    import evohpo.errors\n")
    known = modules()
    assert imports("evohpo.m", mod, known) == {"evohpo.envs.spec", "evohpo.errors"}


def test_find_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_cycles() -> None:
    """Anywhere in the tree: the package, the tests, and the scripts of benchmarks/ and docs/."""
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
    """The config takes exactly the registries' names (algorithms, strategies, runtimes) and
    refuses any other with the one-line error of a choice key."""
    import pytest

    from evohpo.evolve.strategies import STRATEGIES
    from evohpo.runtime.backends import RUNTIMES

    for section, key, names in [("algo", "name", algo_names()),
                                ("evolution", "strategy", tuple(STRATEGIES)),
                                ("distributed", "backend", tuple(RUNTIMES))]:
        assert typing.get_type_hints(type(getattr(C.Config(), section)))[key] is str
        assert getattr(getattr(C.Config(), section), key) in names
        assert C.CHOICES[f"{section}.{key}"]() == names
        for name in names:
            assert getattr(getattr(C.load([{section: {key: name}}]), section), key) == name
        allowed = ", ".join(repr(n) for n in names)
        with pytest.raises(C.ConfigError) as e:
            C.load([{section: {key: "nope"}}])
        assert str(e.value) == f"config key '{section}.{key}': 'nope' is not one of {allowed}"


def test_modules_are_small_and_the_loop_reads_in_one_sitting() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in modules().items()}
    assert sizes["evohpo.loop.trainer"] < 300, sizes["evohpo.loop.trainer"]
    too_long = {n: s for n, s in sizes.items() if s > MAX_LINES}
    assert not too_long, f"modules over {MAX_LINES} lines (split them by concern): {too_long}"


def test_the_top_level_stays_small() -> None:
    """Beside the entry points and a few shared basics, everything lives in a folder by
    concern."""
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, f"{len(top)} modules directly in evohpo/: {top}"


def test_the_loop_does_not_branch_on_teams() -> None:
    """One population or a league of them sit behind one interface
    (:mod:`evohpo.loop.populations`): the loop's module names neither teams, leagues nor
    scripted opponents, and imports nothing from evohpo.games."""
    path = PACKAGE / "loop" / "trainer.py"
    text = path.read_text().lower()
    for word in ("team", "league", "scripted", "opponent"):
        assert word not in text, f"{path.name} mentions {word!r}"
    known = modules()
    assert not {m for m in imports("evohpo.loop.trainer", path, known)
                if m.startswith("evohpo.games")}
