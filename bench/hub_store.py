"""The PostgreSQL store beside SQLite: batched append throughput and the in-sync check.

    python bench/hub_store.py [N] [BATCH]      (defaults 20000 entries, 1000 a batch)

Starts a throwaway PostgreSQL cluster with default durability (fsync on) from Debian's
binaries (tests/support/pg_server.py), or uses LIFELINE_TEST_PG=postgresql://… . SQLite runs as the
node runs it (WAL, synchronous=NORMAL). Prints entries/s of ``append_many`` for each, and
the median time of the whole-line fingerprint (``entry_totals``, what sync's in-sync check
reads) and of a full sync snapshot, each side by side.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lifeline.entry import Entry
from lifeline.store.postgres import PgStore
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.sync.entry_set import EntrySet

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's tests/
from tests.support.pg_server import Cluster, line_name, server_binaries


def entries(n: int) -> list[Entry]:
    out: list[Entry] = []
    for k in range(n):
        parents = (out[k - 1].id,) if k and k % 50 else ()  # chains of 50, as sessions write
        ts = f"2026-03-01T{10 + k // 3600 % 12:02d}:{k // 60 % 60:02d}:{k % 60:02d}.000000Z"
        out.append(
            Entry.create(ts=ts, kind="note", summary=f"entry {k}", body="x" * 400, parents=parents)
        )
    return out


async def fill(store: SqliteStore | PgStore, batch: list[list[Entry]]) -> float:
    start = time.perf_counter()
    for part in batch:
        await store.append_many(part)
    return time.perf_counter() - start


async def median_ms(fn: object, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await fn()  # type: ignore[operator]
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


async def main(n: int, size: int, url: str) -> None:
    made = entries(n)
    batches = [made[i : i + size] for i in range(0, n, size)]
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = await SqliteStore.open(Path(tmp) / "line.db")
        pg = await PgStore.open(url, line_name())
        try:
            s_time = await fill(sqlite, batches)
            p_time = await fill(pg, batches)
            print(f"append_many, {n} entries in batches of {size}:")
            print(f"  SQLite      {n / s_time:10,.0f} entries/s")
            print(f"  PostgreSQL  {n / p_time:10,.0f} entries/s  ({s_time / p_time:.2f}x SQLite)")
            s_fp = await median_ms(sqlite.entry_totals, 50)
            p_fp = await median_ms(pg.entry_totals, 50)
            print("whole-line fingerprint (in-sync check), median of 50:")
            print(f"  SQLite {s_fp:.3f} ms, PostgreSQL {p_fp:.3f} ms")
            s_snap = await median_ms(EntrySet(sqlite).snapshot, 5)
            p_snap = await median_ms(EntrySet(pg).snapshot, 5)
            print("full sync snapshot, median of 5:")
            print(f"  SQLite {s_snap:.1f} ms, PostgreSQL {p_snap:.1f} ms")
        finally:
            await sqlite.close()
            await pg.close()


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    per = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    given = os.environ.get("LIFELINE_TEST_PG")
    if given:
        asyncio.run(main(count, per, given))
        raise SystemExit(0)
    bin_dir = server_binaries()
    if bin_dir is None:
        raise SystemExit(
            "no PostgreSQL binaries: apt-get install postgresql, or set LIFELINE_TEST_PG"
        )
    cluster = Cluster(bin_dir, durable=True)
    cluster.start()
    try:
        asyncio.run(main(count, per, cluster.url))
    finally:
        cluster.stop()
