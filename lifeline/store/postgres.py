"""PgStore: the store port on PostgreSQL (asyncpg), many lines in one database.

A hub's lines live in one database (lifeline/store/pg_schema.py): each :class:`PgStore` is
one line of a :class:`PgDatabase`, which owns the connection pool. Every write is one
transaction that first locks the line's ``lines`` row, so several processes (hub replicas)
may write the same line at once: they take turns, lose nothing, and row numbers stay gapless
in commit order. The line's count and token sum are kept in that row by the same
transaction, so sync's whole-set fingerprint (:meth:`PgStore.entry_totals`) reads one row and
no entry. Entries are kept as their JSON text, exactly what a sync sends
(:meth:`PgStore.get_many_json` is a plain read), and U+0000 survives in it escaped.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import asyncpg

from lifeline.entry import Entry
from lifeline.errors import AmbiguousPrefix, CorruptRow, InvalidEntry, NotFound, StoreError
from lifeline.store.line_write import LineWrite
from lifeline.store.order import newest_first
from lifeline.store.pg_dsn import connect_options, is_postgres_url
from lifeline.store.pg_maintain import LoadStep, Maintenance
from lifeline.store.pg_schema import LEDGER, Conn, Migrations, apply_pg_migrations, line_id_of
from lifeline.store.pg_writes import (
    AppendHook,
    append_locked,
    declare_locked,
    dedup_forms,
    id_bytes,
    ids_bytes,
)
from lifeline.store.port import AppendResult, RowProblem
from lifeline.store.summary import SetTotals

__all__ = [
    "DATABASE_ERRORS",
    "TIMEOUTS",
    "PgDatabase",
    "PgStore",
    "is_postgres_url",
    "session_failure",
]

log = logging.getLogger(__name__)
PAGE = 2000  # rows per keyset page of stream()
# What a lost or failing database raises through asyncpg.
DATABASE_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError)


# Bounds on a slow or blocked database (docs/hub.md, "Faults and timeouts"), set on every
# pooled connection unless the URL sets them (``…/db?lock_timeout=30s``): a session waiting
# longer than this for a line's writer lock, or for one statement, fails with the reason
# and writes nothing; a transaction left idle (a hub process cut off mid-session) is ended
# by the server so it cannot hold a line's lock for ever.
TIMEOUTS = {
    "lock_timeout": "10s",
    "statement_timeout": "60s",
    "idle_in_transaction_session_timeout": "60s",
}


COMMAND_TIMEOUT_S = 120.0  # the client's bound on any one query (a stalled network)


def _settings(dsn: str) -> dict[str, str]:
    """:data:`TIMEOUTS`, less those the URL's query sets itself."""
    given = set(parse_qs(urlsplit(dsn).query))
    return {name: value for name, value in TIMEOUTS.items() if name not in given}


def client_options(dsn: str) -> tuple[str, float]:
    """The URL without ``command_timeout`` (seconds, this client's own bound on a query,
    which is no server setting), and that bound."""
    parts = urlsplit(dsn)
    query = parse_qs(parts.query, keep_blank_values=True)
    given = query.pop("command_timeout", None)
    if not given:
        return dsn, COMMAND_TIMEOUT_S
    try:
        seconds = float(given[-1])
    except ValueError:
        raise StoreError(
            f"command_timeout={given[-1]!r} in the database URL is not a number of seconds"
        ) from None
    plain = parts._replace(query=urlencode(query, doseq=True)).geturl()
    return plain, seconds


def session_failure(line: str, exc: BaseException) -> StoreError:
    """A session's database failure as one line saying what happened and what follows."""
    if isinstance(exc, asyncpg.LockNotAvailableError):
        what = (
            "waited too long for the line's writer lock (lock_timeout): another session or "
            "hub process holds it, or the database is slow"
        )
    elif isinstance(exc, asyncpg.QueryCanceledError):
        what = f"a statement took too long (statement_timeout): the database is slow ({exc})"
    elif isinstance(exc, TimeoutError):
        what = "the database did not answer in time (command_timeout): it or the network is slow"
    else:
        what = f"the database failed during the session ({type(exc).__name__}: {exc})"
    return StoreError(f"line {line}: {what}; nothing half-written, the next session tries again")


def _pg_error(dsn: str, exc: BaseException) -> StoreError:
    shown = dsn.split("@")[-1] if "@" in dsn else dsn
    if isinstance(exc, TimeoutError):
        return StoreError(
            f"the PostgreSQL database {shown} did not answer in time (command_timeout): the "
            "database or the network to it is slow; nothing was written, try again"
        )
    return StoreError(
        f"cannot use the PostgreSQL database {shown} ({type(exc).__name__}: {exc}); "
        "check that the server runs and the URL, user and password are right"
    )


class PgDatabase:
    """One PostgreSQL database holding many lines; owns the pool and the schema."""

    def __init__(self, dsn: str, pool: asyncpg.Pool) -> None:
        self.dsn = dsn
        self.plain_dsn = client_options(dsn)[0]  # what asyncpg is given (the listener too)
        self.pool = pool
        self.maintenance = Maintenance(pool)  # VACUUM ANALYZE after a large load
        self.components: frozenset[str] = frozenset({"ledger"})  # whose tables it holds
        self.after_append: tuple[AppendHook, ...] = ()  # run in every append's transaction
        self._closed = False

    @classmethod
    async def connect(
        cls,
        dsn: str,
        *,
        migrations: Migrations | None = None,
        after_append: Sequence[AppendHook] = (),
        after_load: Sequence[LoadStep] = (),
        min_size: int = 1,
        max_size: int = 8,
        timeout: float = 10.0,
    ) -> PgDatabase:
        """Connect and bring the schema (the ledger's, plus ``migrations``) up to date;
        ``after_append`` run inside every append's transaction (the components' hooks),
        ``after_load`` in the background after a large load (:mod:`~lifeline.store.pg_maintain`)."""
        plain, command_timeout = client_options(dsn)
        plain, options = connect_options(plain)  # e.g. ?statement_cache_size=0 (pg_dsn.py)
        try:
            pool = await asyncpg.create_pool(
                plain,
                min_size=min_size,
                max_size=max_size,
                timeout=timeout,
                command_timeout=command_timeout,
                server_settings=_settings(plain),
                **options,
            )
        except DATABASE_ERRORS as exc:
            raise _pg_error(dsn, exc) from exc
        db = cls(dsn, pool)
        db.after_append = tuple(after_append)
        db.maintenance.steps = tuple(after_load)
        try:
            await db.migrate(migrations or {})
        except BaseException:
            await pool.close()
            raise
        return db

    async def migrate(self, migrations: Migrations) -> None:
        """Apply the ledger's schema and ``migrations`` (another tier's tables)."""
        try:
            async with self.pool.acquire() as conn:
                await apply_pg_migrations(conn, {**LEDGER, **migrations})
        except DATABASE_ERRORS as exc:
            raise _pg_error(self.dsn, exc) from exc
        self.components = self.components | set(migrations)

    async def line(self, name: str, *, create: bool = True) -> PgStore:
        """The store of line ``name`` (made, with its partition, when new and ``create``)."""
        try:
            async with self.pool.acquire() as conn:
                line_id = await line_id_of(conn, name, create=create)
        except DATABASE_ERRORS as exc:
            raise _pg_error(self.dsn, exc) from exc
        if line_id is None:
            raise NotFound(f"no line {name!r} in {self.dsn.split('@')[-1]}")
        return PgStore(self, name, line_id)

    async def lines(self) -> list[str]:
        async with self.pool.acquire() as conn:
            return [r[0] for r in await conn.fetch("SELECT name FROM lines ORDER BY name")]

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self.maintenance.close()
            await self.pool.close()


_TIPS = (
    "SELECT t.id, {body}, e.height, e.ts FROM tips t"
    " JOIN entries e ON e.line_id = t.line_id AND e.id = t.id WHERE t.line_id = $1"
)
_NEWEST_TIPS = (
    _TIPS.format(body="''::text") + " ORDER BY e.height DESC, e.ts DESC, e.id DESC LIMIT $2"
)
_NAMING = _TIPS.format(body="e.doc::json->>'body'") + " AND strpos(e.doc::json->>'body', $2) > 0"


class PgStore:
    """One line of a :class:`PgDatabase`. Open with :meth:`open`, or ``db.line(name)``."""

    def __init__(self, db: PgDatabase, name: str, line_id: int, *, owns_db: bool = False):
        self.db = db
        self.name = name
        self.line_id = line_id
        self._owns_db = owns_db

    @classmethod
    async def open(cls, dsn: str, line: str, *, create: bool = True) -> PgStore:
        """A line in its own pool (closing the store closes the pool)."""
        db = await PgDatabase.connect(dsn)
        try:
            store = await db.line(line, create=create)
        except BaseException:
            await db.close()
            raise
        store._owns_db = True
        return store

    @property
    def components(self) -> frozenset[str]:
        """The components whose tables the line's database holds (``truth``, ``notary``)."""
        return self.db.components

    async def close(self) -> None:
        if self._owns_db:
            await self.db.close()

    async def __aenter__(self) -> PgStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        async with self.db.pool.acquire() as conn:
            return await conn.fetch(sql, self.line_id, *args)

    async def fetch_line(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        """Rows of ``sql``, whose ``$1`` is this line's number (for other tiers' tables)."""
        return await self._fetch(sql, *args)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Conn]:
        """A connection in one transaction (committed on success, rolled back on error),
        for a component that writes its tables and this line's together; it takes the
        line's lock first (``lifeline.store.pg_writes.lock_line``)."""
        try:
            async with self.db.pool.acquire() as conn, conn.transaction():
                yield conn
        except DATABASE_ERRORS as exc:  # the reason reaches the peer (the session's Abort)
            raise session_failure(self.name, exc) from exc

    @asynccontextmanager
    async def read_view(self) -> AsyncIterator[Conn]:
        """A connection in one read-only REPEATABLE READ transaction: every read sees the
        same committed state (the line's totals, buckets and rows agree)."""
        async with (
            self.db.pool.acquire() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            yield conn

    # -- writes --------------------------------------------------------------------

    async def append(self, entry: Entry) -> bool:
        return bool((await self.append_many([entry])).added)

    async def append_many(self, entries: Sequence[Entry]) -> AppendResult:
        async with self.transaction() as conn:
            return await append_locked(conn, self.line_id, entries, self.db.after_append)

    async def append_hooked(
        self,
        entries: Sequence[Entry],
        within: Callable[[LineWrite, Sequence[Entry]], Awaitable[None] | None],
    ) -> AppendResult:
        """``append_many`` with ``within(LineWrite, new entries)`` awaited in the same
        transaction: a local write's author signature commits with its entry."""
        async with self.transaction() as conn:
            result = await append_locked(conn, self.line_id, entries, self.db.after_append)
            added = set(result.added)
            new = [e for e in entries if e.id in added]
            if new:
                pending = within(LineWrite(conn, self.line_id), new)
                if pending is not None:
                    await pending
            return result

    async def declare_external(self, entry_id: str, line: str) -> None:
        async with self.transaction() as conn:
            await declare_locked(conn, self.line_id, [(entry_id, line)])

    # -- reads ---------------------------------------------------------------------

    async def entry_totals(self) -> SetTotals:
        """Count and token sum of the whole line: its ``lines`` row, no entry read."""
        row = (await self._fetch("SELECT n, token_sum FROM lines WHERE line_id = $1"))[0]
        return SetTotals(int(row[0]), int.from_bytes(row[1], "little"))

    async def change_token(self) -> Hashable:
        """What the line's entries are, in one row read: its ``lines`` row, which every
        write by any process updates in its transaction (lifeline/store/change.py)."""
        row = (
            await self._fetch(
                "SELECT version, next_seq, n, token_sum FROM lines WHERE line_id = $1"
            )
        )[0]
        return (self.line_id, int(row[0]), int(row[1]), int(row[2]), bytes(row[3]))

    async def id_totals(self) -> tuple[int, int]:
        """``(count, sum of ids mod 2^256)``: the notary's state fingerprint, one row."""
        row = (await self._fetch("SELECT n, id_sum FROM lines WHERE line_id = $1"))[0]
        return int(row[0]), int.from_bytes(row[1], "big")

    async def get(self, entry_id: str) -> Entry:
        docs = await self._docs([entry_id])
        if entry_id not in docs:
            raise NotFound(f"no entry {entry_id[:64]!r} in line {self.name}")
        try:
            return Entry.from_json(docs[entry_id], check=False)
        except InvalidEntry as exc:
            raise CorruptRow(
                f"entry {entry_id[:12]} is stored in line {self.name} but its row cannot be "
                f"decoded ({exc}); `lifeline verify` lists the damaged rows"
            ) from exc

    async def _docs(self, ids: list[str]) -> dict[str, str]:
        wanted = ids_bytes(ids)
        rows = await self._fetch(
            "SELECT id, doc FROM entries WHERE line_id = $1 AND id = ANY($2::bytea[])", wanted
        )
        return {bytes(r[0]).hex(): r[1] for r in rows}

    async def get_many(self, ids: Iterable[str]) -> list[Entry]:
        """The stored entries among ``ids``; damaged rows are skipped (with a log line), as
        on SQLite: ``get`` names them, ``lifeline verify`` lists them."""
        wanted = list(ids)
        docs = await self._docs(wanted)
        found = (self._decoded(docs[i], i) for i in wanted if i in docs)
        return [e for e in found if e is not None]

    def _decoded(self, doc: str, where: object) -> Entry | None:
        try:
            return Entry.from_json(doc, check=False)
        except InvalidEntry as exc:
            log.debug("skipping undecodable row %s of %s: %s", where, self.name, exc)
            return None

    async def get_many_json(self, ids: Iterable[str]) -> list[bytes]:
        """What a sync sends: the stored JSON of the entries among ``ids``, in that order."""
        wanted = list(ids)
        docs = await self._docs(wanted)
        return [docs[i].encode() for i in wanted if i in docs]

    async def resolve(self, prefix: str) -> Entry:
        prefix = prefix.strip().lower()
        if not prefix or len(prefix) > 64 or any(c not in "0123456789abcdef" for c in prefix):
            shown = repr(prefix[:80]) + ("…" if len(prefix) > 80 else "")
            raise NotFound(f"{shown} is not an id prefix; ids are lowercase hex")
        lo = bytes.fromhex(prefix.ljust(64, "0"))
        hi = bytes.fromhex(prefix.ljust(64, "f"))
        rows = await self._fetch(
            "SELECT id FROM entries WHERE line_id = $1 AND id BETWEEN $2 AND $3"
            " ORDER BY id LIMIT 2",
            lo,
            hi,
        )
        if not rows:
            raise NotFound(f"no entry id starts with {prefix!r}; `lifeline history` lists them")
        if len(rows) > 1:
            raise AmbiguousPrefix(
                f"prefix {prefix!r} matches more than one entry; type more characters"
            )
        return await self.get(bytes(rows[0][0]).hex())

    async def contains(self, ids: Iterable[str]) -> set[str]:
        wanted = ids_bytes(ids)
        rows = await self._fetch(
            "SELECT id FROM entries WHERE line_id = $1 AND id = ANY($2::bytea[])", wanted
        )
        return {bytes(r[0]).hex() for r in rows}

    async def children(self, entry_id: str) -> list[str]:
        raw = _maybe_id(entry_id)
        if raw is None:
            return []
        rows = await self._fetch(
            "SELECT child FROM links WHERE line_id = $1 AND parent = $2 ORDER BY child", raw
        )
        return [bytes(r[0]).hex() for r in rows]

    async def tips(self, limit: int | None = None) -> list[str]:
        rows = await self._fetch(
            "SELECT id FROM tips WHERE line_id = $1 ORDER BY id LIMIT $2", limit
        )
        return [bytes(r[0]).hex() for r in rows]

    async def tips_for_write(self, thread: str | None, cap: int) -> list[tuple[str, str, str]]:
        """The tips a local write could join (lifeline/store/sqlite_reads.py's
        ``tips_for_write``), not every key of the line."""
        rows: list[Sequence[Any]] = [tuple(r) for r in await self._fetch(_NEWEST_TIPS, cap + 1)]
        if thread is not None and len(rows) > cap:
            rows = newest_first(rows, [tuple(r) for r in await self._fetch(_NAMING, thread)])
        return [(bytes(r[0]).hex(), r[1], r[3]) for r in rows]

    async def count(self) -> int:
        return (await self.entry_totals()).count

    async def by_dedup_key(self, key: str) -> Entry | None:
        rows = await self._fetch(  # this node's own writes only (decision 0115)
            "SELECT e.doc FROM own_keys k JOIN entries e ON e.line_id = k.line_id AND e.id = k.id"
            " WHERE k.line_id = $1 AND k.key = ANY($2::bytea[]) ORDER BY e.seq LIMIT 1",
            list(dedup_forms(key)),
        )
        return self._decoded(rows[0][0], key) if rows else None

    async def externals(self) -> dict[str, str]:
        rows = await self._fetch("SELECT id, line FROM externals WHERE line_id = $1")
        return {bytes(r[0]).hex(): r[1] for r in rows}

    async def rows_after(self, seq: int, limit: int) -> tuple[int, list[Entry]]:
        """The entries of at most ``limit`` rows past ``seq``, in row order (each entry's
        parents before it: a row is stored only once its parents are), and the last row
        number read (``seq`` when there is none). A damaged row is left out, logged, and
        read past."""
        rows = await self._fetch(
            "SELECT seq, doc FROM entries WHERE line_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
            seq,
            limit,
        )
        decoded = (self._decoded(doc, n) for n, doc in rows)
        return (int(rows[-1][0]) if rows else seq), [e for e in decoded if e is not None]

    async def keys(self) -> list[tuple[int, str]]:
        rows = await self._fetch(
            "SELECT height, id FROM entries WHERE line_id = $1 ORDER BY height, id"
        )
        return [(int(h), bytes(i).hex()) for h, i in rows]

    async def snapshot_rows(self) -> list[tuple[int, bytes, bytes]]:
        """``(height, id, token)`` of every entry in key order: a sync snapshot's input,
        with each token as the database computed it (``sha256(id ‖ 0 ‖ ts)``)."""
        rows = await self._fetch(
            "SELECT height, id, token FROM entries WHERE line_id = $1 ORDER BY height, id"
        )
        return [(int(h), bytes(i), bytes(t)) for h, i, t in rows]

    async def stream(self, *, problems: list[RowProblem] | None = None) -> AsyncIterator[Entry]:
        # Keyset pages over the (line_id, height, ts, id) index: bounded memory at any size.
        after: tuple[int, str, bytes] = (-1, "", b"")
        while True:
            rows = await self._fetch(
                "SELECT height, ts, id, seq, doc FROM entries WHERE line_id = $1"
                " AND (height, ts, id) > ($2, $3, $4) ORDER BY height, ts, id LIMIT $5",
                *after,
                PAGE,
            )
            for _height, _ts, raw, seq, doc in rows:
                try:
                    entry = Entry.from_json(doc, check=False)
                except InvalidEntry as exc:
                    problem = RowProblem(int(seq), bytes(raw).hex(), str(exc))
                    if problems is not None:
                        problems.append(problem)
                    else:
                        log.warning("skipping undecodable row %s of %s: %s", seq, self.name, exc)
                    continue
                yield entry
            if len(rows) < PAGE:
                return
            last = rows[-1]
            after = (int(last[0]), last[1], bytes(last[2]))


def _maybe_id(entry_id: str) -> bytes | None:
    try:
        return id_bytes(entry_id)
    except InvalidEntry:
        return None
