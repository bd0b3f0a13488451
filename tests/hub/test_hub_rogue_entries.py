"""A hub (`serve --store postgresql://…`, mutual TLS) refuses a member's copy of another
node's entry dated as its author did not sign it, names the member, and stores the rest of
the session (issue 32, decision 0048). Real processes, a real PostgreSQL server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest

from tests.support.mesh_procs import cli, join_mesh, log_note, shared_node
from tests.support.pg_server import fresh_database, hub
from tests.support.rogue import strip_and_backdate

pytestmark = pytest.mark.slow


async def _hub_ts(url: str, ids: list[str]) -> dict[str, str]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT id, ts FROM entries WHERE id = ANY($1::bytea[])",
            [bytes.fromhex(i) for i in ids],
        )
        return {bytes(r[0]).hex(): r[1] for r in rows}
    finally:
        await conn.close()


async def _hub_sources(url: str) -> list[tuple[str, ...]]:
    """The hub's ``entry_sources`` rows: (entry, ts, source, outcome)."""
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT entry_id, ts, source, outcome FROM entry_sources ORDER BY entry_id"
        )
        return [tuple(r) for r in rows]
    finally:
        await conn.close()


@pytest.mark.timeout(900)  # real processes: minutes when the machine is loaded
def test_a_hub_refuses_a_members_rewrite_and_keeps_the_session(
    pg_server: str, tmp_path: Path
) -> None:
    url = asyncio.run(fresh_database(pg_server))
    a, h, m = (tmp_path / n for n in ("a", "hub", "m"))
    for root in (a, h, m):
        shared_node(root)
    join_mesh(a, [h, m])
    m_id = cli("lifeline_mesh", m, "id").stdout.strip()
    entry = log_note(a, "decided by A")
    with hub(h, url, insecure=False) as (_proc, address):
        cli("lifeline_mesh", a, "sync", address)
        cli("lifeline_mesh", m, "sync", address)
        signed = asyncio.run(_hub_ts(url, [entry]))[entry]
        early = strip_and_backdate(m / ".lifeline" / "ledger.db", entry)
        own = log_note(m, "M's own note, on top of the copy")
        pushed = cli("lifeline_mesh", m, "sync", address, check=False)
        assert pushed.returncode == 0, pushed.stderr  # aborted for good before
    held = asyncio.run(_hub_ts(url, [entry, own]))
    assert held[entry] == signed and own in held
    assert (entry, early, m_id, "refused") in asyncio.run(_hub_sources(url))
