"""The signatures' id index built once a pull into an empty line has stored them (decision 0143).

An initial sync stores a million author signatures, ids that are random 32-byte strings.
Kept while the rows go in, the unique index on those ids costs SQLite a walk down a
random-keyed B-tree for every row, and a page rewritten for most; built once they are in,
it is one sort. So the first large batch of signatures received into an empty
``attestations`` table drops that index (:func:`defer_id_index`), in the same transaction
as its rows, and notes so in the line's ``meta`` table; the session's end builds it again
(:func:`build_deferred`, from ``FileLine.finish``). A session ended by a crash leaves the note:
the next `sync` or `serve` that opens the line for a session builds the index first.

Meanwhile nothing the pull does needs it: a signature batch counts what it added by row
number (decision 0108), receipts find their rows the same way, and entries are checked
against the signatures remembered in the session (decision 0105). Signatures served by id
to a peer (another session of a `serve`, in this process or another) would scan the table
for every chunk asked: a peer could make a node scan it thousands of times. So serving
them builds the index first (``NotaryStore.fetch``); the pull then goes on with it, only
slower.

The signatures' subject index (``attestations_subject_key``: role and entry) is dropped
with it and built with it (decision 0150): its keys are random too. What looks signatures
up by entry while it is away builds it first, inside its own write transaction
(``row_writes.ensure_subject_index``): an entry the session's memory does not find signed
as dated, a batch of summary claims, a stored entry whose ts a signature changes. The pull
then goes on with that index kept row by row, as before. Serving signatures by entry
(``NotaryStore.author_ids``) builds both first, as serving them by id does. A reader that
cannot write (``verify``, MCP and the viewer's entry page) reads without it: one scan of
the table per lookup.

Without the index, ``INSERT OR IGNORE`` no longer ignores a signature sent twice (a
retransmission, or a peer that repeats itself). The index build finds them: each id then
keeps its first row, the later copies' receipt keys go with them, and the table's
whole-set fingerprint is computed from the rows again (lifeline/store/summary.py): the
table's mark alone would not say it changed.

Lines made before this decision hold the id's uniqueness inline, in the table's
definition, where no ``DROP INDEX`` reaches it. Such a table is only ever rebuilt while it
is empty, so no row is copied: as ``attestations`` (same columns, same other indexes)
with the uniqueness as the index ``attestations_id``. Both layouts answer every query the
same way.
"""

from __future__ import annotations

import logging
import sqlite3

from lifeline.errors import LifelineError
from lifeline.store import deferred_ids
from lifeline.store.summary import compute_totals
from lifeline.store.tiers import SqlLine
from lifeline_mesh.notary.intake import ATTESTATIONS_TABLE
from lifeline_mesh.notary.row_writes import SUBJECT_INDEX, ensure_subject_index, is_empty
from lifeline_mesh.notary.schema import items_table

__all__ = [
    "DEFER_MIN",
    "ID_INDEX",
    "build_deferred",
    "build_deferred_index",
    "defer_id_index",
    "deferred_pending",
]

log = logging.getLogger(__name__)

DEFER_MIN = 1_000  # signatures in the first batch: a smaller pull keeps the index
ID_INDEX = "attestations_id"
_NOTE = "deferred_index"  # the meta row saying the index waits to be built
_CREATE = f"CREATE UNIQUE INDEX {ID_INDEX} ON {ATTESTATIONS_TABLE}(id)"
# The table as notary migration 1 made it, without the inline UNIQUE on id; its other
# indexes as the later migrations left them (a test compares both layouts).
_TABLE = items_table(ATTESTATIONS_TABLE, unique_id=False)
# The subject index is left out: it is dropped while the pull runs (decision 0150).
_OTHER_INDEXES = (f"CREATE INDEX attestations_order ON {ATTESTATIONS_TABLE}(sort_key, id)",)


def defer_id_index(conn: sqlite3.Connection, batch: int) -> bool:
    """Inside the write transaction storing a received batch of ``batch`` signatures: drop
    the id and subject indexes when the table is empty and the batch large; whether it did."""
    if batch < DEFER_MIN or not is_empty(conn, ATTESTATIONS_TABLE):
        return False
    if _inline_unique(conn):
        _rebuild_empty(conn)
    else:
        conn.execute(f"DROP INDEX IF EXISTS {ID_INDEX}")
    conn.execute(f"DROP INDEX IF EXISTS {SUBJECT_INDEX}")
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (_NOTE, ID_INDEX))
    return True


def deferred_pending(conn: sqlite3.Connection) -> bool:
    """Whether the line's id index waits to be built (one primary-key read)."""
    return conn.execute("SELECT 1 FROM meta WHERE key = ?", (_NOTE,)).fetchone() is not None


def build_deferred(conn: sqlite3.Connection) -> int:
    """Build the id and subject indexes a pull deferred, in one write transaction (nothing
    when none waits); the number of repeated signature rows it removed first."""
    if not deferred_pending(conn):
        return 0
    removed = 0
    try:
        conn.execute(f"CREATE UNIQUE INDEX IF NOT EXISTS {ID_INDEX} ON {ATTESTATIONS_TABLE}(id)")
    except sqlite3.IntegrityError:  # a signature stored twice meanwhile
        removed = _drop_repeats(conn)
        conn.execute(_CREATE)
    ensure_subject_index(conn)
    conn.execute("DELETE FROM meta WHERE key = ?", (_NOTE,))
    return removed


async def build_deferred_index(store: SqlLine) -> None:
    """Build the line's deferred id indexes, the signatures' and the entries' (decision
    0147), if one waits (a read when none does). A failure (a full disk) is logged and
    leaves the notes: the next opening of the line tries again."""

    def waits(conn: sqlite3.Connection) -> bool:
        return deferred_pending(conn) or deferred_ids.pending(conn)

    def build(conn: sqlite3.Connection) -> int:
        deferred_ids.build(conn)
        return build_deferred(conn)

    try:
        if not await store.run_read(waits):
            return
        # the sort spilled to a file past a small page cache, not held whole in memory
        # (~100 MB for a million entry ids): a pulling `sync` stays within its budget
        cache = await store.run_read(deferred_ids.lean_sort)
        try:
            removed = await store.run_write(build)
        finally:
            await store.run_read(lambda conn: deferred_ids.usual_sort(conn, cache))
    except LifelineError as exc:
        log.warning("%s: an id index is not built yet: %s", store.path.name, exc)
        return
    if removed:
        log.warning("%s: %d signatures were stored twice; kept once", store.path.name, removed)


def _inline_unique(conn: sqlite3.Connection) -> bool:
    sql = "SELECT 1 FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NULL"
    return conn.execute(sql, (ATTESTATIONS_TABLE,)).fetchone() is not None


def _rebuild_empty(conn: sqlite3.Connection) -> None:
    """The empty table made again without the inline UNIQUE; its row numbering kept (an
    AUTOINCREMENT table never gives a number twice, and decision 0108 counts on it)."""
    row = conn.execute(
        "SELECT seq FROM sqlite_sequence WHERE name = ?", (ATTESTATIONS_TABLE,)
    ).fetchone()
    conn.execute(f"DROP TABLE {ATTESTATIONS_TABLE}")
    conn.execute(_TABLE)
    for sql in _OTHER_INDEXES:
        conn.execute(sql)
    conn.execute("DELETE FROM sqlite_sequence WHERE name = ?", (ATTESTATIONS_TABLE,))
    if row is not None:
        sql = "INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)"
        conn.execute(sql, (ATTESTATIONS_TABLE, row[0]))


def _drop_repeats(conn: sqlite3.Connection) -> int:
    """Every id's rows but its first removed, with the receipt keys of the removed rows;
    the whole-set fingerprint computed again from the rows."""
    conn.execute("DROP TABLE IF EXISTS temp.repeated_first")
    conn.execute("DROP TABLE IF EXISTS temp.repeated_signatures")
    conn.execute(  # one sort of the ids; then one pass over the rows
        "CREATE TEMP TABLE repeated_first AS SELECT id, min(seq) AS first"
        f" FROM {ATTESTATIONS_TABLE} GROUP BY id HAVING count(*) > 1"
    )
    conn.execute(
        f"CREATE TEMP TABLE repeated_signatures AS SELECT seq FROM {ATTESTATIONS_TABLE}"
        " WHERE id IN (SELECT id FROM temp.repeated_first)"
        " AND seq NOT IN (SELECT first FROM temp.repeated_first)"
    )
    removed = int(conn.execute("SELECT count(*) FROM temp.repeated_signatures").fetchone()[0])
    conn.execute(
        "DELETE FROM witnessed_keys WHERE att_seq IN (SELECT seq FROM temp.repeated_signatures)"
    )
    conn.execute(
        f"DELETE FROM {ATTESTATIONS_TABLE} WHERE seq IN (SELECT seq FROM temp.repeated_signatures)"
    )
    rows = conn.execute(f"SELECT id FROM {ATTESTATIONS_TABLE}")
    ids = (int.from_bytes(r[0], "little") for r in rows)
    compute_totals(conn, ATTESTATIONS_TABLE, ATTESTATIONS_TABLE, ids)
    conn.execute("DROP TABLE temp.repeated_signatures")
    conn.execute("DROP TABLE temp.repeated_first")
    return removed
