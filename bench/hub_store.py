"""The PostgreSQL store beside SQLite: batched append throughput and the in-sync check;
with ``ranges``, what a hub does when a line differs (decision 0033).

    python bench/hub_store.py [N] [BATCH]      (defaults 20000 entries, 1000 a batch)
    python bench/hub_store.py ranges [N]       (default 100000 entries)

Starts a throwaway PostgreSQL cluster with default durability (fsync on) from Debian's
binaries (tests/support/pg_server.py), or uses LIFELINE_TEST_PG=postgresql://… . SQLite runs as the
node runs it (WAL, synchronous=NORMAL). Prints entries/s of ``append_many`` for each, and
the median time of the whole-line fingerprint (``entry_totals``, what sync's in-sync check
reads) and of a full sync snapshot, each side by side.

``ranges``: one line of N entries as ``lifeline log`` grows it (each the child of the one
before, heights 1..N), then what preparing a session that differs costs: the snapshot read
from every row, and a hub process's snapshot brought up to date after 10 entries were
written by another process (at the top of the line, and on a branch from its middle), from
the bucket sums (lifeline_mesh/sync/pg_snapshots.py), beside SQLite's snapshot cache.
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
from lifeline_mesh.sync.entry_set import ENTRY_ROWS, EntrySet, ScannedEntries, TokenRowEntries
from lifeline_mesh.sync.pg_snapshots import PgSnapshots
from lifeline_mesh.sync.snapshot_cache import SnapshotCache

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
            s_snap = await median_ms(EntrySet(sqlite, snapshots=ScannedEntries(sqlite)).snapshot, 5)
            p_snap = await median_ms(EntrySet(pg, snapshots=TokenRowEntries(pg)).snapshot, 5)
            print("full sync snapshot, median of 5:")
            print(f"  SQLite {s_snap:.1f} ms, PostgreSQL {p_snap:.1f} ms")
        finally:
            await sqlite.close()
            await pg.close()


def one_chain(n: int, tag: str, parent: str | None = None, at: int = 0) -> list[Entry]:
    out: list[Entry] = []
    for k in range(at, at + n):
        parents = (out[-1].id,) if out else ((parent,) if parent else ())
        ts = f"2026-03-{1 + k // 86400:02d}T{k // 3600 % 24:02d}:{k // 60 % 60:02d}:{k % 60:02d}Z"
        out.append(Entry.create(ts=ts, kind="note", summary=f"{tag} {k}", body="x" * 400,
                                parents=parents))  # fmt: skip
    return out


async def timed_ms(fn: object) -> float:
    start = time.perf_counter()
    await fn()  # type: ignore[operator]
    return (time.perf_counter() - start) * 1000


async def ranges(n: int, url: str) -> None:
    made = one_chain(n, "entry")
    batches = [made[i : i + 1000] for i in range(0, n, 1000)]
    name = line_name()
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = await SqliteStore.open(Path(tmp) / "line.db")
        pg, other = await PgStore.open(url, name), await PgStore.open(url, name)
        try:
            p_time, s_time = await fill(pg, batches), await fill(sqlite, batches)
            print(f"append_many, one chain of {n}, 1,000 a call (buckets kept):")
            print(f"  SQLite {n / s_time:,.0f} entries/s, PostgreSQL {n / p_time:,.0f} entries/s")
            async with pg.db.pool.acquire() as conn:  # what the hub does after such a load
                await conn.execute(f"VACUUM (ANALYZE) entries_{pg.line_id}")
            s_fp = await median_ms(sqlite.entry_totals, 50)
            p_fp = await median_ms(pg.entry_totals, 50)
            print(f"in-sync check (entry_totals), median of 50: SQLite {s_fp:.3f} ms, "
                  f"PostgreSQL {p_fp:.3f} ms")  # fmt: skip
            full_s = await median_ms(EntrySet(sqlite, snapshots=ScannedEntries(sqlite)).snapshot, 3)
            full_p = await median_ms(EntrySet(pg, snapshots=TokenRowEntries(pg)).snapshot, 3)
            print(f"snapshot from every row, median of 3: SQLite {full_s:.0f} ms, "
                  f"PostgreSQL {full_p:.0f} ms")  # fmt: skip
            pgc, sqc = PgSnapshots(), SnapshotCache()
            await pgc.snapshot(pg)
            kept = EntrySet(sqlite, snapshots=sqc.of(sqlite, ENTRY_ROWS))
            await kept.snapshot()
            same = await median_ms(lambda: pgc.snapshot(pg), 20)
            print(f"hub snapshot, line unchanged (version read), median of 20: {same:.2f} ms")
            top, mid = made[-1].id, made[n // 2].id
            for where, parent in (("at the top", top), ("on a branch from the middle", mid)):
                p_ms, s_ms, rows = [], [], []
                for r in range(5):
                    new = one_chain(10, f"{where} {r}", parent, at=n + 20 * r)
                    parent = new[-1].id
                    await other.append_many(new)  # another hub process writes
                    await sqlite.append_many(new)
                    before = pgc.rows_read
                    p_ms.append(await timed_ms(lambda: pgc.snapshot(pg)))
                    rows.append(pgc.rows_read - before)
                    s_ms.append(await timed_ms(kept.snapshot))
                print(f"10 entries written {where}, snapshot brought up to date, median of 5:")
                print(f"  PostgreSQL {statistics.median(p_ms):.1f} ms "
                      f"({statistics.median(rows):.0f} entry rows read), "
                      f"SQLite cache {statistics.median(s_ms):.1f} ms")  # fmt: skip
        finally:
            await sqlite.close()
            await pg.close()
            await other.close()


if __name__ == "__main__":
    mode = ranges if sys.argv[1:2] == ["ranges"] else None
    args = sys.argv[2:] if mode else sys.argv[1:]
    count = int(args[0]) if args else (100_000 if mode else 20_000)
    per = int(args[1]) if len(args) > 1 else 1000
    given = os.environ.get("LIFELINE_TEST_PG")
    if given:
        asyncio.run(ranges(count, given) if mode else main(count, per, given))
        raise SystemExit(0)
    bin_dir = server_binaries()
    if bin_dir is None:
        raise SystemExit(
            "no PostgreSQL binaries: apt-get install postgresql, or set LIFELINE_TEST_PG"
        )
    cluster = Cluster(bin_dir, durable=True)
    cluster.start()
    try:
        asyncio.run(ranges(count, cluster.url) if mode else main(count, per, cluster.url))
    finally:
        cluster.stop()
