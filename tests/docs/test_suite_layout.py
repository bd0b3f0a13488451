"""The suite's own layout (docs/architecture.md, "Tests"): a folder per layer, helpers in
tests/support/, fixtures in conftest.py files."""

from __future__ import annotations

import ast

from tests.support.paths import REPO


def test_tests_share_helpers_only_through_tests_support() -> None:
    """A test module imports no other test module and no conftest (fixtures reach tests by
    pytest's lookup, helpers from tests/support/), and the support modules import no test."""
    offenders = []
    for path in (REPO / "tests").rglob("*.py"):
        if "fixtures" in path.relative_to(REPO / "tests").parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[0] == "tests" and any(
                    p == "conftest" or p.startswith("test_") for p in parts
                ):
                    offenders.append(f"{path.relative_to(REPO)} imports {name}")
    assert offenders == []


def test_no_test_file_is_left_at_the_top_of_tests() -> None:
    """Every test module sits in the folder of its layer, not in tests/ itself."""
    flat = sorted(p.name for p in (REPO / "tests").glob("test_*.py"))
    assert flat == []
