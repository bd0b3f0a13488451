"""The import rules docs/architecture.md states, checked on our own import statements (AST).

tests/docs/test_layers.py keeps the ledger free of the node; this file keeps the reconciliation
core pure, the composition root the only user of the gRPC server and client, protobuf inside
its adapters, and the page itself naming only modules that exist.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from tests.support.paths import REPO

MESH = REPO / "lifeline_mesh"

# recon/ may use the standard library, the ledger's pure parts and itself.
RECON_ALLOWED = ("lifeline.entry", "lifeline.errors", "lifeline.validate", "lifeline_mesh.recon")
PROTOBUF_USERS = {"membership/service.py", "membership/client.py", "membership/join.py"}


def _imports(path: Path) -> set[str]:
    """Absolute module names imported, plus `module.name` for each `from module import name`."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _sources(folder: Path) -> list[Path]:
    return [p for p in sorted(folder.rglob("*.py")) if "_pb2" not in p.name]


def test_the_reconciliation_core_does_no_io() -> None:
    stdlib = sys.stdlib_module_names - {"asyncio", "sqlite3", "socket", "ssl", "selectors"}
    offenders = {}
    for path in _sources(MESH / "recon"):
        if path.name == "pair.py":
            continue  # the in-memory test harness encodes real frames to count bytes
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
        for path in _sources(MESH)
        if {"lifeline_mesh.transport.server", "lifeline_mesh.transport.client"} & _imports(path)
        and path.parent.name != "transport"
    }
    assert users <= {"node/root.py"}


def test_protobuf_stays_in_its_adapters() -> None:
    users = set()
    for path in _sources(MESH):
        relative = str(path.relative_to(MESH))
        if relative.startswith(("wire/", "transport/")):
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
