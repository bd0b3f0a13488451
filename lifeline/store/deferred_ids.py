"""The entries' id index built once a pull into an empty line has stored them (decision 0147).

An initial sync stores a million entries whose ids are random 64-character strings. Kept
while the rows go in, the unique index on those ids costs SQLite a walk down a random-keyed
B-tree for every row and a page rewritten for most; built once they are in, it is one
sort. Decision 0143 did this for the signatures; the entries' ids are also looked up while
the pull runs (each batch's parents: their heights, row numbers and ts), so the pull keeps
a lookup of its own meanwhile: the table ``temp.pulled_ids``, in the connection's memory
(``temp_store = MEMORY``), from a 64-bit key of each id stored to its row number (~25 MB a
million, against ~120 MB for a Python dict). A key found is confirmed by the row's id.

- :func:`defer` drops the index inside the transaction storing a pull's first batch, when
  the table is empty and the batch large, notes so in ``meta`` and makes the lookup.
- :func:`rows_by_id` is every lookup by id of a pull's intake: through the lookup while
  this connection keeps one, else by the index (or, after a crash, by a scan: correct).
- ``LOOKUP_INSERT`` adds the rows a received batch stored to the lookup
  (``sqlite_writes.append_tx``); :func:`clashed` handles two ids on one key.
- :func:`ensure_index` builds the index before anything but the pull's intake writes an
  entry, signs a state or serves entries by id, on any connection: while the lookup is
  this connection's alone, nothing else may rely on it, and a write elsewhere would not
  be in it. The session's end builds it too (``build_deferred_index``), as does the next
  opening of the line for a session after a crash.

A key is Python's ``hash`` of the id: 64 bits, salted per process (the lookup lives and
dies with one connection of one process), so a peer cannot grind two ids onto one key.
Two ids on one key by chance (about one pull in 10^7 at a million), or by a peer's design
where ``PYTHONHASHSEED`` fixes the salt, build the index there and then: the pull goes on
with it, slower but right.

Lines made before this decision hold the ids' uniqueness inline in the table's definition,
where no ``DROP INDEX`` reaches it. Such a table is rebuilt while it is empty (no row
copied; its ``AUTOINCREMENT`` numbering, other indexes and triggers kept) with the
uniqueness as the index ``entries_id``. A table whose definition is not the one this code
knows keeps its index: the pull is then only slower.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = [
    "DEFER_MIN",
    "ID_INDEX",
    "LOOKUP_INSERT",
    "NOTE",
    "build",
    "clashed",
    "defer",
    "ensure_index",
    "key_of",
    "lean_sort",
    "pending",
    "repeated",
    "rows_by_id",
    "settle",
    "usual_sort",
]

log = logging.getLogger(__name__)

DEFER_MIN = 1_000  # entries in the first batch: a smaller pull keeps the index
ID_INDEX = "entries_id"
NOTE = "deferred_entries_index"  # the meta row saying the index waits to be built
_MAP = "pulled_ids"
# The page cache while an index is built, and SQLite's helper threads for its sort: one
# thread sorts beside the first, each in a buffer the cache's size. The three indexes a
# pull of a million entries defers took 1.6 s instead of 2.1 s, in 4 MB less, than with
# 8 MB and no helper, itself as fast as 32 MB (decision 0151).
_BUILD_CACHE_KIB = 4_096
_BUILD_SORT_THREADS = 1
_CHUNK = 500
_INLINE = re.compile(r"(\bid\s+TEXT\s+NOT\s+NULL)\s+UNIQUE\b")
key_of: Callable[[str], int] = hash  # a test forces clashes through it
LOOKUP_INSERT = f"INSERT INTO temp.{_MAP} (key, seq)"


def defer(conn: sqlite3.Connection, batch: int) -> bool:
    """Inside the write transaction storing a pull's first received batch of ``batch``
    entries: drop the id index when the table is empty and the batch large, and start the
    pull's own lookup; whether it did."""
    if batch < DEFER_MIN or conn.execute("SELECT 1 FROM entries LIMIT 1").fetchone():
        return False
    if _inline_unique(conn):
        if not _rebuild_empty(conn):
            return False
    else:
        conn.execute(f"DROP INDEX IF EXISTS {ID_INDEX}")
    # Unjournaled: a pull's group transaction would otherwise keep a copy of every page of
    # the lookup it changes until its commit (~20 MB at a million). A batch rolled back
    # leaves its keys behind: each names a row number that holds another id or none, and
    # every key found is checked against its row's id.
    conn.execute("PRAGMA temp.journal_mode = OFF")
    conn.execute(f"DROP TABLE IF EXISTS temp.{_MAP}")
    conn.execute(f"CREATE TEMP TABLE {_MAP} (key INTEGER PRIMARY KEY, seq INTEGER NOT NULL)")
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (NOTE, ID_INDEX))
    return True


def pending(conn: sqlite3.Connection) -> bool:
    """Whether the line's entries' id index waits to be built (one primary-key read)."""
    return conn.execute("SELECT 1 FROM meta WHERE key = ?", (NOTE,)).fetchone() is not None


def _mapped(conn: sqlite3.Connection) -> bool:
    """Whether this connection keeps the pull's lookup and the index still waits (another
    process that built it meanwhile may have written entries the lookup lacks)."""
    found = conn.execute(
        "SELECT 1 FROM temp.sqlite_master WHERE type = 'table' AND name = ?", (_MAP,)
    ).fetchone()
    return found is not None and pending(conn)


def build(conn: sqlite3.Connection) -> bool:
    """Build the index a pull deferred, inside the caller's write transaction (nothing
    when none waits); whether it did."""
    if not pending(conn):
        return False
    try:
        conn.execute(f"CREATE UNIQUE INDEX IF NOT EXISTS {ID_INDEX} ON entries(id)")
    except sqlite3.IntegrityError as exc:  # nothing stores an id twice; say so if it did
        raise sqlite3.IntegrityError(
            "the line holds an entry id twice, so its id index cannot be built; "
            "`lifeline recover` rebuilds the line with each entry once"
        ) from exc
    conn.execute("DELETE FROM meta WHERE key = ?", (NOTE,))
    conn.execute(f"DROP TABLE IF EXISTS temp.{_MAP}")
    return True


def lean_sort(conn: sqlite3.Connection) -> int:
    """Outside a transaction, before a build: SQLite's sorts spilled to files past a small
    page cache (a million ids sorted in memory would take ~100 MB, and the store's own
    cache of 32 MB more); the cache size it had, for :func:`usual_sort`. Changing where
    sorts go drops the pull's lookup; inside a transaction it cannot, and stays."""
    (cache,) = conn.execute("PRAGMA cache_size").fetchone()
    with contextlib.suppress(sqlite3.OperationalError):  # within a transaction
        conn.execute("PRAGMA temp_store = FILE")
    conn.execute(f"PRAGMA cache_size = -{_BUILD_CACHE_KIB}")
    conn.execute(f"PRAGMA threads = {_BUILD_SORT_THREADS}")
    return int(cache)


def usual_sort(conn: sqlite3.Connection, cache: int) -> None:
    """The store's own settings back (``sqlite_open``): sorts in memory, ``cache`` pages."""
    with contextlib.suppress(sqlite3.OperationalError):
        conn.execute("PRAGMA temp_store = MEMORY")
    conn.execute(f"PRAGMA cache_size = {int(cache)}")
    conn.execute("PRAGMA threads = 0")


def ensure_index(conn: sqlite3.Connection) -> None:
    """Inside a write transaction of anything but a pull's intake: the deferred index
    built first (one primary-key read when none waits)."""
    if pending(conn):
        build(conn)


def settle(conn: sqlite3.Connection) -> bool:
    """Inside a pull's intake transaction: whether it goes on with its own lookup; a
    deferred index this connection has no lookup for (another process's pull, or one
    ended by a crash) is built first."""
    if _mapped(conn):
        return True
    ensure_index(conn)
    return False


def clashed(conn: sqlite3.Connection) -> None:
    """``LOOKUP_INSERT`` failed on a key already taken, two ids on one key: the index is
    built now, in the same transaction, and the lookup dropped."""
    log.info("two entry ids on one lookup key: the entries' id index is built now")
    build(conn)


def repeated(conn: sqlite3.Connection, limit: int = 10) -> list[str]:
    """Ids stored in more than one row while the index waited (none unless a bug wrote
    them: then the build refuses, and ``lifeline recover`` keeps each id's first row)."""
    if not pending(conn):
        return []  # the index holds: no id can repeat
    sql = "SELECT id FROM entries GROUP BY id HAVING count(*) > 1 LIMIT ?"
    return [i for (i,) in conn.execute(sql, (limit,))]


def rows_by_id(conn: sqlite3.Connection, columns: str, ids: Sequence[str]) -> Iterator[Any]:
    """``SELECT columns FROM entries WHERE id IN ids`` (``columns`` begins with ``id``), in
    chunks: through the pull's lookup while this connection keeps one."""
    if not ids:
        return
    mapped = _mapped(conn)
    for start in range(0, len(ids), _CHUNK):
        part = ids[start : start + _CHUNK]
        marks = ",".join("?" * len(part))
        if not mapped:
            yield from conn.execute(f"SELECT {columns} FROM entries WHERE id IN ({marks})", part)
            continue
        wanted = set(part)
        sql = (
            f"SELECT {columns} FROM entries WHERE seq IN"
            f" (SELECT seq FROM temp.{_MAP} WHERE key IN ({marks}))"
        )
        yield from (r for r in conn.execute(sql, [key_of(i) for i in part]) if r[0] in wanted)


def _inline_unique(conn: sqlite3.Connection) -> bool:
    sql = "SELECT 1 FROM sqlite_master WHERE type = 'index' AND tbl_name = 'entries'"
    sql += " AND sql IS NULL"  # the autoindex of an inline UNIQUE
    return conn.execute(sql).fetchone() is not None


def _rebuild_empty(conn: sqlite3.Connection) -> bool:
    """The empty table made again without the inline UNIQUE; its row numbering, other
    indexes and triggers kept. False (nothing changed) for a definition not known here."""
    (table,) = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'entries'"
    ).fetchone()
    plain, replaced = _INLINE.subn(r"\1", table)
    if replaced != 1:
        log.info("entries table of an unknown layout: its id index is kept during the pull")
        return False
    others = [
        sql
        for (sql,) in conn.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'entries'"
            " AND type IN ('index', 'trigger') AND sql IS NOT NULL ORDER BY rowid"
        )
    ]
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entries'").fetchone()
    conn.execute("DROP TABLE entries")
    conn.execute(plain)
    for sql in others:
        conn.execute(sql)
    conn.execute("DELETE FROM sqlite_sequence WHERE name = 'entries'")
    if row is not None:
        conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('entries', ?)", (row[0],))
    return True
