"""The truth tables' part of ``verify`` over a store: checked against the entries, rebuilt
from them when they differ (issue 32; the checks are :mod:`lifeline.truth.check`).

The derived state is a cache, never evidence: rebuilding it from the entries loses
nothing, and afterwards ``context`` (CLI, MCP, hooks, the viewer) reads what the entries
say. ``verify`` still exits non-zero: an edited table means someone wrote into the file.

The same audit on either database: the tables' reads are a :class:`TruthTables`, of a line
file (:class:`SqliteTables`, below) or of a hub's line (:class:`~lifeline.truth.pg_check.
PgTables`, decision 0077); the derivation and the judging are :mod:`lifeline.truth.check`'s.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any, Protocol

from lifeline.errors import LifelineError
from lifeline.store.backend import on_backend
from lifeline.store.port import Store
from lifeline.store.tiers import SqlLine
from lifeline.truth.check import (
    RowCheck,
    Stored,
    TruthFinding,
    extra_rows,
    judge,
    read_stored,
    scan,
)
from lifeline.truth.table import rebuild

if TYPE_CHECKING:
    from lifeline.store.postgres import PgStore
    from lifeline.store.sqlite import SqliteStore

__all__ = ["REBUILT", "SqliteTables", "TruthAudit", "TruthTables"]

REBUILT = "truth-rebuilt"


class TruthTables(Protocol):
    """The reads and the rebuild the audit needs of one line's truth tables."""

    read_only: bool
    errors: tuple[type[BaseException], ...]  # what a failed rebuild raises

    async def read_stored(self) -> Stored | None: ...

    async def entries_after(self, mark: int) -> set[str]: ...

    async def flush(self, check: RowCheck) -> None: ...

    async def scan(self, mark: int) -> tuple[Any, ...]: ...

    async def extra_rows(self, table: str, mark: int) -> list[TruthFinding]: ...

    async def rebuild(self) -> None: ...


class SqliteTables:
    """The truth tables of a line file."""

    errors: tuple[type[BaseException], ...] = (sqlite3.Error, LifelineError)

    def __init__(self, store: SqlLine) -> None:
        self.store = store
        self.read_only = store.read_only

    async def read_stored(self) -> Stored | None:
        return await self.store.run_read(read_stored)

    async def entries_after(self, mark: int) -> set[str]:
        def read(conn: sqlite3.Connection) -> set[str]:
            sql = "SELECT id FROM entries WHERE seq > ?"
            return {str(r[0]) for r in conn.execute(sql, (mark,))}

        return await self.store.run_read(read)

    async def flush(self, check: RowCheck) -> None:
        await self.store.run_read(check.flush)

    async def scan(self, mark: int) -> tuple[Any, ...]:
        return await self.store.run_read(lambda conn: scan(conn, mark))

    async def extra_rows(self, table: str, mark: int) -> list[TruthFinding]:
        return await self.store.run_read(lambda conn: extra_rows(conn, table, mark))

    async def rebuild(self) -> None:
        await self.store.run_write(rebuild)


class _TablesOf:
    """The truth tables a line keeps, per backend (None: it keeps none)."""

    def sqlite(self, store: SqliteStore) -> TruthTables | None:
        return SqliteTables(store) if "truth" in store.schema else None

    def postgres(self, store: PgStore) -> TruthTables | None:
        from lifeline.truth.pg_check import PgTables

        return PgTables(store) if "truth" in store.components else None

    def plain(self, store: Store) -> TruthTables | None:
        return None


_TABLES = _TablesOf()


def tables_for(store: Store) -> TruthTables | None:
    """The truth tables ``store`` keeps, on either database; None without them."""
    return on_backend(store, _TABLES)


class TruthAudit:
    """The tables as ``verify`` found them (:meth:`start`), then judged (:meth:`finish`)."""

    def __init__(self, tables: TruthTables, stored: Stored) -> None:
        self.tables, self.stored = tables, stored

    @classmethod
    async def start(cls, store: Store) -> TruthAudit | None:
        """None when the line keeps no truth tables, or none folded yet."""
        tables = tables_for(store)
        if tables is None:
            return None
        stored = await tables.read_stored()
        return None if stored is None else cls(tables, stored)

    @property
    def mark(self) -> int | None:
        """The highest row the tables cover (None: they do not read, nothing to fold)."""
        return self.stored.mark if self.stored.mark >= 0 else None

    async def entries_after(self) -> set[str]:
        """The ids of the rows past the mark (rows the tables do not cover yet)."""
        mark = self.mark
        return await self.tables.entries_after(mark if mark is not None else 0)

    async def flush(self, check: RowCheck) -> None:
        """Compare what ``check`` derived so far, on the store's reader."""
        await self.tables.flush(check)

    async def finish(
        self, results: list[tuple[Any, ...]] | None, *, rebuild_tables: bool = True
    ) -> list[TruthFinding]:
        """The findings, given each range's check (None: scan the line here); when there
        are any, the tables rebuilt (``rebuild_tables``) and a last finding saying so."""
        mark = self.mark
        if mark is None:
            found = list(self.stored.findings)
        else:
            if results is None:
                results = [await self.tables.scan(mark)]
            found, over = judge(self.stored, results)
            for table in over:
                found += await self.tables.extra_rows(table, mark)
        if not found:
            return []
        return [*sorted(set(found)), await self._rebuild(rebuild_tables)]

    async def _rebuild(self, wanted: bool) -> TruthFinding:
        if not wanted:
            return (REBUILT, "-", "not rebuilt (asked not to): `context` still reads them")
        if self.tables.read_only:
            return (
                REBUILT,
                "-",
                "not rebuilt: the file is read-only here; run `lifeline verify` where it can "
                "be written, so that `context` reads the entries' truth",
            )
        try:
            await self.tables.rebuild()
        except self.tables.errors as exc:
            return (REBUILT, "-", f"could not be rebuilt ({exc}); `context` reads them as they are")
        return (
            REBUILT,
            "-",
            "the truth tables were rebuilt from the entries; `context` now reads what the "
            "entries say",
        )
