"""Which truth a line reads (:func:`truth_source`), and the truth tables of a line file.

The truth follows the backend the line was opened on (decision 0088): a line file reads
its truth tables (:class:`SqliteTruth`), a hub's line the same tables in its database
(:class:`~lifeline.truth.pg_view.PgTruth`, decision 0077), any other store folds its
entries (:class:`~lifeline.truth.source.FoldedTruth`). :func:`truth_source` is the truth's one
choice, made through :func:`~lifeline.store.backend.on_backend`; nothing else in the layer
asks which backend a line is on.

On a line file, :mod:`lifeline.truth.table` keeps the tables and folds the rows past their
mark; :mod:`lifeline.truth.tableview` reads them back. A line with rows past the mark is
caught up and read in one write transaction; a current one is read in one read transaction
(a consistent view either way). A line that cannot be written (a read-only copy) and is
behind gets a full fold in memory instead: same answers, without the speed-up.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from lifeline.store.backend import on_backend
from lifeline.store.port import Store
from lifeline.store.sqlite_group import read_transaction
from lifeline.store.tiers import SqlLine
from lifeline.truth.source import FoldedTruth, ShownQuery, Superseded, TruthSource
from lifeline.truth.state import State
from lifeline.truth.table import catch_up, is_current
from lifeline.truth.tableview import full_state, shown_state
from lifeline.truth.views import Truth

if TYPE_CHECKING:
    from lifeline.store.postgres import PgStore
    from lifeline.store.sqlite import SqliteStore

__all__ = ["SqliteTruth", "Superseded", "TruthSource", "truth_source"]

log = logging.getLogger(__name__)
T = TypeVar("T")


async def _read(store: SqlLine, reader: Callable[[sqlite3.Connection], T]) -> T | None:
    """``reader(conn)`` on current tables, or None when they cannot be brought up to date.

    A current line is read in a read transaction. A line that is behind is caught up and
    read in the same write transaction, so a busy writer (a node receiving a sync) can
    never leave the reader behind again between the two."""

    def caught_up(conn: sqlite3.Connection) -> T:
        catch_up(conn)
        return reader(conn)

    bring_up = store.write(caught_up)

    def run(conn: sqlite3.Connection) -> T | None:
        with read_transaction(conn):  # the group's own, inside a grouped pull
            if is_current(conn):
                return reader(conn)
        if store.read_only:
            return None
        try:
            return bring_up()
        except sqlite3.OperationalError as exc:  # e.g. a file that turned read-only
            log.warning("could not bring the truth tables up to date: %s", exc)
            return None

    return await store.run_read(run)


class SqliteTruth(FoldedTruth):
    """The truth tables of a line file; a fold when they cannot be brought up to date."""

    def __init__(self, store: SqlLine) -> None:
        super().__init__(store)
        self.sql = store

    async def state(self) -> State:
        state = await _read(self.sql, full_state)
        return state if state is not None else await super().state()

    async def shown(self, query: ShownQuery) -> tuple[State, Truth, str | None]:
        found = await _read(
            self.sql,
            lambda conn: shown_state(
                conn, query.thread, query.recent, query.max_items, query.resolve, query.items
            ),
        )
        if found is not None:
            return found
        return await super().shown(query)

    async def superseded(self) -> Superseded:
        found = await _read(
            self.sql, lambda conn: dict(conn.execute("SELECT id, by FROM truth_superseded"))
        )
        return Superseded(found) if found is not None else await super().superseded()


class _TruthSources:
    """The truth of a line, per backend: its tables when it was opened with them."""

    def sqlite(self, store: SqliteStore) -> TruthSource:
        return SqliteTruth(store) if "truth" in store.schema else FoldedTruth(store)

    def postgres(self, store: PgStore) -> TruthSource:
        from lifeline.truth.pg_view import PgTruth

        return PgTruth(store) if "truth" in store.components else FoldedTruth(store)

    def plain(self, store: Store) -> TruthSource:
        return FoldedTruth(store)


_SOURCES = _TruthSources()


def truth_source(store: Store) -> TruthSource:
    """The truth of ``store``'s line, read from what its backend keeps."""
    return on_backend(store, _SOURCES)
