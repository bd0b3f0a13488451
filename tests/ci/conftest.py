"""The CI tests' fixture: a real serving CA holder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ci_helpers import Hub, stop
from tests.support.mesh_procs import cli, start_ca_serve


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Hub]:
    """A CA holder with one shared line holding one decision, serving sync and joins."""
    root = tmp_path / "hub"
    root.mkdir()
    cli("lifeline_mesh", root, "init", "--new-mesh", "team")
    cli("lifeline", root, "init")
    decision = cli(
        "lifeline", root, "log", "--kind", "decision", "--summary", "Payments use Postgres"
    ).stdout.strip()
    cli("lifeline_mesh", root, "share", "ledger")
    proc, sync, joins = start_ca_serve(root)
    try:
        yield Hub(root, sync, joins, decision, proc)
    finally:
        stop(proc)
