"""A line as the node syncs it: its store, notary and snapshots already matched.

The home chose where the lines live (``home.lines``: line files, or a hub's database,
decision 0060). The node turns that choice, once, into a :class:`NodeLines` opener whose
lines are of one kind: a :class:`FileLine` (a SQLite file with the notary's tables, a
snapshot cache kept between runs, its WAL trimmed after a session, its read models folded
after a large load while `serve` runs) or a :class:`HubLine`
(a line of the database, the notary's PostgreSQL twin, snapshots brought up to date from
bucket sums, a large load followed by VACUUM ANALYZE). Nothing above asks which one it has.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import TYPE_CHECKING, Protocol

from lifeline.errors import StoreError
from lifeline.lines import validate_line_name
from lifeline.store.port import Store
from lifeline.store.shallow import boundary_size
from lifeline.store.sqlite import SqliteStore
from lifeline.store.tiers import SqlLine
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.node.read_upkeep import ReadUpkeep
from lifeline_mesh.node.wal import trim_wal
from lifeline_mesh.notary.attestation_set import attestation_rows
from lifeline_mesh.notary.claims import Claims
from lifeline_mesh.notary.deferred_index import build_deferred_index
from lifeline_mesh.notary.port import Notary
from lifeline_mesh.notary.row_writes import chunks
from lifeline_mesh.notary.signers import KnownSigners
from lifeline_mesh.notary.states import IdSums
from lifeline_mesh.notary.storage import NotaryStore
from lifeline_mesh.peering.changes import ChangeFeed
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.sync.entry_set import ENTRY_ROWS, EntrySet
from lifeline_mesh.sync.port import SetSnapshots
from lifeline_mesh.sync.snapshot_cache import SnapshotCache

if TYPE_CHECKING:
    from lifeline.line_source import FileLines
    from lifeline.store.pg_lines import PgLines
    from lifeline.store.postgres import PgStore
    from lifeline_mesh.node.snapshot_reads import SnapshotReads
    from lifeline_mesh.sync.pg_snapshots import PgSnapshots

__all__ = ["FileLine", "HubLine", "NodeLine", "NodeLines", "node_lines"]


class NodeLine(Protocol):
    """One open line of the node, with the parts its sessions need."""

    name: str

    @property
    def store(self) -> Store:
        """The line's entry store."""
        ...

    def notary(
        self, signers: KnownSigners | None, clock: Callable[[], str], source: str | None
    ) -> Notary:
        """The line's attestations, checked against ``signers`` and dated by ``clock``."""
        ...

    def entries(self, codec: EntryCodec) -> EntrySet:
        """The line's entries as a reconciled set, with its snapshots."""
        ...

    def attestation_snapshots(self, notary: Notary) -> SetSnapshots | None:
        """Where the snapshots of ``notary``'s table come from (None: built from the
        notary's keys each time)."""
        ...

    def sql_tables(self, purpose: str) -> SqlLine:
        """The line file holding the entries and the notary's tables, for work done in
        its SQL (a shallow snapshot, a push, rows announced); a hub line has none: a
        one-line error naming ``purpose``."""
        ...

    async def shallow(self) -> bool:
        """Whether the line lacks older history (taken as a shallow snapshot)."""
        ...

    async def mark(self) -> int | None:
        """The line's highest row number (None: not known on this backend)."""
        ...

    async def write_mark(self) -> int:
        """The highest row number the line has committed (0 when empty): every entry
        stored later has a higher one, on either backend (rows are numbered under the
        line's write lock, in the order their writes commit)."""
        ...

    async def stored_after(self, mark: int, ids: Sequence[str]) -> list[str]:
        """Those of ``ids`` stored after :meth:`write_mark` said ``mark``."""
        ...

    async def finish(self, admitted: int, *, ok: bool = True) -> None:
        """After a session that admitted ``admitted`` entries (``ok``: it ended well):
        upkeep of the store."""
        ...

    def snapshot_reads(self) -> SnapshotReads:
        """What serving a shallow snapshot of the line reads (decisions 0063, 0081)."""
        ...


class FileLine:
    """A line file: SQLite with the notary's tables."""

    def __init__(
        self,
        name: str,
        store: SqliteStore,
        snapshots: SnapshotCache,
        id_sums: IdSums,
        claims: Claims,
        upkeep: ReadUpkeep | None = None,
    ) -> None:
        self.name, self.store, self.snapshots = name, store, snapshots
        self.id_sums, self.claims = id_sums, claims
        self.upkeep = upkeep  # while `serve` runs (decision 0103)

    def notary(
        self, signers: KnownSigners | None, clock: Callable[[], str], source: str | None
    ) -> Notary:
        notary = NotaryStore(
            self.store, signers=signers, clock=clock, source=source, claims=self.claims
        )
        notary.id_sums = self.id_sums
        notary.may_defer = True  # built again in finish() (decision 0143)
        notary.may_defer_entries = True  # the same for the entries' (decision 0147)
        return notary

    def entries(self, codec: EntryCodec) -> EntrySet:
        return EntrySet(self.store, codec, self.snapshots.of(self.store, ENTRY_ROWS))

    def attestation_snapshots(self, notary: Notary) -> SetSnapshots | None:
        return self.snapshots.of(self.store, attestation_rows(notary.table))

    def sql_tables(self, purpose: str) -> SqlLine:
        return self.store  # opened by the home with the line schema: the notary's included

    async def shallow(self) -> bool:
        return bool(await self.store.run_read(boundary_size))

    async def mark(self) -> int | None:
        sql = "SELECT max(seq) FROM entries"
        row = await self.store.run_read(lambda c: c.execute(sql).fetchone())
        return None if row is None or row[0] is None else int(row[0])

    async def write_mark(self) -> int:
        return await self.mark() or 0

    async def stored_after(self, mark: int, ids: Sequence[str]) -> list[str]:
        return await self.store.run_read(lambda conn: _stored_after(conn, mark, ids))

    async def finish(self, admitted: int, *, ok: bool = True) -> None:
        await build_deferred_index(self.store)  # a pull into an empty line (decision 0143)
        # A failed session may have grown the WAL with a transaction it never committed (a
        # disk that filled up mid-session): hand that space back now, not at the next one.
        await trim_wal(self.store, None if ok else 0)
        if self.upkeep is not None:  # a large load: its read models folded in the background
            self.upkeep.admitted(self.name, admitted)

    def snapshot_reads(self) -> SnapshotReads:
        from lifeline_mesh.node.snapshot_reads import SqliteSnapshotReads

        return SqliteSnapshotReads(self.store)


class HubLine:
    """A line of a hub's database."""

    def __init__(self, name: str, store: PgStore, snapshots: PgSnapshots, claims: Claims) -> None:
        self.name, self.store, self.snapshots, self.claims = name, store, snapshots, claims

    def notary(
        self, signers: KnownSigners | None, clock: Callable[[], str], source: str | None
    ) -> Notary:
        from lifeline_mesh.notary.pg_storage import PgNotaryStore

        return PgNotaryStore(
            self.store, signers=signers, clock=clock, source=source, claims=self.claims
        )

    def entries(self, codec: EntryCodec) -> EntrySet:
        return EntrySet(self.store, codec, self.snapshots.of(self.store))

    def attestation_snapshots(self, notary: Notary) -> SetSnapshots | None:
        from lifeline_mesh.sync.pg_snapshots import KeyedRows

        # the notary's sets: built from their keys each time, read in key order for a run
        return KeyedRows(self.store, notary.table, notary.keys)

    def sql_tables(self, purpose: str) -> SqlLine:
        raise StoreError(
            f"{purpose} works on a line file, and this node keeps line {self.name!r} in a "
            "PostgreSQL database (a hub); sync it in full instead"
        )

    async def shallow(self) -> bool:
        return False  # a hub's lines are taken in full

    async def mark(self) -> int | None:
        return None  # rows of every hub process interleave: what a peer holds is unknown

    async def write_mark(self) -> int:
        [(next_seq,)] = await self.store.fetch_line("SELECT next_seq FROM lines WHERE line_id = $1")
        return int(next_seq) - 1

    async def stored_after(self, mark: int, ids: Sequence[str]) -> list[str]:
        if await self.write_mark() <= mark:
            return []  # the usual case: nothing written since
        rows = await self.store.fetch_line(
            "SELECT id FROM entries WHERE line_id = $1 AND seq > $2 AND id = ANY($3::bytea[])",
            mark,
            [bytes.fromhex(i) for i in ids],
        )
        return [bytes(r[0]).hex() for r in rows]

    async def finish(self, admitted: int, *, ok: bool = True) -> None:
        if admitted:  # a large load: VACUUM ANALYZE, in the background
            self.store.db.maintenance.admitted(self.store.line_id, admitted)

    def snapshot_reads(self) -> SnapshotReads:
        from lifeline_mesh.node.snapshot_reads import PgSnapshotReads

        return PgSnapshotReads(self.store)


def _stored_after(conn: sqlite3.Connection, mark: int, ids: Sequence[str]) -> list[str]:
    """Of ``ids``, those of a row after ``mark``: nothing read when no row is (the usual
    case), the new rows when they are fewer than ``ids``, else the ids looked up."""
    (top,) = conn.execute("SELECT coalesce(max(seq), 0) FROM entries").fetchone()
    if top <= mark:
        return []
    wanted = set(ids)
    if top - mark <= len(wanted):
        rows = conn.execute("SELECT id FROM entries WHERE seq > ?", (mark,))
        return [i for (i,) in rows if i in wanted]
    found: list[str] = []
    for part in chunks(sorted(wanted)):
        marks = ",".join("?" * len(part))
        sql = f"SELECT id FROM entries WHERE seq > ? AND id IN ({marks})"
        found += [i for (i,) in conn.execute(sql, (mark, *part))]
    return found


class NodeLines(Protocol):
    """Opens the node's lines, all of one kind."""

    # Rows a change announces are read from line files; a hub's peers sync for them instead
    announces_rows: bool

    @property
    def snapshots(self) -> SnapshotCache | PgSnapshots:
        """The last snapshot of each set of each line, brought up to date per session."""
        ...

    def open(self, name: str) -> AbstractAsyncContextManager[NodeLine]: ...

    async def connect(self) -> None:
        """Reach the store now (a hub's database: one clear line when it is down)."""
        ...

    def writes_of_others(
        self, feed: ChangeFeed, local_change: Callable[[], None] | None
    ) -> AbstractAsyncContextManager[object]:
        """While the block runs, lines written by other processes are published to
        ``feed`` (a hub's: every process of its database; line files: the watcher's job)."""
        ...

    def keep_read_models(
        self, lines: Callable[[], Sequence[str]]
    ) -> AbstractAsyncContextManager[object]:
        """While the block runs (`serve`), a line's read models are folded after a large
        load, and ``lines()`` now and every minute when far behind (line files; a hub folds
        as it writes)."""
        ...

    def pool(self) -> dict[str, int] | None:
        """The database pool's connections (None: no database)."""
        ...

    async def close(self) -> None: ...


class _FileLines:
    announces_rows = True

    def __init__(self, home: NodeHome, files: FileLines) -> None:
        self.files = files
        # The last snapshot of each set of each line, brought up to date per session.
        self.snapshots = SnapshotCache(directory=home.snapshots_dir)
        self.id_sums: IdSums = {}  # each line's id sum, brought up to date per statement
        self.claims = Claims()  # the claims read back at admission, verified once
        self.upkeep: ReadUpkeep | None = None  # while `serve` runs

    @asynccontextmanager
    async def open(self, name: str) -> AsyncIterator[NodeLine]:
        async with self.files.open(validate_line_name(name), create=True) as store:
            await build_deferred_index(store)  # a pull that ended in a crash (decision 0143)
            yield FileLine(name, store, self.snapshots, self.id_sums, self.claims, self.upkeep)

    @asynccontextmanager
    async def keep_read_models(self, lines: Callable[[], Sequence[str]]) -> AsyncIterator[object]:
        upkeep = ReadUpkeep(lambda name: self.files.open(validate_line_name(name)))
        self.upkeep = upkeep
        upkeep.sweep(lines)
        try:
            yield upkeep
        finally:
            self.upkeep = None
            await upkeep.close()

    async def connect(self) -> None:
        return None

    def writes_of_others(
        self, feed: ChangeFeed, local_change: Callable[[], None] | None
    ) -> AbstractAsyncContextManager[object]:
        return nullcontext()  # the peering's line watcher polls the files

    def pool(self) -> dict[str, int] | None:
        return None

    async def close(self) -> None:
        return None


class _HubLines:
    announces_rows = False

    def __init__(self, lines: PgLines) -> None:
        from lifeline_mesh.sync.pg_snapshots import PgSnapshots

        self.lines = lines
        self.snapshots = PgSnapshots()  # a hub process's: up to date by bucket sums
        self.claims = Claims()  # the claims read back at admission, verified once

    @asynccontextmanager
    async def open(self, name: str) -> AsyncIterator[NodeLine]:
        from lifeline.store.postgres import DATABASE_ERRORS, session_failure

        try:
            async with self.lines.open(validate_line_name(name), create=True) as store:
                yield HubLine(name, store, self.snapshots, self.claims)
        except DATABASE_ERRORS as exc:  # the session fails with the reason; serving goes on
            raise session_failure(name, exc) from exc

    async def connect(self) -> None:
        await self.lines.database()

    @asynccontextmanager
    async def writes_of_others(
        self, feed: ChangeFeed, local_change: Callable[[], None] | None
    ) -> AsyncIterator[object]:
        from lifeline_mesh.node.hub_feed import hub_feed

        dsn = (await self.lines.database()).plain_dsn
        async with hub_feed(dsn, feed, local_change) as listener:
            yield listener

    def keep_read_models(
        self, lines: Callable[[], Sequence[str]]
    ) -> AbstractAsyncContextManager[object]:
        return nullcontext()  # a hub's truth is folded as its rows are written (decision 0077)

    def pool(self) -> dict[str, int] | None:
        db = self.lines.connected
        if db is None:
            return None
        pool = db.pool
        return {"open": pool.get_size(), "idle": pool.get_idle_size(), "max": pool.get_max_size()}

    async def close(self) -> None:
        await self.lines.close()


def node_lines(home: NodeHome) -> NodeLines:
    """The opener of ``home``'s lines, of the kind its line source holds (chosen here,
    once per node)."""
    files = home.lines.files
    if files is not None:
        return _FileLines(home, files)
    from lifeline.store.pg_lines import PgLines

    source = home.lines
    assert isinstance(source, PgLines)
    return _HubLines(source)
