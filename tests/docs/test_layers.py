"""Lower layers never import upper ones (CONVENTIONS: one composition root)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import REPO


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_ledger_package_never_imports_the_node() -> None:
    offenders = [
        str(path.relative_to(REPO))
        for path in (REPO / "lifeline").rglob("*.py")
        if any(name.split(".")[0] == "lifeline_mesh" for name in _imports(path))
    ]
    assert offenders == []


def test_store_and_entry_do_not_import_the_cli_or_truth() -> None:
    core = [REPO / "lifeline" / "entry.py", *(REPO / "lifeline" / "store").glob("*.py")]
    for path in core:
        bad = {n for n in _imports(path) if n.startswith(("lifeline.cli", "lifeline.truth"))}
        assert bad == set(), path
