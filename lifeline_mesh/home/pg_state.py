"""A hub's identity and membership documents in its PostgreSQL database (decision 0032).

The :class:`~lifeline_mesh.home.mesh_state.MeshState` port on one table, ``node_state``
(``name`` → ``data``, ``version``): the node key, the CA key and certificate, the members
registry, revocations, invites and CI credentials, the MCP token book. Every hub process on
the database reads the same rows, so they are one node: one node id, one signing key, an
invite issued through one redeemed through another, a revocation or token revocation made
through one enforced by all.

The membership code is synchronous (it runs inside gRPC handlers, CLI commands and the MCP
middleware alike), the driver is not: one daemon thread per database runs an event loop with
one connection, and each call waits for its result (:data:`CALL_TIMEOUT` at most; a lost
connection is made again on the next call). Reads are cached for :data:`TTL` seconds, so a
change made through another process applies here within that time — to every session that
starts after it. :meth:`PgState.exclusive` is one transaction holding a transaction-scoped
advisory lock: the read-modify-writes of every process take turns, their writes commit
together or not at all, and a transaction-mode pooler (which breaks session locks) is fine.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
import time
from collections.abc import Coroutine, Iterator
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager, suppress
from typing import Any, ClassVar, TypeVar

import asyncpg

from lifeline.errors import StoreError
from lifeline.store.pg_dsn import connect_options
from lifeline.store.postgres import DATABASE_ERRORS

__all__ = ["CALL_TIMEOUT", "TTL", "PgState", "shown_url"]

T = TypeVar("T")
TTL = 2.0  # seconds a read document is reused before it is read again
CALL_TIMEOUT = 15.0
LOCK_KEY = 0x6C6D_6E73  # 'lmns': the advisory lock of the membership documents

SCHEMA = """
CREATE TABLE IF NOT EXISTS node_state (
    name text COLLATE "C" PRIMARY KEY,
    data bytea NOT NULL,
    version bigint NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now()
)
"""


def shown_url(url: str) -> str:
    """The URL without its user and password, for messages."""
    return url.split("@")[-1] if "@" in url else url


class PgState:
    """The documents of the hub node kept in database ``url``. One per URL per process:
    :meth:`for_url`."""

    _instances: ClassVar[dict[str, PgState]] = {}
    _made: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def for_url(cls, url: str) -> PgState:
        with cls._made:
            state = cls._instances.get(url)
            if state is None:
                state = cls._instances[url] = cls(url)
            return state

    def __init__(self, url: str, *, ttl: float = TTL) -> None:
        self.url = url
        self.ttl = ttl
        self._dsn, self._options = connect_options(url)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="hub-state", daemon=True
        )
        self._thread.start()
        self._conn: asyncpg.Connection | None = None
        self._cache: dict[str, tuple[float, int, bytes | None]] = {}
        self._mutex = threading.Lock()  # one exclusive() at a time in this process
        self._holder: int | None = None  # the thread inside exclusive()
        self._tx: Any = None
        self._turn = asyncio.Lock()
        atexit.register(self.close)

    # -- the bridge --------------------------------------------------------------------

    async def _serial(self, coro: Coroutine[Any, Any, T]) -> T:
        async with self._turn:  # one query at a time on the connection
            return await coro

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(self._serial(coro), self._loop)
        try:
            return future.result(CALL_TIMEOUT)
        except FutureTimeout as exc:
            future.cancel()
            raise StoreError(
                f"the hub database {shown_url(self.url)} did not answer within "
                f"{CALL_TIMEOUT:.0f} s (reading the node's identity or membership)"
            ) from exc
        except DATABASE_ERRORS as exc:
            raise StoreError(
                f"cannot use the PostgreSQL database {shown_url(self.url)} for the node's "
                f"identity and membership ({type(exc).__name__}: {exc}); check that the server "
                "runs and the URL, user and password are right"
            ) from exc

    async def _connection(self) -> asyncpg.Connection:
        current = self._conn
        if current is not None and not current.is_closed():
            return current
        if self._tx is not None:
            raise StoreError(f"lost the hub database {shown_url(self.url)} during an update")
        conn: asyncpg.Connection = await asyncpg.connect(self._dsn, timeout=10.0, **self._options)
        try:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", LOCK_KEY)
                await conn.execute(SCHEMA)
        except BaseException:
            await conn.close()
            raise
        self._conn = conn
        return conn

    async def _fetch(self, name: str) -> tuple[int, bytes | None]:
        conn = await self._connection()
        row = await conn.fetchrow("SELECT version, data FROM node_state WHERE name = $1", name)
        return (0, None) if row is None else (int(row[0]), bytes(row[1]))

    async def _put(self, name: str, data: bytes, *, only_new: bool) -> bool:
        conn = await self._connection()
        if only_new:
            done = await conn.fetchval(
                "INSERT INTO node_state (name, data) VALUES ($1, $2) "
                "ON CONFLICT (name) DO NOTHING RETURNING 1",
                name,
                data,
            )
            return done is not None
        await conn.execute(
            "INSERT INTO node_state (name, data) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE "
            "SET data = EXCLUDED.data, version = node_state.version + 1, updated_at = now()",
            name,
            data,
        )
        return True

    async def _begin(self) -> None:
        conn = await self._connection()
        tx = conn.transaction()
        await tx.start()
        self._tx = tx
        try:
            await conn.execute("SELECT pg_advisory_xact_lock($1)", LOCK_KEY)
        except BaseException:
            self._tx = None
            await tx.rollback()
            raise

    async def _end(self, commit: bool) -> None:
        tx, self._tx = self._tx, None
        if tx is not None:
            await (tx.commit() if commit else tx.rollback())

    async def _names(self) -> list[str]:
        conn = await self._connection()
        return [r[0] for r in await conn.fetch("SELECT name FROM node_state ORDER BY name")]

    async def _close(self) -> None:
        if self._conn is not None and not self._conn.is_closed():
            await self._conn.close()

    def close(self) -> None:
        if self._loop.is_running():
            with suppress(StoreError):
                self._call(self._close())
            self._loop.call_soon_threadsafe(self._loop.stop)

    # -- the port ----------------------------------------------------------------------

    def where(self, name: str) -> str:
        return f"{name} in the hub database {shown_url(self.url)}"

    def _fresh(self, name: str) -> tuple[int, bytes | None]:
        inside = self._holder == threading.get_ident()
        cached = self._cache.get(name)
        if not inside and cached is not None and time.monotonic() - cached[0] < self.ttl:
            return cached[1], cached[2]
        version, data = self._call(self._fetch(name))
        if not inside:
            self._cache[name] = (time.monotonic(), version, data)
        return version, data

    def read(self, name: str) -> bytes | None:
        return self._fresh(name)[1]

    def stamp(self, name: str) -> int:
        return self._fresh(name)[0]

    def write(self, name: str, data: bytes) -> None:
        self._cache.pop(name, None)
        self._call(self._put(name, data, only_new=False))

    def create(self, name: str, data: bytes) -> bool:
        self._cache.pop(name, None)
        return self._call(self._put(name, data, only_new=True))

    def names(self) -> list[str]:
        """The documents the database holds."""
        return self._call(self._names())

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._mutex:
            self._call(self._begin())
            self._holder = threading.get_ident()
            ok = False
            try:
                yield
                ok = True
            finally:
                self._holder = None
                self._cache.clear()
                self._call(self._end(ok))
