"""Incremental truth: a snapshot of the folded state kept in the line's own database.

The snapshot records the state and the highest ``entries.seq`` it covers. Reading the truth
folds only the rows above that mark, since new rows always get a higher ``seq`` whatever
order they arrive in, and the reducers do not depend on order. Triggers drop the snapshot
on any UPDATE or DELETE of ``entries`` (a lowered ts, an altered row), so the next read
folds everything again; a count check catches anything else. Other stores get a full fold.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from typing import Any

from lifeline.entry import Entry
from lifeline.errors import StoreError
from lifeline.store.port import Store
from lifeline.store.schema import register_migrations
from lifeline.store.sqlite import SqliteStore
from lifeline.truth.reducers import fold, fold_all
from lifeline.truth.state import OlderSnapshot, State

__all__ = ["load_state"]

log = logging.getLogger(__name__)
_CHUNK = 5_000

register_migrations(
    "truth",
    [
        (
            1,
            """
            CREATE TABLE truth_snapshot (
                slot INTEGER PRIMARY KEY CHECK (slot = 0),
                last_seq INTEGER NOT NULL,
                count INTEGER NOT NULL,
                state TEXT NOT NULL
            );
            CREATE TABLE truth_generation (
                slot INTEGER PRIMARY KEY CHECK (slot = 0),
                n INTEGER NOT NULL
            );
            INSERT INTO truth_generation VALUES (0, 0);
            CREATE TRIGGER truth_snapshot_on_update AFTER UPDATE ON entries
            BEGIN
                DELETE FROM truth_snapshot;
                UPDATE truth_generation SET n = n + 1;
            END;
            CREATE TRIGGER truth_snapshot_on_delete AFTER DELETE ON entries
            BEGIN
                DELETE FROM truth_snapshot;
                UPDATE truth_generation SET n = n + 1;
            END;
            """,
        )
    ],
)

_COLS = "seq, id, ts, kind, author, agent, provider, model, summary, body, parents"


def _row_entry(row: tuple[Any, ...]) -> Entry:
    _seq, eid, ts, kind, author, agent, provider, model, summary, body, parents = row
    return Entry(
        eid, ts, kind, author, agent, provider, model, summary, body, tuple(json.loads(parents))
    )


def _load(conn: sqlite3.Connection) -> tuple[State, int, int, int]:
    """Fold what the snapshot lacks, in one read transaction (a consistent view)."""
    conn.execute("BEGIN")
    try:
        return _load_tx(conn)
    finally:
        conn.execute("COMMIT")


def _fold_after(conn: sqlite3.Connection, state: State, last: int) -> tuple[int, int]:
    """Fold the rows above ``last`` into ``state``; returns (new last, rows folded)."""
    folded = 0
    while True:
        rows = conn.execute(
            f"SELECT {_COLS} FROM entries WHERE seq > ? ORDER BY seq LIMIT {_CHUNK}", (last,)
        ).fetchall()
        if not rows:
            return last, folded
        for row in rows:
            try:
                fold(state, _row_entry(row))
            except (ValueError, TypeError) as exc:
                log.warning("truth: skipping undecodable row %s: %s", row[0], exc)
                state.count += 1
        folded += len(rows)
        last = int(rows[-1][0])


def _load_tx(conn: sqlite3.Connection) -> tuple[State, int, int, int]:
    """Returns (state, last seq folded, rows folded now, generation)."""
    generation = int(conn.execute("SELECT n FROM truth_generation").fetchone()[0])
    snap = conn.execute("SELECT last_seq, state FROM truth_snapshot").fetchone()
    state, last = State(), 0
    if snap is not None:
        try:
            state, last = State.from_json(snap[1]), int(snap[0])
        except OlderSnapshot:
            log.info("truth snapshot of another version; folding the line again")
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("truth snapshot unreadable (%s); folding the line again", exc)
    total = int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])
    last, folded = _fold_after(conn, state, last)
    if state.count != total and snap is not None:
        # Rows went away or changed behind the triggers' back: trust nothing, fold it all.
        state = State()
        last, folded = _fold_after(conn, state, 0)
    if state.count != total:
        raise StoreError(f"truth fold saw {state.count} rows but the line holds {total}")
    return state, last, folded, generation


def _save(conn: sqlite3.Connection, state: State, last: int, generation: int) -> None:
    # An UPDATE/DELETE since the fold bumped the generation: that fold may be stale.
    if int(conn.execute("SELECT n FROM truth_generation").fetchone()[0]) != generation:
        return
    conn.execute(
        "INSERT OR REPLACE INTO truth_snapshot VALUES (0, ?, ?, ?)",
        (last, state.count, state.to_json()),
    )


async def load_state(store: Store) -> State:
    """The folded state of ``store``: incremental on SQLite, a full fold otherwise."""
    if not isinstance(store, SqliteStore):
        return fold_all([e async for e in store.stream()])
    state, last, folded, generation = await store.run_read(_load)
    if folded and not store.read_only:  # a read-only folder: fold again next time
        try:
            await store.run_write(lambda conn: _save(conn, state, last, generation))
        except StoreError as exc:  # a read-only file still answers, just not faster next time
            log.warning("could not save the truth snapshot: %s", exc)
    return state
