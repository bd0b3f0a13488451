"""No import cycle between the modules of `lifeline/` and `lifeline_mesh/` (decision 0075).

Which imports count: every import statement of ours, at the top of a module, inside a
function or under ``if TYPE_CHECKING:`` alike. An import moved into a function or behind
``TYPE_CHECKING`` hides a cycle from Python's import machinery, not from a reader: neither
module can still be read, tested or moved without the other.

What an import names: ``import a.b`` names the module ``a.b``; ``from a import b`` names
``a.b`` when that is a module, else ``a`` itself (a name its ``__init__`` defines). The parent
packages Python runs first are not counted: a package whose ``__init__`` re-exports its
modules would otherwise be tied to each of them.

The import table of the packages (test_architecture.py) says which packages may import
which; this says that inside and across them, the modules form layers too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path

from tests.support.paths import REPO

TOPS = ("lifeline", "lifeline_mesh")

# Cycles still there, each as its modules. It may only shrink: a cycle fixed must leave
# this list (the test says so), and a new one or a bigger one fails. Empty since decision
# 0075's last ring was untied: keep it so.
KNOWN_CYCLES: frozenset[frozenset[str]] = frozenset()


@cache
def modules() -> Mapping[str, Path]:
    found = {}
    for top in TOPS:
        for path in sorted((REPO / top).rglob("*.py")):
            if "_pb2" not in path.name:  # generated
                parts = path.relative_to(REPO).with_suffix("").parts
                found[".".join(parts).removesuffix(".__init__")] = path
    return found


def _named(node: ast.Import | ast.ImportFrom, known: Mapping[str, Path]) -> Iterable[str]:
    """The first-party modules one import statement names."""
    if isinstance(node, ast.Import):
        candidates = [alias.name for alias in node.names]
    elif node.module and node.level == 0:
        candidates = [
            f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in known else node.module
            for alias in node.names
        ]
    else:
        candidates = []
    for name in candidates:
        while name and name not in known:  # `import a.b.c` of a module a.b
            name = name.rpartition(".")[0]
        if name:
            yield name


@cache
def import_graph() -> Mapping[str, frozenset[str]]:
    """module -> the first-party modules its import statements name (any of them)."""
    known = modules()
    graph = {}
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        named = {
            name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for name in _named(node, known)
        }
        graph[module] = frozenset(named - {module})
    return graph


def cycles(graph: Mapping[str, Iterable[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph.get(nxt, ()))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.add(frozenset(component))
    return found


def test_the_cycle_finder_finds_rings_and_only_rings() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": ["e"], "e": ["d"], "f": ["a"]}
    assert cycles(graph) == {frozenset("abc"), frozenset("de")}
    assert cycles({"a": ["b"], "b": ["c"], "c": []}) == set()


def test_the_graph_sees_every_kind_of_import() -> None:
    graph = import_graph()
    assert len(graph) > 300 and sum(map(len, graph.values())) > 1500
    # at the top, `from package import module`
    assert "lifeline_mesh.membership.files" in graph["lifeline_mesh.membership.invite"]
    # `from package import name` of its __init__
    assert "lifeline_mesh.membership" in graph["lifeline_mesh.node.root"]
    # inside a function: Home.prepare
    assert "lifeline.ignore" in graph["lifeline.home"]


def test_no_import_cycle_between_modules() -> None:
    found = cycles(import_graph())
    new = sorted(sorted(c) for c in found - KNOWN_CYCLES)
    assert new == [], f"modules that import each other (move the shared part down): {new}"
    gone = sorted(sorted(c) for c in KNOWN_CYCLES - found)
    assert gone == [], "fixed: take these out of KNOWN_CYCLES"
