"""Incremental truth: the folded state kept as tables in the line's own database.

:mod:`lifeline.truth.table` keeps the tables and folds the rows past their mark;
:mod:`lifeline.truth.tableview` reads them back. A line with rows past the mark is caught up
and read in one write transaction; a current one is read in one read transaction (a
consistent view either way). A line that cannot be written (a read-only copy) and is
behind, and any other store, gets a full fold in memory instead: same answers, without the
speed-up. A hub's line reads its tables in the database (:mod:`lifeline.truth.pg_view`,
decision 0077).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from lifeline.store.port import Store
from lifeline.store.tiers import SqlLine, tables_of
from lifeline.truth import pg_view
from lifeline.truth.pg_table import pg_tables_of
from lifeline.truth.reducers import fold_all
from lifeline.truth.state import State
from lifeline.truth.table import catch_up, is_current
from lifeline.truth.tableview import ItemMemo, full_state, shown_state
from lifeline.truth.views import Truth, derive

__all__ = ["Superseded", "load_shown", "load_state", "load_superseded"]

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
        conn.execute("BEGIN")
        try:
            if is_current(conn):
                return reader(conn)
        finally:
            conn.execute("COMMIT")
        if store.read_only:
            return None
        try:
            return bring_up()
        except sqlite3.OperationalError as exc:  # e.g. a file that turned read-only
            log.warning("could not bring the truth tables up to date: %s", exc)
            return None

    return await store.run_read(run)


async def _full_fold(store: Store) -> State:
    return fold_all([e async for e in store.stream()])


async def load_state(store: Store) -> State:
    """The folded state of ``store``: from the tables on SQLite, a full fold otherwise."""
    sql = tables_of(store, "truth")
    if sql is not None:
        state = await _read(sql, full_state)
        if state is not None:
            return state
    hub = pg_tables_of(store)
    if hub is not None:
        state = await pg_view.read_current(hub, pg_view.full_state)
        if state is not None:
            return state
    return await _full_fold(store)


Resolver = Callable[[Iterable[str], str], str]


async def load_shown(
    store: Store,
    *,
    thread: str | None,
    recent: int,
    max_items: int,
    resolve: Resolver,
    items: ItemMemo | None = None,
) -> tuple[State, Truth, str | None]:
    """The state and truth a context reads, and ``thread`` resolved by ``resolve`` (see
    :func:`~lifeline.truth.tableview.shown_state`): bounded by the budget on SQLite (the
    items already read kept in ``items``); the whole state elsewhere."""
    sql = tables_of(store, "truth")
    if sql is not None:
        found = await _read(
            sql, lambda conn: shown_state(conn, thread, recent, max_items, resolve, items)
        )
        if found is not None:
            return found
    hub = pg_tables_of(store)
    if hub is not None:
        reader = pg_view.shown_state(thread, recent, max_items, resolve, items)
        found = await pg_view.read_current(hub, reader)
        if found is not None:
            return found
    state = await _full_fold(store)
    if thread is not None:
        thread = resolve(state.threads, thread)
    return state, derive(state), thread


@dataclass(frozen=True, slots=True)
class Superseded:
    """What is superseded, and by which correction in force (all ``recall`` needs)."""

    by: dict[str, str]

    def is_superseded(self, entry_id: str) -> bool:
        return entry_id in self.by


async def load_superseded(store: Store) -> Superseded:
    """The superseded entries alone: one table on SQLite, a full fold elsewhere."""
    sql = tables_of(store, "truth")
    if sql is not None:
        found = await _read(
            sql, lambda conn: dict(conn.execute("SELECT id, by FROM truth_superseded"))
        )
        if found is not None:
            return Superseded(found)
    hub = pg_tables_of(store)
    if hub is not None:
        gone = await pg_view.read_current(hub, pg_view.superseded)
        if gone is not None:
            return Superseded(gone)
    return Superseded(derive(await _full_fold(store)).superseded)
