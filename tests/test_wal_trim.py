"""A serving node keeps its lines' write-ahead logs small, even beside a process that keeps
the line open (which stops SQLite from removing the log when the node's store closes)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import lifeline_mesh.node.wal as wal
from tests.recon_helpers import chain
from tests.sync_helpers import make_node, serving, write

BASE = chain(400, "wal", body="w" * 1500)


async def test_a_session_truncates_a_wal_over_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = make_node(tmp_path / "a"), make_node(tmp_path / "b")
    await write(a, BASE)
    line = b.home.line_path("ledger")
    log = line.with_name(line.name + "-wal")
    await write(b, BASE[:10])
    keeper = sqlite3.connect(line)  # another process's open connection: the WAL stays
    try:
        keeper.execute("SELECT count(*) FROM entries").fetchone()
        async with serving(b) as (_, address):
            monkeypatch.setattr(wal, "WAL_TRIM_BYTES", 1 << 40)  # as before: never trimmed
            [report] = await a.sync(address, ["ledger"])
            assert report.entries_sent == len(BASE) - 10
            grown = log.stat().st_size
            monkeypatch.setattr(wal, "WAL_TRIM_BYTES", 256 * 1024)
            [again] = await a.sync(address, ["ledger"])  # an in-sync check ends with a trim
        assert grown > 512 * 1024 and again.round_trips == 1
        assert log.stat().st_size <= 256 * 1024
        assert keeper.execute("SELECT count(*) FROM entries").fetchone() == (len(BASE),)
    finally:
        keeper.close()
