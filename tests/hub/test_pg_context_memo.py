"""A PostgreSQL line's context kept in a :class:`~lifeline.truth.memo.LineMemo` under the
line's change token: answered from memory while nothing changed, computed again after a
write by another process (a hub `serve` admitting a laptop's sync; a process lowering an
entry's ts in place). Real processes, a real PostgreSQL."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from lifeline.store.postgres import PgStore
from lifeline.truth.budget import Budget
from lifeline.truth.formats import deliver
from lifeline.truth.memo import LineMemo
from lifeline.truth.service import build_context
from tests.support.mesh_procs import cli, log_note, shared_node
from tests.support.pg_server import fresh_database, hub

EARLIER = "2020-01-02T03:04:05.000000Z"

LOWER_TS = """
import asyncio, sys
from lifeline.store.postgres import PgStore

async def main(url, entry_id, ts):
    async with await PgStore.open(url, "ledger", create=False) as store:
        entry = await store.get(entry_id)
        result = await store.append_many([entry.with_ts(ts)])
        assert result.ts_lowered == (entry_id,), result

asyncio.run(main(*sys.argv[1:]))
"""


def test_pg_context_memo_moves_with_writes_by_other_processes(
    pg_server: str, tmp_path: Path
) -> None:
    url = asyncio.run(fresh_database(pg_server))
    laptop = tmp_path / "laptop"
    shared_node(tmp_path / "hub")
    shared_node(laptop)
    first = log_note(laptop, "Database: PostgreSQL")
    with hub(tmp_path / "hub", url) as (_proc, address):
        cli("lifeline_mesh", laptop, "sync", address, "--insecure")

        async def scenario() -> None:
            async with await PgStore.open(url, "ledger", create=False) as store:
                memo = LineMemo(store.change_token)

                async def context() -> str:
                    async def compute() -> str:
                        ctx = await build_context(store, line="ledger", budget=Budget())
                        return deliver("markdown", ctx)

                    return await memo.answer("context", compute)

                warm = await context()
                assert "Database: PostgreSQL" in warm
                assert await context() == warm
                assert (memo.hits, memo.misses) == (1, 1)

                # a write by another process: the hub admits the laptop's next sync
                await asyncio.to_thread(log_note, laptop, "Queue: SQS")
                await asyncio.to_thread(cli, "lifeline_mesh", laptop, "sync", address, "--insecure")
                after = await context()
                assert "Queue: SQS" in after
                assert (memo.hits, memo.misses) == (1, 2)

                # no new row: another process lowers a stored entry's ts in place
                assert EARLIER[:16] not in after
                await asyncio.to_thread(
                    subprocess.run,
                    [sys.executable, "-c", LOWER_TS, url, first, EARLIER],
                    check=True,
                    timeout=60,
                )
                lowered = await context()
                assert EARLIER[:16] in lowered
                assert await context() == lowered
                assert (memo.hits, memo.misses) == (2, 3)

        asyncio.run(scenario())
