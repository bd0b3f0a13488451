"""A hub process's last snapshot of each line, brought up to date from bucket sums.

A session whose whole-set fingerprint differs from the peer's needs the line's sorted
snapshot. Read from every entry row it costs a pass over the line (0.3 s at 100k). A hub
process keeps the last snapshot of each line it built, with the line's ``version`` and its
bucket sums (lifeline/store/pg_buckets.py) as they were; for the next session it reads the
``lines`` row (same version: the snapshot is current, no other read) and the bucket sums,
and reads the entry rows of the buckets that differ only — whichever hub process wrote
them. The result is checked against the line's whole-set totals; a mismatch (a writer that
kept no buckets) builds it again from every row. All reads are one REPEATABLE READ
transaction, so totals, buckets and rows agree.

The snapshot is the same one a full read gives (same items, same order), so what a session
sends is byte for byte what it sent before (decision 0033). Lines over ``max_items`` are
not kept, as in the SQLite cache (lifeline_mesh/sync/snapshot_cache.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from lifeline.store.pg_buckets import BUCKET_HEIGHTS, BucketSums, bucket_sums, rows_between
from lifeline.store.pg_schema import Conn
from lifeline.store.postgres import PgStore
from lifeline_mesh.recon.frames import Bound
from lifeline_mesh.recon.sets import Snapshot
from lifeline_mesh.sync.port import RunKey, RunKeys
from lifeline_mesh.sync.snapshot_cache import CACHE_MAX_ITEMS

__all__ = ["BucketSnapshots", "KeyedRows", "PgSnapshots", "pg_run"]

_MOD = 1 << 256


@dataclass(slots=True)
class _Held:
    snap: Snapshot
    version: int
    buckets: BucketSums


class PgSnapshots:
    def __init__(self, max_items: int = CACHE_MAX_ITEMS) -> None:
        self.max_items = max_items
        self._held: dict[tuple[str, int], _Held] = {}
        self._locks: dict[tuple[str, int], asyncio.Lock] = {}
        self.built = 0  # snapshots read from every row
        self.updated = 0  # brought up to date from the rows of differing buckets
        self.current = 0  # found current (the line's version unchanged)
        self.rows_read = 0  # entry rows read, in all

    async def snapshot(self, store: PgStore, extra_known: Iterable[bytes] = ()) -> Snapshot:
        key = (store.db.dsn, store.line_id)
        async with self._locks.setdefault(key, asyncio.Lock()):
            held = self._held.get(key)
            async with store.read_view() as conn:
                fresh = await self._read(conn, store.line_id, held)
            if len(fresh.snap) <= self.max_items:
                self._held[key] = fresh
            else:
                self._held.pop(key, None)
            return fresh.snap.view(extra_known)

    def of(self, store: PgStore) -> BucketSnapshots:
        """The entry snapshots of ``store``'s line, kept here."""
        return BucketSnapshots(self, store)

    async def _read(self, conn: Conn, line_id: int, held: _Held | None) -> _Held:
        row = await conn.fetchrow(
            "SELECT version, n, token_sum FROM lines WHERE line_id = $1", line_id
        )
        assert row is not None
        version, whole = int(row[0]), (int(row[1]), int.from_bytes(row[2], "little"))
        if held is not None and held.version == version:
            self.current += 1
            return held
        buckets = await bucket_sums(conn, line_id)
        if held is not None:
            snap = await self._update(conn, line_id, held, buckets)
            if snap.whole() == whole:
                self.updated += 1
                return _Held(snap, version, buckets)
        rows = await conn.fetch(
            "SELECT height, id, token FROM entries WHERE line_id = $1 ORDER BY height, id",
            line_id,
        )
        self.rows_read += len(rows)
        self.built += 1
        snap = Snapshot.build((int(h), bytes(i), bytes(t)) for h, i, t in rows)
        return _Held(snap, version, buckets)

    async def _update(self, conn: Conn, line_id: int, held: _Held, buckets: BucketSums) -> Snapshot:
        """``held``'s snapshot with the rows of every bucket that differs read again."""
        differ = sorted(b for b in buckets.keys() | held.buckets.keys()
                        if buckets.get(b) != held.buckets.get(b))  # fmt: skip
        snap = held.snap
        for first, last in _runs(differ):
            rows = await rows_between(conn, line_id, (first, last))
            self.rows_read += len(rows)
            lo = snap.index_of(Bound(first * BUCKET_HEIGHTS, b""))
            hi = snap.index_of(Bound((last + 1) * BUCKET_HEIGHTS, b""))
            snap = snap.replaced(lo, hi, rows)
        return snap


@dataclass(frozen=True, slots=True)
class BucketSnapshots:
    """The entries of one line of the database, their last snapshot kept by ``cache``
    (a ``SetSnapshots``)."""

    cache: PgSnapshots
    store: PgStore

    async def snapshot(self, extra_known: Iterable[bytes] = ()) -> Snapshot:
        return await self.cache.snapshot(self.store, extra_known)

    async def run(self, after: RunKey | None, limit: int) -> RunKeys:
        """The line's entry ids in key order after ``after`` (a ``KeyRuns``, decision 0144)."""
        return await pg_run(self.store, "entries", "height, ts, id", after, limit)


@dataclass(frozen=True, slots=True)
class KeyedRows:
    """One of the notary's tables of a hub's line as a set: its snapshot built from its keys
    each time, as before, and read in key order for a run (a ``SetSnapshots`` and a
    ``KeyRuns``)."""

    store: PgStore
    table: str
    keys: Callable[[], Awaitable[list[tuple[int, bytes]]]]  # (sort key, id) in key order

    async def snapshot(self, extra_known: Iterable[bytes] = ()) -> Snapshot:
        return Snapshot.build(((k, i, i) for k, i in await self.keys()), extra_known)

    async def run(self, after: RunKey | None, limit: int) -> RunKeys:
        return await pg_run(self.store, self.table, "sort_key, id", after, limit, item="item")


async def pg_run(
    store: PgStore,
    table: str,
    key: str,
    after: RunKey | None,
    limit: int,
    item: str | None = None,
) -> RunKeys:
    """Up to ``limit`` rows of ``table`` for ``store``'s line in the order of ``key`` (an
    index's columns after ``line_id``, the id last), after the key ``after``: their ids,
    the last key read (None once the table is over), and the column ``item`` if named."""
    width = key.count(",") + 1
    columns = key if item is None else f"{key}, {item}"
    if after is None:
        sql = f"SELECT {columns} FROM {table} WHERE line_id = $1 ORDER BY {key} LIMIT $2"
        rows = await store.fetch_line(sql, limit)
    else:
        marks = ", ".join(f"${n}" for n in range(2, len(after) + 2))
        sql = (
            f"SELECT {columns} FROM {table} WHERE line_id = $1 AND ({key}) > ({marks})"
            f" ORDER BY {key} LIMIT ${len(after) + 2}"
        )
        rows = await store.fetch_line(sql, *after, limit)
    last = tuple(rows[-1])[:width] if len(rows) == limit else None
    items = [bytes(r[width]) for r in rows] if item is not None else None
    return RunKeys([bytes(r[width - 1]) for r in rows], last, items)


def _runs(buckets: list[int]) -> list[tuple[int, int]]:
    """Sorted bucket numbers as runs of consecutive ones, ``(first, last)``."""
    out: list[tuple[int, int]] = []
    for b in buckets:
        if out and out[-1][1] == b - 1:
            out[-1] = (out[-1][0], b)
        else:
            out.append((b, b))
    return out
