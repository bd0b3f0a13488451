"""A line file's read models brought up to date ahead of its readers, in parts.

A line file keeps the truth tables (:mod:`lifeline.truth.table`) and the recall index
(:mod:`lifeline.truth.recall`) up to a mark and the first reader folds what was written
past it (decision 0006). After a large load (a full sync, a deepening) that first reader
pays for all of it: at a million entries, ~7.5 s for `context` and ~4 s for `recall`.
:func:`fold_line` does that work beforehand, a part at a time, each part its own short
write transaction, so writers wait for one part at most (a serving node runs it after
large sessions: lifeline_mesh/node/read_upkeep.py, decision 0103). What it folds is what
a reader would have folded: the same catch-ups, only sooner.
"""

from __future__ import annotations

import asyncio
import sqlite3

from lifeline.store.tiers import SqlLine
from lifeline.truth import recall, table
from lifeline.truth.state import STATE_VERSION

__all__ = ["FOLD_PART", "behind_in", "fold_line", "rows_behind"]

# Rows per part: ~60 ms of both folds on this machine (2 cores), the longest a writer
# then waits; a million rows take as long in parts of 5,000 as in one (11.8 s).
FOLD_PART = 5_000


def _has(conn: sqlite3.Connection, name: str) -> bool:
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    return found is not None


def behind_in(conn: sqlite3.Connection) -> int:
    """Rows past the truth's mark or the recall index's, whichever is further behind (any
    connection to the line file, a read-only one too)."""
    top = int(conn.execute("SELECT coalesce(max(seq), 0) FROM entries").fetchone()[0])
    marks = []
    if _has(conn, "truth_core"):
        row = conn.execute(
            "SELECT last_seq, json_extract(state, '$.version') FROM truth_core"
        ).fetchone()
        # none, or of another version: a reader would fold every row
        marks.append(0 if row is None or row[1] != STATE_VERSION else int(row[0]))
    if _has(conn, "recall_mark"):
        marks.append(int(conn.execute("SELECT seq FROM recall_mark").fetchone()[0]))
    return max((top - mark for mark in marks), default=0)


async def rows_behind(store: SqlLine) -> int:
    """How many rows the line's first reader would fold now (a few primary-key reads)."""
    return await store.run_read(behind_in)


def _fold_part(conn: sqlite3.Connection, rows: int) -> int:
    if _has(conn, "truth_core"):
        table.catch_up(conn, rows)
    if _has(conn, "recall_mark"):
        recall.catch_up(conn, rows)
    return behind_in(conn)


async def fold_line(store: SqlLine, part: int | None = None) -> int:
    """Fold ``store``'s line past its marks, ``part`` rows (default ``FOLD_PART``) per
    write transaction, until none is left; returns the rows it found behind at the start."""
    if store.read_only:
        return 0
    rows = FOLD_PART if part is None else part
    first = left = await rows_behind(store)
    while left > 0:
        left = await store.run_write(lambda conn: _fold_part(conn, rows))
        await asyncio.sleep(0)  # the event loop's other work between parts
    return first
