"""The lines of a hub: one PostgreSQL database (:class:`PgLines`, a line source).

A hub process root (``.lifeline/mesh/hub.json``) keeps its lines here, not in line files,
so every command run on that root — ``lifeline context``, MCP, the viewer, ``verify`` —
reads and writes the lines every hub process on the database serves (docs/hub.md,
decision 0060). One pool per event loop: a pool belongs to the loop that made it, and a
command may run more than one loop in its life (the CLI's ``asyncio.run`` per step).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Hashable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from lifeline.lines import validate_line_name
from lifeline.store.port import Store

if TYPE_CHECKING:
    from lifeline.line_source import FileLines
    from lifeline.store.pg_maintain import LoadStep
    from lifeline.store.pg_schema import Migrations
    from lifeline.store.pg_writes import AppendHook
    from lifeline.store.postgres import PgDatabase, PgStore

__all__ = ["PgLines", "pg_append_hooks", "pg_components", "pg_load_steps"]


class PgLines:
    """Every line of the database ``url``."""

    def __init__(self, url: str) -> None:
        self.url: str | None = url
        self.dsn = url
        self._db: PgDatabase | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def where(self, name: str) -> str:
        return f"line {name!r} of {self.dsn.split('@')[-1]}"

    @property
    def connected(self) -> PgDatabase | None:
        """The database, when connected (None before first use)."""
        return self._db

    async def database(self) -> PgDatabase:
        """The database of this event loop (connected, its schema up to date, on first use)."""
        from lifeline.store.postgres import PgDatabase

        loop = asyncio.get_running_loop()
        if self._db is None or self._loop is not loop:
            self._db = await PgDatabase.connect(
                self.dsn,
                migrations=pg_components(),
                after_append=pg_append_hooks(),
                after_load=pg_load_steps(),
            )
            self._loop = loop
        return self._db

    @asynccontextmanager
    async def open(self, name: str, *, create: bool = False) -> AsyncIterator[PgStore]:
        db = await self.database()
        yield await db.line(validate_line_name(name), create=create)

    async def open_kept(self, name: str) -> PgStore:
        """The line's store; its ``close()`` leaves the pool to this source."""
        return await (await self.database()).line(validate_line_name(name), create=False)

    @property
    def files(self) -> FileLines | None:
        return None  # a database's lines: no file to work in

    async def require_intact(self, store: Store, name: str) -> None:
        return None  # the database server keeps its own pages intact

    def change_watch(self, name: str) -> PgChangeWatch:
        return PgChangeWatch(self, validate_line_name(name))

    def names(self) -> list[str]:
        """The lines of the database (a query on a thread of its own: callers may be inside
        or outside an event loop)."""

        async def query() -> list[str]:
            from lifeline.store.postgres import PgDatabase

            db = await PgDatabase.connect(self.dsn, min_size=1, max_size=1)
            try:
                return await db.lines()
            finally:
                await db.close()

        return list(_on_thread(lambda: asyncio.run(query())))

    async def close(self) -> None:
        db, self._db = self._db, None
        if db is not None and self._loop is asyncio.get_running_loop():
            await db.close()


def pg_components() -> Migrations:
    """The tables every installed component keeps beside a hub's lines (entry-point group
    ``lifeline.pg_schema``, as ``lifeline.schema`` for line files): the notary's, the
    truth tables'."""
    from importlib.metadata import entry_points

    found: Migrations = {}
    for point in sorted(entry_points(group="lifeline.pg_schema"), key=lambda p: p.name):
        found.update(point.load())
    return found


def pg_append_hooks() -> list[AppendHook]:
    """What installed components do inside every append's transaction (entry-point group
    ``lifeline.pg_append``): the truth tables' fold (decision 0077)."""
    from importlib.metadata import entry_points

    return [
        p.load() for p in sorted(entry_points(group="lifeline.pg_append"), key=lambda p: p.name)
    ]


def pg_load_steps() -> list[LoadStep]:
    """What installed components do after a large load, in the background (entry-point
    group ``lifeline.pg_after_load``): recall's index built and the truth tables folded
    past what was loaded (decision 0109)."""
    from importlib.metadata import entry_points

    return [
        p.load() for p in sorted(entry_points(group="lifeline.pg_after_load"), key=lambda p: p.name)
    ]


def _on_thread(fn: Callable[[], Any]) -> Any:
    result: list[Any] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(fn())
        except BaseException as exc:  # handed to the caller below
            failure.append(exc)

    worker = threading.Thread(target=run, name="hub-lines")
    worker.start()
    worker.join()
    if failure:
        raise failure[0]
    return result[0]


class PgChangeWatch:
    """A database line's change token: its ``lines`` row (:meth:`PgStore.change_token`),
    which every write by any process updates in its transaction."""

    def __init__(self, lines: PgLines, name: str) -> None:
        self._lines = lines
        self._name = name
        self._store: PgStore | None = None  # the line in the source's current database

    async def token(self) -> Hashable | None:
        db = await self._lines.database()
        if self._store is None or self._store.db is not db:  # one row read a call, not two
            self._store = await db.line(self._name, create=False)
        return await self._store.change_token()

    def close(self) -> None:
        return None  # the pool belongs to the line source
