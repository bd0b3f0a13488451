"""What backend a line is on is read in one place (issue 33, decision 0088).

The opener chose the backend; the store it handed out is what is passed down. A component
that works differently per backend says so as a ``PerBackend`` (lifeline/store/backend.py)
and lets ``on_backend`` pick its implementation: it never tests a store's class, nor asks
which tier it is (the ``tables_of``/``pg_tables_of`` lookups this replaced). Checked on every
module of ``lifeline`` and ``lifeline_mesh`` (AST): an ``isinstance``/``issubclass`` naming a
store adapter or a storage tier, and a call of those lookups, outside the allowed places.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import REPO

# The store adapters and the tiers a component might test a store against.
BACKEND_CLASSES = frozenset(
    {"SqliteStore", "PgStore", "MemoryStore", "SqlLine", "PgTruthLine", "Summarized", "TokenRows"}
)
LOOKUPS = frozenset({"tables_of", "pg_tables_of"})

# The one dispatch point; and a helper of the same name on a foreign database (an agent
# tool's own SQLite file, not a line), which tells nothing about a line's backend.
ALLOWED_TESTS = frozenset({"lifeline/store/backend.py"})
ALLOWED_LOOKUPS = ("lifeline/sessions/adapters/",)


def _names(node: ast.expr) -> set[str]:
    """The class names an isinstance's second argument names (a name, an attribute, a tuple)."""
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    if isinstance(node, ast.Tuple):
        return {name for element in node.elts for name in _names(element)}
    if isinstance(node, ast.BinOp):  # isinstance(x, A | B)
        return _names(node.left) | _names(node.right)
    return set()


def _called(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def sniffs(source: str, where: str) -> list[str]:
    """Each place in ``source`` (the module at ``where``) that asks a store's backend."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = _called(node)
        if name in {"isinstance", "issubclass"} and len(node.args) == 2:
            tested = _names(node.args[1]) & BACKEND_CLASSES
            if tested and where not in ALLOWED_TESTS:
                found.append(f"{where}:{node.lineno}: {name}(…, {'|'.join(sorted(tested))})")
        elif name in LOOKUPS and not where.startswith(ALLOWED_LOOKUPS):
            found.append(f"{where}:{node.lineno}: {name}(…)")
    return found


def _sources() -> list[Path]:
    return [
        path
        for top in ("lifeline", "lifeline_mesh")
        for path in sorted((REPO / top).rglob("*.py"))
        if "_pb2" not in path.name
    ]


def test_no_module_asks_which_backend_a_line_is_on() -> None:
    found = [
        hit
        for path in _sources()
        for hit in sniffs(path.read_text(encoding="utf-8"), path.relative_to(REPO).as_posix())
    ]
    assert not found, (
        "these test a store's class or look up its tier; write the per-backend work as a "
        "PerBackend and call on_backend (lifeline/store/backend.py, decision 0088):\n"
        + "\n".join(found)
    )


def test_the_check_sees_each_form_of_the_question() -> None:
    source = """
if isinstance(store, SqlLine): pass
if isinstance(store, (MemoryStore, postgres.PgStore)): pass
if isinstance(store, SqliteStore | PgTruthLine): pass
sql = tables_of(store, "truth")
hub = pg_table.pg_tables_of(store)
if isinstance(store, Summarized): pass
if isinstance(store, Sized): pass
"""
    found = sniffs(source, "lifeline/truth/example.py")
    assert [hit.split(": ", 1)[1] for hit in found] == [
        "isinstance(…, SqlLine)",
        "isinstance(…, MemoryStore|PgStore)",
        "isinstance(…, PgTruthLine|SqliteStore)",
        "tables_of(…)",
        "pg_tables_of(…)",
        "isinstance(…, Summarized)",
    ]
    assert sniffs(source, "lifeline/store/backend.py") == [
        "lifeline/store/backend.py:5: tables_of(…)",
        "lifeline/store/backend.py:6: pg_tables_of(…)",
    ]
    assert sniffs("cols = tables_of(conn)", "lifeline/sessions/adapters/forge.py") == []
