"""Recovery of a damaged line file (``lifeline recover``).

A line whose file fails SQLite's check refuses local writes
(:func:`lifeline.store.sqlite_check.require_intact`). Recovery (:func:`recover_line`)
copies every entry that still reads — through SQLite where it can, and from a scan of the
file's pages where SQLite cannot open or walk it (:mod:`lifeline.page_scan`) — and whose id
still matches its content and whose ts is a time, into a fresh file, parents before
children (heights computed again), and keeps the damaged file beside it
(``<line>.db.damaged-<time>``, 0600). What could not be read comes back by syncing with a
peer or ingesting a ``LIFELINE.md`` written before the damage.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lifeline.entry import Entry
from lifeline.errors import LifelineError
from lifeline.home import Home
from lifeline.page_scan import scan_entry_rows
from lifeline.store.sqlite import SqliteStore
from lifeline.store.sqlite_open import file_uri
from lifeline.store.sqlite_reads import COLUMNS

__all__ = ["Recovered", "recover_line"]

CHUNK = 256


@dataclass(frozen=True, slots=True)
class Recovered:
    kept: int  # entries copied into the new file
    unreadable: int  # rows lost: unreadable, or whose id no longer matches (up to the
    # highest row number still seen; rows after it in a truncated file are not counted)
    orphans: int  # readable entries left out because a parent was lost
    damaged: Path  # where the damaged file now is
    scanned: int = 0  # readable entries found only by scanning the pages (SQLite could not)


def _top(conn: sqlite3.Connection) -> int:
    try:
        return int(conn.execute("SELECT max(seq) FROM entries").fetchone()[0] or 0)
    except sqlite3.DatabaseError:
        found = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entries'").fetchone()
        return int(found[0])


def _rows(conn: sqlite3.Connection) -> tuple[dict[int, Entry], int]:
    """Every entry row that reads and verifies, by row number, read by ranges of ``seq``
    (one by one where a range fails); and the highest row number the line had."""
    top = _top(conn)
    sql = f"SELECT {COLUMNS} FROM entries WHERE seq BETWEEN ? AND ?"
    good: dict[int, Entry] = {}
    for start in range(1, top + 1, CHUNK):
        try:
            rows = conn.execute(sql, (start, start + CHUNK - 1)).fetchall()
        except sqlite3.DatabaseError:
            rows = []
            for seq in range(start, start + CHUNK):
                with contextlib.suppress(sqlite3.DatabaseError):
                    rows += conn.execute(sql, (seq, seq)).fetchall()
        _keep(rows, good)
    return good, top


def _keep(rows: list[tuple[Any, ...]], good: dict[int, Entry]) -> None:
    from lifeline.store.rows import decode_row as _decode  # one rule for stored rows
    from lifeline.store.rows import ts_fault

    for row in rows:
        if row[0] in good:
            continue
        try:
            entry = _decode(row)
            entry.verify()
        except (ValueError, TypeError, LifelineError):
            continue
        if ts_fault(entry.ts) is not None:  # altered: its real time comes back with it
            continue
        good[int(row[0])] = entry


def _readable(path: Path) -> tuple[dict[int, Entry], int, dict[str, str], int]:
    """What SQLite still reads of the file (nothing when it cannot open or walk it), then
    what a scan of its pages finds beyond that (:mod:`lifeline.page_scan`); the highest row
    number seen; the declared cross-line parents; how many entries only the scan found."""
    good: dict[int, Entry] = {}
    top = 0
    external: dict[str, str] = {}
    try:
        conn = sqlite3.connect(file_uri(path, "ro"), uri=True, timeout=30)
        try:
            external = _externals(conn)
            good, top = _rows(conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        pass  # not even the schema reads: the page scan below is all there is
    through_sqlite = len(good)
    scan = scan_entry_rows(path)
    _keep(scan.rows, good)
    top = max([top, scan.sequence, *good, *(int(row[0]) for row in scan.rows)])
    return good, top, external, len(good) - through_sqlite


def _externals(conn: sqlite3.Connection) -> dict[str, str]:
    try:
        return {str(i): str(line) for i, line in conn.execute("SELECT id, line FROM externals")}
    except sqlite3.DatabaseError:
        return {}


def _closed_under_parents(entries: list[Entry], external: dict[str, str]) -> list[Entry]:
    """The entries whose every parent is kept (or lives in another line), parents first."""
    by_id = {e.id: e for e in entries}
    memo: dict[str, int] = {}
    kept: dict[str, Entry] = {}
    for entry in sorted(entries, key=lambda e: _height(e, by_id, memo)):
        if all(p in kept or p in external for p in entry.parents):
            kept[entry.id] = entry
    return list(kept.values())


def _height(entry: Entry, by_id: dict[str, Entry], memo: dict[str, int]) -> int:
    stack = [entry.id]
    while stack:
        eid = stack[-1]
        if eid in memo:
            stack.pop()
            continue
        parents = by_id[eid].parents if eid in by_id else ()
        todo = [p for p in parents if p in by_id and p not in memo]
        if todo:
            stack.extend(todo)
            continue
        memo[eid] = 1 + max((memo.get(p, 0) for p in parents), default=0)
        stack.pop()
    return memo[entry.id]


async def recover_line(path: Path, now: dt.datetime | None = None) -> Recovered:
    """Rebuild the line file at ``path`` from what still reads; keep the damaged file."""
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    damaged = Home.damaged_path(path, stamp)
    fresh = Home.recovering_path(path)
    found, top, external, scanned = _readable(path)
    firsts: dict[str, Entry] = {}  # an id in two rows (decision 0147): its first row kept
    for seq in sorted(found):
        firsts.setdefault(found[seq].id, found[seq])
    readable = list(firsts.values())
    unreadable = top - len(found)
    kept = _closed_under_parents(readable, external)
    for leftover in (fresh, *(fresh.with_name(fresh.name + s) for s in ("-wal", "-shm"))):
        leftover.unlink(missing_ok=True)
    async with await SqliteStore.open(fresh) as store:
        for entry_id, line in external.items():
            await store.declare_external(entry_id, line)
        await store.append_many(kept)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(damaged.with_name(damaged.name + suffix))
    path.rename(damaged)
    damaged.chmod(0o600)
    fresh.rename(path)
    return Recovered(len(kept), unreadable, len(readable) - len(kept), damaged, scanned)
