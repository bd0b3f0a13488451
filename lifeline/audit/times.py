"""The audit of what orders a line: each row's ts and height, and each entry's time
against its parents'.

* A row whose ts is not a time (``invalid-ts``) or whose height is not an integer
  (``corrupt-row``) was altered: no writer stores either. Both fail ``lifeline verify``, and
  ``lifeline recover`` rebuilds the line (heights recomputed, such a ts left out).
* An entry dated before a parent by more than :data:`SKEW_S` (``ts-before-parent``) is a
  note: lifeline-context's ``approve`` wrote such entries and an import keeps them, so the
  ledger cannot tell a backdate from history; ``lifeline-mesh verify`` judges it with the
  entry's signatures (docs/notary.md), and every node refuses it in a sync.

A line file finds both in its SQL (a scan of the order index, and of the parent links
whose parent sorts after the child); any other line (a hub's, memory) follows the times
along the audit's stream (:class:`ParentTimes`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from datetime import datetime
from itertools import islice

from lifeline.entry import normalize_ts
from lifeline.errors import InvalidEntry
from lifeline.store.port import Store
from lifeline.store.rows import ts_fault

__all__ = [
    "BEFORE_PARENT",
    "INVALID_TS",
    "SKEW_S",
    "Found",
    "ParentTimes",
    "before_parent",
    "damaged_heights",
    "dated_before_parents",
    "invalid_ts",
]

# Clocks of honest machines agree within seconds; five minutes leaves room for one that
# has not set its clock for a while (lifeline-mesh's notary allows the same by default).
SKEW_S = 300.0
INVALID_TS = "invalid-ts"
BEFORE_PARENT = "ts-before-parent"
RECENT = 20_000  # entries whose ts the stream keeps, twice (parents are usually recent)
LOOKUP = 500  # ids per read of parents that left the recent ones

Found = tuple[str, str, str]  # (check, entry id, detail)


def invalid_ts(entry_id: str, ts: str) -> Found | None:
    """The finding for a stored ts that is not a time, or None."""
    fault = ts_fault(ts)
    if fault is None:
        return None
    return (
        INVALID_TS,
        entry_id,
        f"{fault}; no writer stores that, the row was altered: `lifeline recover` rebuilds "
        "the line without it (a peer or an earlier LIFELINE.md brings the entry back)",
    )


def _moment(ts: str) -> datetime | None:
    try:
        return datetime.fromisoformat(normalize_ts(ts, naive_utc=True))
    except (InvalidEntry, ValueError):
        return None  # not a time: reported as invalid-ts


def before_parent(entry_id: str, ts: str, parent: str, parent_ts: str) -> Found | None:
    """The note for an entry dated more than :data:`SKEW_S` before a parent, or None."""
    if parent_ts <= ts and len(ts) == len(parent_ts) == 27:
        return None  # the stored form orders as text: not before
    mine, theirs = _moment(ts), _moment(parent_ts)
    if mine is None or theirs is None or (theirs - mine).total_seconds() <= SKEW_S:
        return None
    return (
        BEFORE_PARENT,
        entry_id,
        f"ts {ts} is before its parent {parent[:12]}'s ts {parent_ts} (more than the "
        f"{SKEW_S:g}s skew tolerance): a clock that had gone back, lifeline-context's "
        "`approve`, or an edited time; peers refuse it (`lifeline-mesh verify` judges it "
        "with its signature)",
    )


def damaged_heights(conn: sqlite3.Connection) -> list[Found]:
    """A line file's rows whose height is not an integer, by row number."""
    rows = conn.execute(
        "SELECT seq, id, height FROM entries WHERE typeof(height) != 'integer' ORDER BY seq"
    ).fetchall()
    return [
        (
            "corrupt-row",
            str(eid)[:64],
            f"row {seq}: its height {str(height)[:40]!r} is not a whole number (the stream "
            "order and the sync keys are built on it): the row was altered; "
            "`lifeline recover` rebuilds the line",
        )
        for seq, eid, height in rows
    ]


# Candidates only: a parent whose ts sorts after the child's, or either not in the stored
# form (length 27), where the text order is not the time order.
_LATE_LINKS = """
SELECT c.id, c.ts, p.id, p.ts FROM links l
JOIN entries c ON c.seq = l.child_seq
JOIN entries p ON p.seq = l.parent_seq
WHERE p.ts > c.ts OR length(p.ts) != 27 OR length(c.ts) != 27
"""


def dated_before_parents(conn: sqlite3.Connection) -> list[Found]:
    """A line file's entries dated before a stored parent, sorted (entry, then parent)."""
    found: list[tuple[str, str, Found]] = []
    for eid, ts, parent, parent_ts in conn.execute(_LATE_LINKS):
        if type(ts) is str and type(parent_ts) is str and type(eid) is str:
            note = before_parent(eid, ts, str(parent), parent_ts)
            if note is not None:
                found.append((eid, str(parent), note))
    return [note for *_key, note in sorted(found)]


class ParentTimes:
    """Entries dated before a parent, followed along a stream in stream order (parents
    first): the last entries' times are at hand, older parents are read at the end."""

    def __init__(self) -> None:
        self.recent: dict[str, str] = {}
        self.older: dict[str, str] = {}
        self.later: list[tuple[str, str, str]] = []  # (entry id, its ts, parent id)
        self.found: list[tuple[str, str, Found]] = []

    def see(self, entry_id: str, ts: str, parents: Iterable[str]) -> None:
        for parent in parents:
            other = self.recent.get(parent)
            if other is None:
                other = self.older.get(parent)
            if other is None:
                self.later.append((entry_id, ts, parent))
            else:
                self._judge(entry_id, ts, parent, other)
        self.recent[entry_id] = ts
        if len(self.recent) >= RECENT:
            self.older, self.recent = self.recent, {}

    def _judge(self, entry_id: str, ts: str, parent: str, parent_ts: str) -> None:
        note = before_parent(entry_id, ts, parent, parent_ts)
        if note is not None:
            self.found.append((entry_id, parent, note))

    async def finish(self, store: Store) -> list[Found]:
        """The notes, the parents that had left the recent ones read from ``store``
        (those it does not hold — cross-line, missing — are other findings' business)."""
        later = iter(self.later)
        while chunk := list(islice(later, LOOKUP)):
            held = {e.id: e.ts for e in await store.get_many({p for *_e, p in chunk})}
            for entry_id, ts, parent in chunk:
                if parent in held:
                    self._judge(entry_id, ts, parent, held[parent])
        return [note for *_key, note in sorted(self.found)]
