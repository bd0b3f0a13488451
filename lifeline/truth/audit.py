"""The truth tables' part of ``verify`` over a store: checked against the entries, rebuilt
from them when they differ (issue 32; the checks are :mod:`lifeline.truth.check`).

The derived state is a cache, never evidence: rebuilding it from the entries loses
nothing, and afterwards ``context`` (CLI, MCP, hooks, the viewer) reads what the entries
say. ``verify`` still exits non-zero: an edited table means someone wrote into the file.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from lifeline.errors import LifelineError
from lifeline.store.port import Store
from lifeline.store.tiers import SqlLine, tables_of
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

__all__ = ["REBUILT", "TruthAudit"]

REBUILT = "truth-rebuilt"


class TruthAudit:
    """The tables as ``verify`` found them (:meth:`start`), then judged (:meth:`finish`)."""

    def __init__(self, store: SqlLine, stored: Stored) -> None:
        self.store, self.stored = store, stored

    @classmethod
    async def start(cls, store: Store) -> TruthAudit | None:
        """None when the line keeps no truth tables, or none folded yet."""
        sql = tables_of(store, "truth")
        if sql is None:
            return None
        stored = await sql.run_read(read_stored)
        return None if stored is None else cls(sql, stored)

    @property
    def mark(self) -> int | None:
        """The highest row the tables cover (None: they do not read, nothing to fold)."""
        return self.stored.mark if self.stored.mark >= 0 else None

    async def entries_after(self) -> set[str]:
        """The ids of the rows past the mark (rows the tables do not cover yet)."""
        mark = self.mark

        def read(conn: sqlite3.Connection) -> set[str]:
            sql = "SELECT id FROM entries WHERE seq > ?"
            return {str(r[0]) for r in conn.execute(sql, (mark if mark is not None else 0,))}

        return await self.store.run_read(read)

    async def flush(self, check: RowCheck) -> None:
        """Compare what ``check`` derived so far, on the store's reader."""
        await self.store.run_read(check.flush)

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
                results = [await self.store.run_read(lambda conn: scan(conn, mark))]
            found, over = judge(self.stored, results)
            for table in over:
                found += await self.store.run_read(
                    lambda conn, t=table: extra_rows(conn, t, mark)  # type: ignore[misc]
                )
        if not found:
            return []
        return [*sorted(set(found)), await self._rebuild(rebuild_tables)]

    async def _rebuild(self, wanted: bool) -> TruthFinding:
        if not wanted:
            return (REBUILT, "-", "not rebuilt (asked not to): `context` still reads them")
        if self.store.read_only:
            return (
                REBUILT,
                "-",
                "not rebuilt: the file is read-only here; run `lifeline verify` where it can "
                "be written, so that `context` reads the entries' truth",
            )
        try:
            await self.store.run_write(rebuild)
        except (sqlite3.Error, LifelineError) as exc:
            return (REBUILT, "-", f"could not be rebuilt ({exc}); `context` reads them as they are")
        return (
            REBUILT,
            "-",
            "the truth tables were rebuilt from the entries; `context` now reads what the "
            "entries say",
        )
