"""A hub's line sent whole to a node that holds none of it, read in key order with no
snapshot, as a line file's is (decision 0144): a real PostgreSQL, real nodes over gRPC."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lifeline.store.postgres import PgStore
from lifeline_mesh.recon.session import SessionLimits
from lifeline_mesh.sync import pg_snapshots
from lifeline_mesh.sync.port import RunKeys
from tests.support.pg_server import fresh_database
from tests.support.recon_helpers import chain
from tests.support.sync_helpers import history, make_node, serving, signature_ids, write_signed

LIMITS = SessionLimits(fetch_chunk=64, max_frame_bytes=8 << 20)


async def _pull(tmp_path: Path, store_url: str | None) -> tuple[list[int], set[bytes]]:
    """A laptop pulls 300 signed entries from a node (a hub when ``store_url``); what the
    session moved, and the signatures the laptop then holds."""
    server = make_node(tmp_path / "server", store_url=store_url, limits=LIMITS)
    laptop = make_node(tmp_path / "laptop", limits=LIMITS)
    await write_signed(server, tmp_path / "server", chain(250, "hub") + chain(50, "beside"))
    async with serving(server) as (srv, address):
        [report] = await laptop.sync(address, ["ledger"])
        [served] = srv.reports
        assert served.snapshots == 0 and served.entries_sent == 300
        assert served.signatures_sent == 300 + 1  # and the seal over them (decision 0149)
        assert await history(laptop) == await history(server)
        [again] = await laptop.sync(address, ["ledger"])
        assert again.entries_added == 0 and again.round_trips == 1
    await server.close()
    moved = [report.entries_added, report.bytes_sent, report.bytes_received]
    return moved, signature_ids(tmp_path / "laptop")


async def test_a_pull_from_a_hub_is_served_in_runs_as_from_a_line_file(
    pg_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: dict[str, int] = {}
    original = pg_snapshots.pg_run

    async def counted(store: PgStore, table: str, *rest: Any, **named: Any) -> RunKeys:
        reads[table] = reads.get(table, 0) + 1
        return await original(store, table, *rest, **named)

    monkeypatch.setattr(pg_snapshots, "pg_run", counted)
    on_postgres = await _pull(tmp_path / "pg", await fresh_database(pg_server))
    assert reads == {"entries": 5, "attestations": 5}  # 300 of each, 64 a chunk
    on_sqlite = await _pull(tmp_path / "sqlite", None)
    assert on_postgres[0] == on_sqlite[0]  # the same bytes each way as from a line file
    assert len(on_postgres[1]) == len(on_sqlite[1]) == 300
