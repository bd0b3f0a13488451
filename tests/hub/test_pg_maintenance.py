"""A hub runs VACUUM ANALYZE on a line's partition after a session loaded many entries into
it, in the background (lifeline/store/pg_maintain.py), then brings recall's index up to
date: the session does not wait for it, and small sessions do not cause it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg

from lifeline.store.pg_lines import PgLines
from lifeline.store.pg_maintain import ANALYZE_AFTER
from tests.support.pg_server import fresh_database
from tests.support.recon_helpers import chain
from tests.support.sync_helpers import make_node, serving, write


async def _analyzed(url: str, line_id: int) -> bool:
    conn = await asyncpg.connect(url)
    try:
        row = await conn.fetchrow(
            "SELECT last_vacuum, last_analyze FROM pg_stat_user_tables WHERE relname = $1",
            f"entries_{line_id}",
        )
        return row is not None and row[0] is not None and row[1] is not None
    finally:
        await conn.close()


async def test_a_large_load_is_analyzed_after_the_session(pg_server: str, tmp_path: Path) -> None:
    url = await fresh_database(pg_server)
    hub = make_node(tmp_path / "hub", store_url=url)
    laptop = make_node(tmp_path / "laptop")
    entries = chain(ANALYZE_AFTER + 200, "load")
    await write(laptop, entries[:100])
    try:
        async with serving(hub) as (_server, address):
            await laptop.sync(address, ["ledger"])  # 100 entries: no upkeep
            assert isinstance(hub.home.lines, PgLines)
            db = await hub.home.lines.database()
            line_id = (await db.line("ledger")).line_id
            await db.maintenance.idle()
            assert db.maintenance.runs == []
            await write(laptop, entries[100:])
            [report] = await laptop.sync(address, ["ledger"])
            assert report.entries_sent == ANALYZE_AFTER + 100
            await asyncio.wait_for(db.maintenance.idle(), 120)
            assert [line for line, _ in db.maintenance.runs] == [line_id]
            assert await _analyzed(url, line_id)
            # then recall's index, brought up to date with no reader (decision 0109)
            conn = await asyncpg.connect(url)
            try:
                docs = await conn.fetchval(
                    "SELECT docs FROM recall_mark WHERE line_id = $1", line_id
                )
            finally:
                await conn.close()
            assert docs == ANALYZE_AFTER + 200
    finally:
        await hub.close()
