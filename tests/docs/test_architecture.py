"""The import rules of docs/architecture.md, checked on every import statement (AST).

One table says which packages each package may import (``MAY_IMPORT``); every ``import``
of every module of ``lifeline`` and ``lifeline_mesh`` — at the top or inside a function —
is checked against it, so a new arrow between packages fails here until the table (and
the page's "Import rules") says it is meant. Beside the table: the reconciliation core
uses no I/O library, protobuf stays in its adapters, only the composition root uses the
gRPC server and client, and every module path the page names exists.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from tests.support.paths import REPO

MESH = REPO / "lifeline_mesh"

L, M = "lifeline", "lifeline_mesh"

# package -> the other first-party packages its modules may import (each may import itself
# and any third-party library, but see the I/O and protobuf rules below). A package is a
# folder (`lifeline.store`, `lifeline_mesh.sync`) or the loose modules at the top of
# `lifeline` or `lifeline_mesh`; a key naming one module overrides its package's row.
MAY_IMPORT: dict[str, frozenset[str]] = {
    # The ledger: usable alone; it never imports the node.
    L: frozenset({f"{L}.store", f"{L}.truth"}),
    f"{L}.entry": frozenset(),  # the canonical form is pure
    f"{L}.__main__": frozenset({f"{L}.cli"}),
    f"{L}.store": frozenset({L}),
    f"{L}.truth": frozenset({L, f"{L}.store"}),
    f"{L}.audit": frozenset({L, f"{L}.store", f"{L}.truth"}),
    f"{L}.projection": frozenset({L, f"{L}.store", f"{L}.audit"}),
    f"{L}.migration": frozenset({L, f"{L}.store"}),
    # sessions/: the model, the stored form and the read side; its folders are packages of
    # their own (SPLIT): the tools' adapters, ingest, and continuation bundles.
    f"{L}.sessions": frozenset({L, f"{L}.store", f"{L}.truth"}),
    f"{L}.sessions.adapters": frozenset({f"{L}.sessions"}),
    f"{L}.sessions.ingest": frozenset({L, f"{L}.store", f"{L}.sessions", f"{L}.sessions.adapters"}),
    f"{L}.sessions.bundles": frozenset({L, f"{L}.truth", f"{L}.sessions"}),
    f"{L}.cli": frozenset(
        {
            L,
            f"{L}.audit",
            f"{L}.migration",
            f"{L}.projection",
            f"{L}.store",
            f"{L}.truth",
            f"{L}.sessions",
            f"{L}.sessions.bundles",
            f"{L}.sessions.ingest",
        }
    ),
    # The node, bottom up.
    M: frozenset(),
    f"{M}.__main__": frozenset({f"{M}.cli"}),
    f"{M}.recon": frozenset({L}),  # the pure core: the entry, its errors, itself
    f"{M}.wire": frozenset({L, f"{M}.recon"}),
    f"{M}.testing": frozenset({f"{M}.recon", f"{M}.wire"}),
    f"{M}.helpers": frozenset({L}),
    f"{M}.discovery": frozenset({L, f"{M}.home"}),
    # home/ is the ground floor of the node: every part reads its files through it, and it
    # imports none of them (decision 0074). lifeline.store: the home holds what it opened, a
    # hub's node documents in PostgreSQL too (home/pg_state.py).
    f"{M}.home": frozenset({L, f"{L}.store"}),
    # sync/ runs sessions over any sets; the notary's sets (its attestations, the entries it
    # checks as they arrive) plug into it from notary/.
    f"{M}.sync": frozenset({L, f"{L}.store", f"{M}.recon", f"{M}.helpers"}),
    # transport/ runs sessions (sync/) over gRPC.
    f"{M}.transport": frozenset({L, f"{L}.store", f"{M}.recon", f"{M}.sync", f"{M}.wire"}),
    # membership/ rides on transport/ (status table, errors, authorizer, channels).
    f"{M}.membership": frozenset({L, f"{M}.home", f"{M}.transport", f"{M}.wire"}),
    # notary/ reads membership (who may sign) and plugs its sets into sync/.
    f"{M}.notary": frozenset(
        {
            L,
            f"{L}.audit",
            f"{L}.store",
            f"{M}.helpers",
            f"{M}.home",
            f"{M}.membership",
            f"{M}.recon",
            f"{M}.sync",
        }
    ),
    # membership: the status report names the mesh (membership/ca.py, local_mesh_id).
    f"{M}.peering": frozenset(
        {L, f"{M}.discovery", f"{M}.home", f"{M}.membership", f"{M}.transport"}
    ),
    f"{M}.node": frozenset(
        {
            L,
            f"{L}.store",
            f"{L}.truth",  # a shallow snapshot carries the entries in force (decision 0063)
            f"{M}.helpers",
            f"{M}.home",
            f"{M}.membership",
            f"{M}.notary",
            f"{M}.peering",
            f"{M}.recon",
            f"{M}.sync",
            f"{M}.transport",
        }
    ),
    f"{M}.ci": frozenset(
        {
            L,
            f"{L}.sessions",
            f"{L}.sessions.ingest",
            f"{L}.store",
            f"{L}.truth",
            f"{M}.home",
            f"{M}.membership",
            f"{M}.node",
        }
    ),
    f"{M}.mcp": frozenset(
        {
            L,
            f"{L}.sessions",
            f"{L}.sessions.bundles",
            f"{L}.store",
            f"{L}.truth",
            M,
            f"{M}.home",
            f"{M}.membership",  # remote MCP: its token book and TLS files
            f"{M}.notary",
            f"{M}.transport",  # remote MCP: its listening socket (transport/addresses.py)
        }
    ),
    # hub/: the lines' copy (notary) and the node's documents in PostgreSQL (home's port,
    # membership's CA to issue each hub process its TLS certificate).
    f"{M}.hub": frozenset(
        {L, f"{L}.store", f"{M}.home", f"{M}.membership", f"{M}.notary", f"{M}.transport"}
    ),
    f"{M}.ui": frozenset(
        {
            L,
            f"{L}.sessions",
            f"{L}.sessions.bundles",
            f"{L}.store",
            f"{L}.truth",
            f"{M}.home",
            f"{M}.mcp",
            f"{M}.membership",
            f"{M}.notary",
            f"{M}.peering",  # the mesh page shows the peers report (peering/report.py)
            f"{M}.transport",
        }
    ),
    f"{M}.cli": frozenset(
        {
            L,
            f"{L}.cli",
            f"{L}.sessions",
            f"{L}.sessions.ingest",
            f"{L}.store",
            f"{L}.truth",  # the progress of a long fold (migrate-store's read models)
            M,
            f"{M}.ci",
            f"{M}.discovery",
            f"{M}.hub",
            f"{M}.home",
            f"{M}.mcp",
            f"{M}.membership",
            f"{M}.node",
            f"{M}.notary",
            f"{M}.peering",
            f"{M}.sync",
            f"{M}.transport",
            f"{M}.ui",
        }
    ),
}

# Packages whose folders are packages of their own, each with its row above (decision 0079).
SPLIT = frozenset({f"{L}.sessions"})

# recon/ may use the standard library minus anything that does I/O (or reads a clock),
# the ledger's pure parts and itself.
NO_IO = {"asyncio", "sqlite3", "socket", "ssl", "selectors", "time"}
RECON_ALLOWED = ("lifeline.entry", "lifeline.errors", "lifeline.validate", f"{M}.recon")
PROTOBUF_USERS = {
    "membership/service.py",
    "membership/client.py",
    "membership/join.py",
    "membership/join_port.py",
}


def _modules() -> Iterator[tuple[str, Path]]:
    for top in (L, M):
        for path in sorted((REPO / top).rglob("*.py")):
            if "_pb2" in path.name:
                continue  # generated
            parts = path.relative_to(REPO).with_suffix("").parts
            yield ".".join(parts).removesuffix(".__init__"), path


@cache
def _imports(path: Path) -> frozenset[str]:
    """Absolute module names imported, plus `module.name` for each `from module import name`."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return frozenset(names)


def package_of(module: str) -> str | None:
    """The package a first-party module belongs to (None for anything else)."""
    parts = module.split(".")
    if parts[0] not in (L, M):
        return None
    if len(parts) > 1 and (REPO / parts[0] / parts[1]).is_dir():
        package = f"{parts[0]}.{parts[1]}"
        if package in SPLIT and len(parts) > 2 and (REPO / parts[0] / parts[1] / parts[2]).is_dir():
            return f"{package}.{parts[2]}"
        return package
    return parts[0]


def _row(module: str) -> str:
    """The table row for a module: its own, else its package's."""
    return module if module in MAY_IMPORT else str(package_of(module))


def test_every_package_has_a_row() -> None:
    packages = {package_of(module) for module, _ in _modules()}
    assert packages - MAY_IMPORT.keys() == set()
    assert {p for row in MAY_IMPORT.values() for p in row} <= packages


def test_every_import_is_allowed_by_the_table() -> None:
    offenders = []
    for module, path in _modules():
        mine = package_of(module)
        allowed = MAY_IMPORT[_row(module)]
        for name in _imports(path):
            other = package_of(name)
            if other is not None and other != mine and other not in allowed:
                offenders.append(f"{path.relative_to(REPO)} imports {name} ({other})")
    assert sorted(set(offenders)) == []


def test_the_ledger_never_imports_the_node() -> None:
    ledger_rows = {k: v for k, v in MAY_IMPORT.items() if k == L or k.startswith(f"{L}.")}
    assert all(package_of(p) != M and not p.startswith(M) for v in ledger_rows.values() for p in v)


def test_no_cycle_between_packages() -> None:
    """The table is layered: no package reaches itself through the packages it may import.

    The loose modules at the top of `lifeline/` are left out: they are the ledger's ground
    floor (entry, errors, lines) and its services (home, ledger) side by side, so that "package"
    is no layer; the module-level check (test_import_cycles.py) covers them one by one.
    """
    graph = {k: set(v) - {L} for k, v in MAY_IMPORT.items() if package_of(k) == k != L}

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph.get(todo.pop(), set()) - seen:
                seen.add(nxt)
                todo.append(nxt)
        return seen

    cyclic = sorted(a for a in graph if a in reach(a))
    assert cyclic == []


def test_the_viewer_and_the_mcp_server_import_no_command_line_module() -> None:
    """ui/ and mcp/ are entry points of their own: what they share with the CLI (reports,
    defaults, the decisions in force) lives below both, never in a `cli/` module."""
    clis = {f"{L}.cli", f"{M}.cli"}
    offenders = sorted(
        f"{path.relative_to(REPO)} imports {name}"
        for module, path in _modules()
        if package_of(module) in {f"{M}.ui", f"{M}.mcp"}
        for name in _imports(path)
        if package_of(name) in clis
    )
    assert offenders == []


def test_the_reconciliation_core_does_no_io() -> None:
    """recon/ imports the standard library minus I/O, the ledger's pure parts and itself."""
    stdlib = sys.stdlib_module_names - NO_IO
    offenders = {}
    for module, path in _modules():
        if package_of(module) != f"{M}.recon":
            continue
        bad = {
            name
            for name in _imports(path)
            if name.split(".")[0] not in stdlib
            and name != "__future__"
            and not name.startswith(RECON_ALLOWED)
        }
        if bad:
            offenders[path.name] = sorted(bad)
    assert offenders == {}


def test_only_the_composition_root_uses_the_grpc_server_and_client() -> None:
    users = {
        str(path.relative_to(MESH))
        for path in sorted(MESH.rglob("*.py"))
        if {f"{M}.transport.server", f"{M}.transport.client"} & _imports(path)
        and path.parent.name != "transport"
    }
    assert users <= {"node/root.py", "node/membership_server.py"}


def test_protobuf_stays_in_its_adapters() -> None:
    users = set()
    for path in sorted(MESH.rglob("*.py")):
        relative = str(path.relative_to(MESH))
        if "_pb2" in path.name or relative.startswith(("wire/", "transport/")):
            continue
        if any("_pb2" in name for name in _imports(path)):
            users.add(relative)
    assert users <= PROTOBUF_USERS


def test_every_module_path_on_the_architecture_page_exists() -> None:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    paths = set(re.findall(r"`((?:lifeline|lifeline_mesh|proto|tests)/[\w/.]*)`", text))
    assert len(paths) > 40  # the extraction works
    missing = sorted(p for p in paths if not (REPO / p).exists())
    assert missing == []


def test_the_import_table_is_on_the_architecture_page() -> None:
    """docs/architecture.md "Import rules" lists each row of MAY_IMPORT as it is."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text[text.index("## Import rules") :]
    rows = dict(re.findall(r"^\| `([\w.]+)` \| (.*) \|$", section, re.M))
    page = {k: frozenset(re.findall(r"`([\w.]+)`", v)) for k, v in rows.items()}
    assert page == MAY_IMPORT
