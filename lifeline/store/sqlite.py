"""SqliteStore: the store port on one SQLite file per line (WAL).

Each store operation runs as one function on a dedicated worker thread that owns the
connection, so a multi-statement write transaction costs one thread hop, not one per
statement (see docs/decisions/0002-sqlite-worker-thread.md). Write transactions are
``BEGIN IMMEDIATE`` so several processes appending to one line serialise on SQLite's lock
instead of failing half-way; ``busy_timeout`` makes them wait their turn.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from lifeline.entry import Entry
from lifeline.errors import AmbiguousPrefix, CorruptRow, NotFound, StoreError
from lifeline.fsutil import refuse_link
from lifeline.store import deferred_ids
from lifeline.store.lock_wait import begin_at_once, begin_immediate
from lifeline.store.pipeline import pipelined
from lifeline.store.port import AppendResult, RowProblem
from lifeline.store.rows import decode_row as _decode
from lifeline.store.rows import stored_height
from lifeline.store.schema import Schema, line_schema
from lifeline.store.sqlite_group import WriteGroup
from lifeline.store.sqlite_json import entries_json
from lifeline.store.sqlite_open import open_connection, store_failure
from lifeline.store.sqlite_reads import (
    COLUMNS,
    decode_or_raise,
    decoded_by_id,
    pages,
    tips_for_write,
)
from lifeline.store.sqlite_writes import (
    InTransaction,
    append_tx,
    append_within,
    declare_tx,
    id_chunks,
    in_transaction,
)
from lifeline.store.summary import (
    ENTRIES_SET,
    SetTotals,
    compute_totals,
    entry_token,
    read_totals,
)

__all__ = ["SqliteStore"]


log = logging.getLogger(__name__)
T = TypeVar("T")

# Page cache per connection. The default (2 MB) thrashes once the id indexes of a line
# outgrow it (~20k entries): inserts of random 64-hex ids then cost a read per index.
CACHE_KIB = 32 * 1024
# WAL pages before a commit also checkpoints. Checkpoints fsync the database file; at the
# default (1000 pages) a stream of single appends paid for one every ~200 commits, about
# half the wall time of each commit on a virtual disk. 10000 pages (~40 MB of WAL) makes that
# rarer; the WAL is still checkpointed and removed when the last connection closes.
WAL_AUTOCHECKPOINT_PAGES = 10_000
_OWN_KEY = "SELECT id FROM own_keys WHERE key = ?"  # a key of this node's writes (0115)


class SqliteStore:
    """One line in one SQLite file. Open with :meth:`open`; use as an async context manager."""

    def __init__(
        self, path: Path, conn: sqlite3.Connection, pool: ThreadPoolExecutor, schema: Schema
    ) -> None:
        self.path = path
        self.schema = schema  # the components whose tables it was opened with
        self._conn = conn
        self._pool = pool
        self._closed = False
        # Whoever holds the lock uses the connection: the worker for every queued operation,
        # or the event loop's thread for a short local write done in place (see _inline).
        self._lock = threading.Lock()
        self._queued = 0  # operations handed to the worker, not yet finished (loop thread)
        self.read_only = False  # opened read-only: its folder cannot be written
        self.group: WriteGroup | None = None  # writes grouped (sqlite_group.grouped)

    def _error(self, exc: sqlite3.Error) -> StoreError:
        return StoreError(store_failure(self.path, exc, read_only=self.read_only))

    # -- lifecycle -----------------------------------------------------------------

    @classmethod
    async def open(
        cls, path: str | Path, *, create: bool = True, schema: Schema | None = None
    ) -> SqliteStore:
        """Open (with ``create``, make) the line file at ``path`` with ``schema``'s tables
        (default: :func:`~lifeline.store.schema.line_schema`, every component's)."""
        wanted = schema if schema is not None else line_schema()
        target = Path(path)
        refuse_link(target)  # a line is opened to write: never through a link (decision 0132)
        if not create and not target.exists():
            raise NotFound(f"no line file at {target}; create the line with `lifeline init`")
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"sqlite:{target.name}")
        conn, read_only = await open_connection(
            target, wanted, pool, create=create, cache_kib=CACHE_KIB,
            autocheckpoint_pages=WAL_AUTOCHECKPOINT_PAGES,
        )  # fmt: skip
        store = cls(target, conn, pool, wanted)
        store.read_only = read_only
        return store

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._run(self._conn.close)
        self._pool.shutdown(wait=True)

    async def __aenter__(self) -> SqliteStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Hand ``fn(*args)`` to the worker thread, which runs it holding the connection lock."""

        def locked() -> T:
            with self._lock:
                return fn(*args)

        future = asyncio.get_running_loop().run_in_executor(self._pool, locked)
        self._queued += 1
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _future: object) -> None:
        self._queued -= 1

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await self._submit(fn, *args)
        except sqlite3.Error as exc:
            raise self._error(exc) from exc

    def _inline(self, fn: Callable[[sqlite3.Connection], T]) -> tuple[bool, T | None]:
        """Run the write transaction ``fn`` here and now, if that costs no waiting.

        A round trip to the worker thread costs as much as a one-entry write transaction
        itself (bench/history/figures-behind-the-code.md). So a short local write runs
        on the caller's thread when nothing is queued for the worker (so it overtakes no
        earlier operation), the connection is free, and SQLite's write lock is free at once
        (busy timeout 0: with another process writing, it would wait, so it goes to the
        worker instead).
        Returns ``(False, None)`` when it did not run.
        """
        if self._queued or self._closed or self.group or not self._lock.acquire(blocking=False):
            return False, None
        conn = self._conn
        try:
            if begin_at_once(conn) is not None:  # locked by another connection: queue instead
                return False, None
            return True, in_transaction(conn, fn)
        except sqlite3.Error as exc:
            raise self._error(exc) from exc
        finally:
            self._lock.release()

    async def run_short_write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` in one write transaction: in place when the line is idle (see
        :meth:`_inline`), else on the worker thread. Only for short transactions: in place,
        it holds the event loop for as long as it runs."""
        done, result = self._inline(fn)
        if done:
            return result  # type: ignore[return-value]
        return await self.run_write(fn)

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> Callable[[], T]:
        """Wrap ``fn(conn)`` in a ``BEGIN IMMEDIATE`` transaction (for extensions)."""

        def tx() -> T:
            if self.group is not None:  # a SAVEPOINT of the group's transaction
                return self.group.run(self._conn, fn)
            begin_immediate(self._conn, self.path)  # says so if it waits: a pull gaps (0151)
            return in_transaction(self._conn, fn)

        return tx

    async def run_write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` in one write transaction on the worker thread."""
        return await self._run(self.write(fn))

    async def run_read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on the worker thread (no transaction)."""
        return await self._run(fn, self._conn)

    # -- writes --------------------------------------------------------------------

    async def append(self, entry: Entry) -> bool:
        result = await self.run_short_write(lambda conn: append_tx(conn, [entry]))
        return bool(result.added)

    async def append_many(self, entries: Sequence[Entry]) -> AppendResult:
        if not entries:
            return AppendResult(())
        return await self.run_write(lambda conn: append_tx(conn, entries))

    async def append_onto_tips(
        self,
        build: Callable[[Sequence[tuple[str, str, str]]], Entry],
        *,
        thread: str | None = None,
        cap: int,
        dedup_key: str | None = None,
        within: InTransaction | None = None,
    ) -> tuple[Entry, bool]:
        """Store ``build(tips)``, with the tips read in the same write transaction.

        ``tips`` are ``(id, body, ts)``, newest first in stream order (height, ts, id
        descending), for :func:`lifeline.ledger.choose_parents` joining at most ``cap`` of
        them for a write in ``thread``; only those that could matter (``tips_for_write``).

        One thread hop for a whole local write, and no window in which another writer's
        entry could land between reading the tips and writing onto them. With ``dedup_key``
        recorded by a write of this node, nothing is built and that entry is returned (not
        new); when the built entry is already stored, the stored one is returned (not new).
        ``within(conn, [entry])`` runs in the same transaction when the entry is new.
        """

        def tx(conn: sqlite3.Connection) -> tuple[Entry, bool]:
            deferred_ids.ensure_index(conn)  # a pull deferred it: built first (0147)
            if dedup_key is not None:  # this node's own writes only (decision 0115)
                sql = f"SELECT {COLUMNS} FROM entries WHERE id IN ({_OWN_KEY})"
                row = conn.execute(sql, (dedup_key,)).fetchone()
                if row is not None:
                    return decode_or_raise(self.path, row), False
            tips = tips_for_write(conn, thread, cap)
            entry = build(tips)
            if append_tx(conn, [entry]).added:
                if within is not None:
                    within(conn, [entry])
                return entry, True
            row = conn.execute(f"SELECT {COLUMNS} FROM entries WHERE id = ?", (entry.id,))
            return decode_or_raise(self.path, row.fetchone()), False

        return await self.run_short_write(tx)

    async def append_chunks(
        self, chunks: Iterable[Sequence[Entry]], *, within: InTransaction | None = None
    ) -> AppendResult:
        """Store every chunk in ONE transaction (all or nothing), parents-first across chunks.

        ``chunks`` is iterated on the caller's thread while the worker writes the previous
        chunk, so building entries overlaps with SQLite work (see lifeline.store.pipeline).
        ``within(conn, new entries)`` runs after each chunk, in the same transaction.
        """

        def submit(fn: Callable[[sqlite3.Connection], list[AppendResult]]) -> Any:
            return self._submit(self.write(fn))

        try:
            write = append_tx if within is None else partial(append_within, within)
            results = await pipelined(submit, write, chunks)
        except sqlite3.Error as exc:
            raise self._error(exc) from exc
        added = tuple(i for r in results for i in r.added)
        lowered = tuple(dict.fromkeys(i for r in results for i in r.ts_lowered))
        return AppendResult(added, lowered)

    async def append_hooked(self, entries: Sequence[Entry], within: InTransaction) -> AppendResult:
        """``append_many`` with ``within(conn, new entries)`` in the same transaction."""
        if not entries:
            return AppendResult(())
        write = partial(append_within, within)
        if len(entries) == 1:
            return await self.run_short_write(lambda conn: write(conn, entries))
        return await self.run_write(lambda conn: write(conn, entries))

    @classmethod
    def append_in(
        cls,
        conn: sqlite3.Connection,
        entries: Sequence[Entry],
        externals: Sequence[tuple[str, str]] = (),
        *,
        received: bool = False,
    ) -> AppendResult:
        """``append_many`` inside a transaction of ``run_write`` (with other writes of the
        same batch, so they commit together): declares ``externals`` (id, line) first (see
        :func:`declare_tx`); ``received``: a peer's entries, whose dedup keys are not ours."""
        declare_tx(conn, externals)
        return append_tx(conn, entries, received=received) if entries else AppendResult(())

    async def declare_external(self, entry_id: str, line: str) -> None:
        await self.run_write(lambda conn: declare_tx(conn, [(entry_id, line)]))

    # -- reads ---------------------------------------------------------------------

    async def entry_totals(self) -> SetTotals:
        """Count and sum of tokens of every entry (sync's whole-set fingerprint): one row
        kept by every write; computed from the entries once when absent or stale."""
        found = await self.run_read(lambda conn: read_totals(conn, ENTRIES_SET, "entries"))
        if found is not None:
            return found

        def compute(conn: sqlite3.Connection) -> SetTotals:
            rows = conn.execute("SELECT id, ts FROM entries")
            return compute_totals(
                conn, ENTRIES_SET, "entries", (entry_token(i, ts) for i, ts in rows)
            )

        return await self.run_write(compute)

    async def get(self, entry_id: str) -> Entry:
        found = await self.get_many([entry_id])
        if not found and await self._row_exists(entry_id):
            raise CorruptRow(
                f"entry {entry_id[:12]} is stored in {self.path.name} but its row cannot be "
                "decoded; `lifeline verify` lists the damaged rows"
            )
        if not found:
            raise NotFound(f"no entry {entry_id[:64]!r} in {self.path.name}")
        return found[0]

    async def _row_exists(self, entry_id: str) -> bool:
        row = await self.run_read(
            lambda conn: conn.execute("SELECT 1 FROM entries WHERE id = ?", (entry_id,)).fetchone()
        )
        return row is not None

    async def get_many(self, ids: Iterable[str]) -> list[Entry]:
        wanted = list(ids)

        def read(conn: sqlite3.Connection) -> list[Entry]:
            rows = decoded_by_id(self.path, conn, wanted)
            return [rows[i] for i in wanted if i in rows]

        return await self.run_read(read)

    async def get_many_json(self, ids: Iterable[str]) -> list[bytes]:
        """``[e.to_json() for e in await get_many(ids)]``, mostly written by SQLite itself
        (lifeline/store/sqlite_json.py): what a node sends in a sync."""
        wanted = list(ids)

        def read(conn: sqlite3.Connection, waits: bool = True) -> list[bytes] | None:
            if waits and deferred_ids.pending(conn):
                return None  # each chunk would scan the table: built first (decision 0147)
            found, others = entries_json(conn, wanted)
            found.update(
                (i, e.to_json()) for i, e in decoded_by_id(self.path, conn, others).items()
            )
            return [found[i] for i in wanted if i in found]

        served = await self.run_read(read)
        if served is None:
            await self.run_write(deferred_ids.build)
            served = await self.run_read(lambda conn: read(conn, waits=False))
        return served or []

    async def resolve(self, prefix: str) -> Entry:
        prefix = prefix.strip().lower()
        if not prefix or any(c not in "0123456789abcdef" for c in prefix):
            shown = repr(prefix[:80]) + ("…" if len(prefix) > 80 else "")
            raise NotFound(f"{shown} is not an id prefix; ids are lowercase hex")
        rows = await self.run_read(
            lambda conn: conn.execute(
                "SELECT id FROM entries WHERE id >= ? AND id < ? ORDER BY id LIMIT 2",
                (prefix, prefix + "g"),
            ).fetchall()
        )
        if not rows:
            raise NotFound(f"no entry id starts with {prefix!r}; `lifeline history` lists them")
        if len(rows) > 1:
            raise AmbiguousPrefix(
                f"prefix {prefix!r} matches more than one entry; type more characters"
            )
        return await self.get(rows[0][0])

    async def contains(self, ids: Iterable[str]) -> set[str]:
        wanted = list(ids)

        def read(conn: sqlite3.Connection) -> set[str]:
            found: set[str] = set()
            for chunk in id_chunks(wanted, 500):
                marks = ",".join("?" * len(chunk))
                found.update(
                    r[0]
                    for r in conn.execute(f"SELECT id FROM entries WHERE id IN ({marks})", chunk)
                )
            return found

        return await self.run_read(read)

    async def children(self, entry_id: str) -> list[str]:
        rows = await self.run_read(
            lambda conn: conn.execute(
                "SELECT c.id FROM entries p"
                " JOIN links l ON l.parent_seq = p.seq JOIN entries c ON c.seq = l.child_seq"
                " WHERE p.id = ?1"
                " UNION SELECT c.id FROM foreign_links f JOIN entries c ON c.seq = f.child_seq"
                " WHERE f.parent_id = ?1 ORDER BY 1",
                (entry_id,),
            ).fetchall()
        )
        return [r[0] for r in rows]

    async def tips(self, limit: int | None = None) -> list[str]:
        rows = await self.run_read(
            lambda conn: conn.execute(
                "SELECT id FROM tips ORDER BY id LIMIT ?", (-1 if limit is None else limit,)
            ).fetchall()
        )
        return [r[0] for r in rows]

    async def tips_for_write(self, thread: str | None, cap: int) -> list[tuple[str, str, str]]:
        return await self.run_read(lambda conn: tips_for_write(conn, thread, cap))

    async def count(self) -> int:
        row = await self.run_read(lambda c: c.execute("SELECT count(*) FROM entries").fetchone())
        return int(row[0])

    async def by_dedup_key(self, key: str) -> Entry | None:
        row = await self.run_read(lambda conn: conn.execute(_OWN_KEY, (key,)).fetchone())
        return await self.get(row[0]) if row else None

    async def externals(self) -> dict[str, str]:
        rows = await self.run_read(lambda c: c.execute("SELECT id, line FROM externals").fetchall())
        return {r[0]: r[1] for r in rows}

    async def keys(self) -> list[tuple[int, str]]:
        rows = await self.run_read(
            lambda conn: conn.execute(
                "SELECT height, id FROM entries ORDER BY height, id"
            ).fetchall()
        )
        return [(h, i) if type(h) is int else (stored_height(i, h), i) for h, i in rows]

    async def stream(self, *, problems: list[RowProblem] | None = None) -> AsyncIterator[Entry]:
        # Keyset pagination over the (height, ts, id) index: bounded memory at any size;
        # the next page is read while the caller works through this one (sqlite_reads).
        async for rows in pages(self.run_read):
            for row in rows:
                try:
                    entry = _decode(row[1:])
                except (ValueError, TypeError) as exc:
                    problem = RowProblem(int(row[1]), str(row[2])[:64], str(exc))
                    if problems is not None:  # the caller reports them (once, not per row)
                        problems.append(problem)
                    else:
                        log.warning("skipping undecodable row %s in %s: %s", row[1], self.path, exc)
                    continue
                yield entry
