"""Shared fixtures: paths to the lifeline-context 0.6.1 fixture and entry factories.

The fixture lives in the repository (``tests/fixtures/``, provenance in
``tests/fixtures/PROVENANCE.md``), so a clone alone runs every test.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from lifeline.entry import Entry
from tests.pg_server import pg_server  # noqa: F401  (the session's PostgreSQL server)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make test``), files holding slow tests are handed out first.

    ``--dist loadfile`` gives each worker whole files, in collection order (with
    ``--no-loadscope-reorder``): the long end-to-end files start early instead of one of them
    starting last and running alone. Test order inside a file is unchanged. A plain
    ``pytest`` run keeps the usual order."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: the rest keep order


REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "lifeline-context-0.6.1"


@pytest.fixture
def lc_fixture() -> Path:
    if not FIXTURE.is_dir():
        pytest.skip(f"the lifeline-context fixture is not at {FIXTURE}")
    return FIXTURE


@pytest.fixture
def lc_expected(lc_fixture: Path) -> dict[str, list[dict[str, Any]]]:
    data: dict[str, list[dict[str, Any]]] = json.loads((lc_fixture / "expected.json").read_text())
    return data


def make_entry(
    summary: str,
    parents: tuple[str, ...] = (),
    *,
    kind: str = "note",
    ts: str = "2026-01-01T00:00:00Z",
    body: str = "",
    dedup_key: str | None = None,
) -> Entry:
    return Entry.create(
        ts=ts,
        kind=kind,
        summary=summary,
        body=body,
        author="t",
        parents=parents,
        dedup_key=dedup_key,
    )
