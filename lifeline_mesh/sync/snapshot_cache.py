"""A serving node's last snapshot of each set, brought up to date instead of rebuilt.

A session that finds a set different from the peer's loads that set's sorted snapshot.
Built from scratch, that is a pass over the whole set (at 100k entries about half a
second of CPU, most of it hex-decoding ids and hashing tokens), so at steady state every
propagated write cost each node work proportional to its line (issue 14's soak). The
node now keeps the last snapshot of each (line, set) it built and, for the next session,
adds only the rows written since (by row number, ``seq``), then checks the result against
the set's whole-set summary (count and sum of tokens, kept by every write): equal, it is
the set; otherwise (a ts lowered in place, a summary not kept) it is built again from the
rows. Everything is read in one read transaction, so rows and summary agree.

With a ``directory``, the snapshots held are also kept on disk (``snapshot_file.py``): a
restarted node starts from them instead of building each set again.

Sets over ``max_items`` are not kept (a million-entry line would hold ~110 MB per set for
good); they are built for each session as before.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from lifeline.store.sqlite_group import read_transaction
from lifeline.store.summary import read_totals, table_mark
from lifeline.store.tiers import SqlLine
from lifeline_mesh.recon.sets import Snapshot
from lifeline_mesh.sync.port import RunKey, RunKeys
from lifeline_mesh.sync.snapshot_file import (
    SAVE_EVERY_S,
    load_snapshot,
    save_snapshot,
    snapshot_path,
)

__all__ = ["CACHE_MAX_ITEMS", "KeptSnapshots", "SetRows", "SnapshotCache"]

log = logging.getLogger(__name__)

CACHE_MAX_ITEMS = 300_000

Rows = Callable[[Iterable[tuple[object, ...]]], Iterator[tuple[int, bytes, bytes]]]


@dataclass(frozen=True, slots=True)
class SetRows:
    """How to read one set's rows: its summary's name, its table, the columns of a
    snapshot row and how to turn them into ``(height, id, token)``."""

    name: str
    table: str
    columns: str  # e.g. "height, id, ts"
    order: str  # e.g. "height, id"
    rows: Rows
    # The columns of an index's order, parents first, the id last (e.g. "height, ts, id"),
    # and how its id column becomes an id: a run reads the set in that order (decision 0144)
    run_key: str
    run_id: Callable[[object], bytes]
    run_item: str | None = None  # a column holding each row's raw item whole, if any


@dataclass(slots=True)
class _Held:
    snap: Snapshot
    mark: int  # the table's highest row number the snapshot covers


class SnapshotCache:
    def __init__(
        self,
        max_items: int = CACHE_MAX_ITEMS,
        directory: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_items = max_items
        self.directory = directory  # where the held snapshots are also kept (or nowhere)
        self._clock = clock
        self._held: dict[tuple[str, str], _Held] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._saved: dict[tuple[str, str], tuple[float, int]] = {}  # when, and which mark
        self._saving: set[asyncio.Task[None]] = set()
        self.built = 0  # snapshots built from every row
        self.updated = 0  # snapshots brought up to date from the rows added
        self.loaded = 0  # snapshots a fresh process started from (their file)

    async def snapshot(
        self, store: SqlLine, spec: SetRows, extra_known: Iterable[bytes] = ()
    ) -> Snapshot:
        key = (str(store.path), spec.name)
        async with self._locks.setdefault(key, asyncio.Lock()):
            held = self._held.get(key)
            path = None
            if self.directory is not None:
                path = snapshot_path(self.directory, Path(store.path), spec.name)
                if held is None and (found := await asyncio.to_thread(load_snapshot, path)):
                    held = _Held(*found)
                    self.loaded += 1
                    self._saved[key] = (self._clock(), held.mark)
            snap, mark, updated = await store.run_read(lambda conn: _read(conn, spec, held))
            if updated:
                self.updated += 1
            else:
                self.built += 1
            if len(snap) <= self.max_items:
                self._held[key] = _Held(snap, mark)
                if path is not None:
                    self._save(key, path, snap, mark, built=not updated)
            else:
                self._held.pop(key, None)
            return snap.view(extra_known)

    def _save(
        self, key: tuple[str, str], path: Path, snap: Snapshot, mark: int, *, built: bool
    ) -> None:
        """Write ``snap`` to its file in the background: after a build, else at most once
        every ``SAVE_EVERY_S`` (a restarted node then merges at most that many seconds of
        rows into it)."""
        now = self._clock()
        when, saved_mark = self._saved.get(key, (None, None))
        if saved_mark == mark or (not built and when is not None and now - when < SAVE_EVERY_S):
            return
        self._saved[key] = (now, mark)
        task = asyncio.create_task(asyncio.to_thread(_write, path, snap, mark))
        self._saving.add(task)
        task.add_done_callback(self._saving.discard)

    async def flush(self) -> None:
        """Wait for the snapshot files being written."""
        while self._saving:
            await asyncio.gather(*self._saving)

    def of(self, store: SqlLine, spec: SetRows) -> KeptSnapshots:
        """The snapshots of one set of ``store``, kept here."""
        return KeptSnapshots(self, store, spec)


@dataclass(frozen=True, slots=True)
class KeptSnapshots:
    """One set of one line file, its last snapshot kept by ``cache`` (a ``SetSnapshots``)."""

    cache: SnapshotCache
    store: SqlLine
    spec: SetRows

    async def snapshot(self, extra_known: Iterable[bytes] = ()) -> Snapshot:
        return await self.cache.snapshot(self.store, self.spec, extra_known)

    async def run(self, after: RunKey | None, limit: int) -> RunKeys:
        """The set's ids in key order after ``after``, ``limit`` at most (a ``KeyRuns``):
        one step of its index a chunk, each chunk its own read (decision 0144)."""
        return await self.store.run_read(lambda conn: _run(conn, self.spec, after, limit))


def _write(path: Path, snap: Snapshot, mark: int) -> None:
    try:
        save_snapshot(path, snap, mark)
    except OSError as exc:  # a full disk costs the next start a build, nothing else
        log.warning("cannot keep the snapshot %s: %s", path, exc)


def _run(conn: sqlite3.Connection, spec: SetRows, after: RunKey | None, limit: int) -> RunKeys:
    key, width = spec.run_key, spec.run_key.count(",") + 1
    columns = key if spec.run_item is None else f"{key}, {spec.run_item}"
    if after is None:
        sql = f"SELECT {columns} FROM {spec.table} ORDER BY {key} LIMIT ?"
        rows = conn.execute(sql, (limit,)).fetchall()
    else:
        marks = ",".join("?" * len(after))
        sql = f"SELECT {columns} FROM {spec.table} WHERE ({key}) > ({marks}) ORDER BY {key} LIMIT ?"
        rows = conn.execute(sql, (*after, limit)).fetchall()
    ids: list[bytes] = []
    items: list[bytes] = []
    for row in rows:
        try:
            ids.append(spec.run_id(row[width - 1]))
        except (TypeError, ValueError):  # a damaged row: not sent, the rest are
            log.warning("a row of %s has no valid id (%r): not sent", spec.table, row[width - 1])
            continue
        if spec.run_item is not None:
            items.append(bytes(row[width]))
    last = tuple(rows[-1][:width]) if len(rows) == limit else None
    return RunKeys(ids, last, items if spec.run_item is not None else None)


def _read(
    conn: sqlite3.Connection, spec: SetRows, held: _Held | None
) -> tuple[Snapshot, int, bool]:
    with read_transaction(conn):  # the rows and the summary agree
        mark = table_mark(conn, spec.table)
        if held is not None and held.mark <= mark:
            totals = read_totals(conn, spec.name, spec.table)
            if totals is not None:
                sql = f"SELECT {spec.columns} FROM {spec.table} WHERE seq > ?"
                snap = held.snap.merged(spec.rows(conn.execute(sql, (held.mark,))))
                if snap.whole() == (totals.count, totals.total):
                    return snap, mark, True
        sql = f"SELECT {spec.columns} FROM {spec.table} ORDER BY {spec.order}"
        return Snapshot.build(spec.rows(conn.execute(sql))), mark, False
