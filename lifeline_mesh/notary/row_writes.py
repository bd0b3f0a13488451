"""Attestations written as rows: a batch split by table, what is held skipped, each
table's whole-set fingerprint kept in the same transaction (lifeline_mesh/notary/storage.py
uses these inside its write transactions)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from lifeline.store.sqlite_writes import insert_rows
from lifeline.store.summary import bump_totals, totals_for_update
from lifeline_mesh.notary.intake import ATTESTATIONS_TABLE, STATEMENTS_TABLE
from lifeline_mesh.notary.statement import IN_ATTESTATIONS, Attestation, Role

__all__ = [
    "ENTRY_KEY_CHARS",
    "SUBJECT_INDEX",
    "chunks",
    "ensure_subject_index",
    "has_subject_index",
    "insert_attestations",
    "is_empty",
]

ENTRY_KEY_CHARS = 16
# The signatures found by role and entry; a pull into an empty line builds it at its end
# (notary/deferred_index.py, decision 0150)
SUBJECT_INDEX = "attestations_subject_key"
SUBJECT_INDEX_SQL = (
    f"CREATE INDEX IF NOT EXISTS {SUBJECT_INDEX}"
    f" ON {ATTESTATIONS_TABLE}(role, substr(subject, 1, {ENTRY_KEY_CHARS}))"
)
_CHUNK = 500


def chunks(
    items: Sequence[str] | Sequence[bytes] | Sequence[int], size: int = _CHUNK
) -> Iterable[list[object]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def _rows(atts: Sequence[Attestation]) -> list[tuple[object, ...]]:
    return [(a.id, a.sort_key, a.role.value, a.subject, a.node_id, a.ts, a.item) for a in atts]


def _insert_counted(
    conn: sqlite3.Connection, table: str, atts: Sequence[Attestation], after_seq: int
) -> int:
    """Insert into ``table``, keeping its whole-set fingerprint in the same transaction.

    ``INSERT OR IGNORE`` without ``RETURNING``: a statement that returns a row per insert
    gives up the interpreter lock once a row to hand it back, and winning the lock again
    from a busy event loop made the signatures of an initial sync the slowest write of
    the session (decision 0065; the same convoy as decision 0014's ``executemany``). When
    it added fewer rows than it was given, the ids of those it did add are read back by
    row number (new rows are numbered past every number given before): an item already held
    is found by the insert's own step down the id index, not by a lookup of every id
    first, which cost a second step down it for each (decision 0108).
    """
    totals = totals_for_update(conn, table, table)
    fresh = list({a.id: a for a in atts}.values())  # an item twice in a batch: once
    if not fresh:
        return 0
    insert_rows(
        conn,
        f"INSERT OR IGNORE INTO {table} (id, sort_key, role, subject, node_id, ts, item)",
        _rows(fresh),
    )
    # The rows just added, counted where they are (the last pages written, in the cache).
    sql = f"SELECT count(*) FROM {table} WHERE seq > ?"
    added = int(conn.execute(sql, (after_seq,)).fetchone()[0])
    if added == 0:
        return 0
    if added < len(fresh):
        inserted = _ids_after(conn, table, after_seq)
        fresh = [a for a in fresh if a.id in inserted]
    mark = int(conn.execute(f"SELECT max(seq) FROM {table}").fetchone()[0])
    tokens = (int.from_bytes(a.id, "little") for a in fresh)
    bump_totals(conn, table, totals, mark=mark, added=tokens)
    return len(fresh)


def _last_seq(conn: sqlite3.Connection, table: str) -> int:
    """The highest row number ``table`` ever gave (AUTOINCREMENT never gives one again)."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
    return int(row[0]) if row else 0


def _ids_after(conn: sqlite3.Connection, table: str, seq: int) -> set[bytes]:
    """The ids of ``table``'s rows numbered past ``seq``: those this transaction added."""
    return {bytes(r[0]) for r in conn.execute(f"SELECT id FROM {table} WHERE seq > ?", (seq,))}


def insert_attestations(conn: sqlite3.Connection, atts: Sequence[Attestation]) -> int:
    """Attestations into their tables (first wave's and statements), each table's
    fingerprint kept, witness receipts indexed by the entries they name."""
    if any(a.role is Role.SEALED for a in atts):  # kept apart, with spans (notary/seals.py)
        raise ValueError("a seal is no member of a set: store it with seals.keep_seals")
    added = 0
    first = [a for a in atts if a.role in IN_ATTESTATIONS]
    after_seq = _last_seq(conn, ATTESTATIONS_TABLE)
    if first:
        added += _insert_counted(conn, ATTESTATIONS_TABLE, first, after_seq)
    if len(first) < len(atts):
        others = [a for a in atts if a.role not in IN_ATTESTATIONS]
        added += _insert_counted(conn, STATEMENTS_TABLE, others, _last_seq(conn, STATEMENTS_TABLE))
    # Witness receipts indexed by the entries they name: admission looks up when an entry
    # was seen, the MCP server which receipts name an entry. Those this insert added are
    # found by row number, as counted (a receipt held before has its keys already); the id
    # index may wait to be built (decision 0143).
    if any(a.role is Role.WITNESS for a in first):
        sql = "SELECT id, seq FROM attestations WHERE seq > ? AND role = 'witness'"
        seqs = {bytes(i): int(n) for i, n in conn.execute(sql, (after_seq,))}
        insert_rows(
            conn,
            "INSERT OR IGNORE INTO witnessed_keys",
            [
                (e[:ENTRY_KEY_CHARS], seq)
                for a in first
                if a.role is Role.WITNESS and (seq := seqs.get(a.id)) is not None
                for e in a.extras
            ],
        )
    return added


def is_empty(conn: sqlite3.Connection, table: str) -> bool:
    """Whether ``table`` has no row (one step of its primary key): a line receiving its
    first entries, or receipts it never had, needs no lookup of either."""
    return conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is None


def has_subject_index(conn: sqlite3.Connection) -> bool:
    """Whether the signatures' subject index is there (a pull may have dropped it)."""
    sql = "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?"
    return conn.execute(sql, (SUBJECT_INDEX,)).fetchone() is not None


def ensure_subject_index(conn: sqlite3.Connection) -> None:
    """Inside a write transaction about to look signatures up by entry: the subject index
    a pull dropped built now, so that each lookup is not a scan (decision 0150)."""
    if not has_subject_index(conn):
        conn.execute(SUBJECT_INDEX_SQL)
