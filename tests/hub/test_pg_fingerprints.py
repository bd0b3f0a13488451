"""A hub line's fingerprints per bucket of heights (lifeline/store/pg_buckets.py) and a hub
process's snapshot brought up to date from them (lifeline_mesh/sync/pg_snapshots.py): the
buckets always equal the sums over the rows, an updated snapshot equals one read from every
row while reading only the differing buckets' rows, and a session against a hub on
PostgreSQL moves exactly the bytes it moves against a node on SQLite (decision 0033)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.store.pg_buckets import BUCKET_HEIGHTS, bucket_sums
from lifeline.store.postgres import PgStore
from lifeline_mesh.recon.frames import Bound
from lifeline_mesh.recon.sets import Snapshot
from lifeline_mesh.sync.driver import SyncReport
from lifeline_mesh.sync.entry_set import KeyedEntries, TokenRowEntries
from lifeline_mesh.sync.pg_snapshots import PgSnapshots
from tests.support.pg_server import fresh_database, line_name
from tests.support.recon_helpers import chain
from tests.support.sync_helpers import make_node, serving, write

MOD = 1 << 256
BASE = chain(700, "fp")  # heights 1..700: three buckets
SIDE = chain(30, "side", BASE[100].id)  # in the first bucket, between held items
OTHER = chain(12, "other", BASE[50].id)


def _earlier(entry: Entry) -> Entry:
    return Entry.from_json(entry.to_json().replace(entry.ts.encode(), b"2025-12-31T00:00:00Z"))


async def _expected(store: PgStore) -> dict[int, tuple[int, int]]:
    out: dict[int, tuple[int, int]] = {}
    for height, _id, token in await store.snapshot_rows():
        n, total = out.get(height // BUCKET_HEIGHTS, (0, 0))
        out[height // BUCKET_HEIGHTS] = (n + 1, (total + int.from_bytes(token, "little")) % MOD)
    return out


def _same(got: Snapshot, fresh: Snapshot) -> None:
    assert len(got) == len(fresh) and got.whole() == fresh.whole()
    assert [got.key(i) for i in range(len(got))] == [fresh.key(i) for i in range(len(fresh))]
    assert [got.token(i) for i in range(len(got))] == [fresh.token(i) for i in range(len(got))]
    for i in range(0, len(got), 37):
        assert got.position(got.item_id(i)) == i
    n = len(got)
    for lo, hi in ((0, n), (n // 3, n // 2), (5, n - 5)):
        assert got.fingerprint(lo, hi) == fresh.fingerprint(lo, hi)


async def test_buckets_follow_every_write_and_updated_snapshots_read_few_rows(
    pg_server: str,
) -> None:
    name = line_name()
    async with (
        await PgStore.open(pg_server, name) as store,
        await PgStore.open(pg_server, name) as other,
    ):  # another hub process's pool on the same line
        cache = PgSnapshots()
        await store.append_many(BASE[:500])
        async with store.read_view() as conn:
            assert await bucket_sums(conn, store.line_id) == await _expected(store)
        fresh = Snapshot.build(await store.snapshot_rows())
        _same(await cache.snapshot(store), fresh)
        assert (cache.built, cache.rows_read) == (1, 500)
        _same(await cache.snapshot(store), fresh)  # unchanged: the version says so
        assert cache.current == 1 and cache.rows_read == 500

        await other.append_many(BASE[500:])  # the top bucket, through the other pool
        _same(await cache.snapshot(store), Snapshot.build(await store.snapshot_rows()))
        # buckets 1 and 2 changed (heights 256..700); bucket 0 was not read again
        assert cache.updated == 1 and cache.rows_read == 500 + 445

        await other.append_many([*SIDE, _earlier(BASE[3])])  # bucket 0: new and lowered
        async with store.read_view() as conn:
            assert await bucket_sums(conn, store.line_id) == await _expected(store)
        _same(await cache.snapshot(store), Snapshot.build(await store.snapshot_rows()))
        assert cache.updated == 2 and cache.rows_read == 945 + 255 + len(SIDE)  # bucket 0
        snap = await cache.snapshot(store)
        whole_first = snap.index_of(Bound(BUCKET_HEIGHTS, b""))
        async with store.read_view() as conn:
            n, total = (await bucket_sums(conn, store.line_id))[0]
        assert (n, total) == (whole_first, int.from_bytes(snap.range_sum(0, whole_first), "little"))


async def test_a_stale_bucket_is_caught_by_the_line_totals(pg_server: str) -> None:
    async with await PgStore.open(pg_server, line_name()) as store:
        cache = PgSnapshots()
        await store.append_many(BASE[:300])
        await cache.snapshot(store)
        async with store.transaction() as conn:
            kept = await conn.fetch("SELECT * FROM fp_buckets WHERE line_id = $1", store.line_id)
        await store.append_many(BASE[300:400])
        async with store.transaction() as conn:  # as if a writer had kept no buckets
            await conn.execute("DELETE FROM fp_buckets WHERE line_id = $1", store.line_id)
            await conn.executemany(
                "INSERT INTO fp_buckets VALUES ($1, $2, $3, $4)", [tuple(r) for r in kept]
            )
        _same(await cache.snapshot(store), Snapshot.build(await store.snapshot_rows()))
        assert cache.built == 2  # read again from every row, not trusted


async def test_a_hub_lines_snapshot_sources_agree(pg_server: str) -> None:
    """The port's (keys, then each ts), the stored tokens, and the kept one by buckets: a
    hub line's opener may hand any of them to its set (decision 0076)."""
    async with await PgStore.open(pg_server, line_name()) as store:
        await store.append_many([*BASE[:400], *SIDE])
        keyed = await KeyedEntries(store).snapshot()
        _same(await TokenRowEntries(store).snapshot(), keyed)
        _same(await PgSnapshots().of(store).snapshot(), keyed)


def _wire(report: SyncReport) -> tuple[int, ...]:
    return (
        report.entries_sent, report.entries_received, report.entries_added,
        report.bytes_sent, report.bytes_received, report.round_trips, report.ts_lowered,
    )  # fmt: skip


async def _sessions(tmp_path: Path, store_url: str | None) -> list[tuple[int, ...]]:
    """Three sessions of a laptop with a serving node (a hub when ``store_url``), the
    serving side changed between them at old and new heights; what each moved."""
    server = make_node(tmp_path / "server", store_url=store_url)
    laptop = make_node(tmp_path / "laptop")
    await write(server, BASE[:600])
    await write(laptop, [*BASE[:300], *SIDE[:10]])
    out = []
    async with serving(server) as (_srv, address):
        out.append(_wire((await laptop.sync(address, ["ledger"]))[0]))
        await write(server, [*BASE[600:], *SIDE[10:20], _earlier(BASE[0])])
        await write(laptop, OTHER)
        out.append(_wire((await laptop.sync(address, ["ledger"]))[0]))
        out.append(_wire((await laptop.sync(address, ["ledger"]))[0]))  # in sync
    if store_url is not None:
        assert server.lines.snapshots.updated >= 1  # the later sessions used the buckets
    await server.close()
    return out


async def test_a_session_with_a_hub_moves_the_same_bytes_as_with_sqlite(
    pg_server: str, tmp_path: Path
) -> None:
    on_sqlite = await _sessions(tmp_path / "sqlite", None)
    on_postgres = await _sessions(tmp_path / "pg", await fresh_database(pg_server))
    assert on_postgres == on_sqlite
    assert on_sqlite[2][:3] == (0, 0, 0)


pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
