"""The shallow boundary of a line (git's ``.git/shallow``): absent parents, with heights.

A shallow sync (docs/decisions/0063-shallow-join.md) stores the entries in force of a line
without their history: those entries name parents this line does not hold. The table
``shallow_boundary`` (ledger migration 4) lists each such parent with its height, so that

* the write path gives an entry above the boundary its true height (the content-derived
  sync key ``(height, id)`` every node computes alike) and does not refuse it for a
  missing parent;
* readers know the line is shallow (``history`` says the older part is not here,
  ``verify`` says what it covers) instead of taking the absent parents for corruption;
* a later full sync deepens the line: a boundary entry that arrives leaves the table (its
  height checked against the one recorded), and is not a tip, since its children are held.

Functions of a ``sqlite3.Connection``; the write ones inside the caller's transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any

from lifeline.errors import InvalidEntry
from lifeline.store.deferred_ids import rows_by_id

__all__ = [
    "boundary_heights",
    "boundary_size",
    "drop_boundary",
    "leave_boundary",
    "read_mark",
    "read_source",
    "record_boundary",
    "record_source",
]

_VARS = 500


def _empty(conn: sqlite3.Connection) -> bool:
    """No boundary: a complete line (the usual case, one index probe on every batch)."""
    try:
        return conn.execute("SELECT 1 FROM shallow_boundary LIMIT 1").fetchone() is None
    except sqlite3.OperationalError:  # a line opened without ledger migration 4
        return True


def boundary_size(conn: sqlite3.Connection) -> int:
    """How many absent parents the line's entries name (0: a complete line)."""
    if _empty(conn):
        return 0
    return int(conn.execute("SELECT count(*) FROM shallow_boundary").fetchone()[0])


def boundary_heights(conn: sqlite3.Connection, ids: Iterable[str]) -> dict[str, int]:
    """The recorded heights of those ``ids`` that are on the boundary."""
    wanted = sorted(set(ids))
    if not wanted or _empty(conn):
        return {}
    out: dict[str, int] = {}
    for start in range(0, len(wanted), _VARS):
        part = wanted[start : start + _VARS]
        marks = ",".join("?" * len(part))
        sql = f"SELECT id, height FROM shallow_boundary WHERE id IN ({marks})"
        out.update((i, int(h)) for i, h in conn.execute(sql, part))
    return out


def record_boundary(conn: sqlite3.Connection, heights: Mapping[str, int]) -> int:
    """Record absent parents (id -> height), skipping those the line holds; how many new."""
    if not heights:
        return 0
    ids = sorted(heights)
    held = {r[0] for r in rows_by_id(conn, "id", ids)}
    rows = [(i, int(heights[i])) for i in ids if i not in held]
    before = conn.total_changes
    conn.executemany("INSERT OR IGNORE INTO shallow_boundary VALUES (?, ?)", rows)
    return conn.total_changes - before


def leave_boundary(conn: sqlite3.Connection, arrived: Mapping[str, int]) -> set[str]:
    """Entries now stored (id -> computed height) that were on the boundary leave it; the
    ids that did. A height other than the recorded one refuses the batch: the snapshot
    that recorded it, or the entry, is not what it claims."""
    found = boundary_heights(conn, arrived)
    for entry_id, recorded in found.items():
        if arrived[entry_id] != recorded:
            raise InvalidEntry(
                f"entry {entry_id[:12]} arrives at height {arrived[entry_id]}, but the shallow "
                f"snapshot recorded {recorded}; the snapshot's node misstated it — refusing "
                "the batch (run a full sync into a fresh line)"
            )
    conn.executemany("DELETE FROM shallow_boundary WHERE id = ?", [(i,) for i in found])
    return set(found)


def drop_boundary(conn: sqlite3.Connection, ids: Iterable[str]) -> None:
    """Undo :func:`record_boundary` for ``ids`` that no held entry names (a failed store)."""
    rows = [(i,) for i in ids]
    conn.executemany(
        "DELETE FROM shallow_boundary WHERE id = ? AND NOT EXISTS"
        " (SELECT 1 FROM foreign_links WHERE parent_id = shallow_boundary.id)",
        rows,
    )


_SOURCE = "shallow_source"


def record_source(
    conn: sqlite3.Connection,
    head: str,
    signature: bytes,
    public_key: bytes,
    mark: int,
    peer: str | None = None,
) -> None:
    """The signed head the line's shallow part came from, the highest row it filled (rows
    past ``mark`` were written here, and are what a push sends) and the address it came
    from (``peer``: where `serve` deepens the line, decision 0082)."""
    found = {"head": head, "signature": signature.hex(), "public_key": public_key.hex()}
    value = json.dumps({**found, "mark": mark, **({"peer": peer} if peer else {})})
    conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (_SOURCE, value))


def read_source(conn: sqlite3.Connection) -> dict[str, Any] | None:
    """What :func:`record_source` recorded last (None: never shallow-synced)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_SOURCE,)).fetchone()
    if row is None:
        return None
    found = json.loads(row[0])
    return found if isinstance(found, dict) else None


def read_mark(conn: sqlite3.Connection) -> int | None:
    found = read_source(conn)
    return None if found is None else int(found["mark"])
