"""A sync leaves both sides identical (decision 0059), through the real CLIs over mutual
TLS: A creates the mesh and serves, B joins and runs `lifeline-mesh sync`. The state
statement each side signs after taking entries crosses in the session's closing round, so
the sync after a real sync is a one-round no-op of under 200 bytes each way."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lifeline.home import Home
from tests.support.mesh_procs import cli, serve_with_join_port

pytestmark = pytest.mark.slow


def _statements(root: Path) -> set[bytes]:
    """Every signed statement and signature the line's file holds, by id."""
    conn = sqlite3.connect(f"file:{Home(root).line_path('ledger')}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT id FROM attestations UNION ALL SELECT id FROM statements"
        ).fetchall()
    finally:
        conn.close()
    return {bytes(r[0]) for r in rows}


def _sync(root: Path, address: str) -> dict[str, Any]:
    out = cli("lifeline_mesh", root, "sync", address, "--json").stdout
    report: dict[str, Any] = json.loads(out)[0]
    return report


def _log(root: Path, summary: str) -> None:
    cli("lifeline", root, "log", "--kind", "note", "--summary", summary)


def _assert_no_op(report: dict[str, Any]) -> None:
    assert report["round_trips"] == 1, report
    assert report["bytes_sent"] < 200 and report["bytes_received"] < 200, report
    assert report["entries_added"] == 0 and report["attestations_added"] == 0, report
    assert report["entries_received"] == report["entries_sent"] == 0, report


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Path, Path, str]]:
    """A (the mesh's creator, serving) and B (a member); yields both roots and A's address."""
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        root.mkdir()
        cli("lifeline", root, "init")
        cli("lifeline_mesh", root, "share", "ledger")
    cli("lifeline_mesh", a, "init", "--new-mesh", "team")
    with serve_with_join_port(a) as (address, join_address):
        token = cli("lifeline_mesh", a, "invite", "--address", join_address).stdout.strip()
        cli("lifeline_mesh", b, "join", token)
        yield a, b, address


def test_the_sync_after_a_sync_is_a_one_round_no_op(pair: tuple[Path, Path, str]) -> None:
    a, b, address = pair
    _log(a, "written on A")
    first = _sync(b, address)  # B takes A's entry and signs its new state
    assert first["entries_added"] == 1, first
    # A's author signature, and nothing else, is a signature B stored; entries count entries
    assert first["attestations_added"] == 1, first
    assert _statements(a) == _statements(b)  # B's statement crossed in the closing round
    _assert_no_op(_sync(b, address))
    _assert_no_op(_sync(b, address))


def test_writes_on_both_sides_leave_both_identical(pair: tuple[Path, Path, str]) -> None:
    a, b, address = pair
    _log(a, "written on A")
    _log(b, "written on B")
    first = _sync(b, address)
    assert first["entries_added"] == 1 and first["entries_sent"] == 1, first
    # A's author signature and A's state statement (signed on taking B's entry)
    assert first["attestations_added"] == 2, first
    assert _statements(a) == _statements(b)
    _assert_no_op(_sync(b, address))
    # a later change on either side: one real sync, then a no-op again
    _log(b, "again on B")
    assert _sync(b, address)["entries_sent"] == 1
    _assert_no_op(_sync(b, address))
    assert _statements(a) == _statements(b)
