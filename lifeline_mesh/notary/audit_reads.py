"""The reads of a streaming audit (``audit.py``): pages of items, lookups by subject and id.

:class:`AuditReads` is what the audit asks of a line, whatever holds it; a line file's are
:class:`SqliteAuditReads`, the functions below run on the store's reader
(``SqlLine.run_read``), and a hub's line's are their PostgreSQL twin
(:mod:`lifeline_mesh.notary.pg_audit_reads`). Each read returns at most one page, so that
the audit of a line holds a bounded part of it at a time.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Hashable, Sequence
from functools import partial
from typing import Any, NamedTuple, Protocol, cast

from lifeline.entry import Entry
from lifeline.store.rows import decode_row
from lifeline.store.sqlite_reads import COLUMNS
from lifeline.store.tiers import SqlLine
from lifeline_mesh.notary.intake import ATTESTATIONS_TABLE, STATEMENTS_TABLE
from lifeline_mesh.notary.provenance import source_findings
from lifeline_mesh.notary.row_writes import has_subject_index
from lifeline_mesh.notary.rules import Finding

__all__ = [
    "BLOB_ITEM",
    "ITEM_PAGE",
    "LOOKUP",
    "REVERSE_PAGE",
    "TABLES",
    "AuditReads",
    "Cursor",
    "DamagedRow",
    "ItemRow",
    "SqliteAuditReads",
    "enrolled_items",
    "held_ids",
    "item_page",
    "items_about",
    "receipts_of",
    "reverse_page",
    "ts_of_ids",
]

ITEM_PAGE = 4_000  # items read, decoded and verified at a time
REVERSE_PAGE = 2_000  # entries a witness walk reads at a time
LOOKUP = 500  # ids per IN (...) lookup
TABLES = (ATTESTATIONS_TABLE, STATEMENTS_TABLE)  # in the order a report lists their items
SUBJECT_KEY = "substr(subject, 1, 16)"  # as the index is declared (storage.SUBJECT_KEY)

ItemRow = tuple[int, bytes, str, str, bytes]  # sort_key, id, role, subject, item
# Where a page ended, handed back to read the next one: the reads' own (a row number, a
# key), opaque to the audit.
Cursor = object


class DamagedRow(NamedTuple):
    """A row whose columns do not hold the types the notary writes (SQLite keeps whatever
    a writer puts in a column): reported and left out, never read as an item (issue 32)."""

    table: str
    seq: int
    subject: str
    wrong: str
    digest: bytes  # sha256 of the item column's bytes: lookups by subject leave it out


# The types the notary writes, in the order of the columns read. Each column is read as
# a blob, so no value stops the read (text that is not UTF-8 would).
_TYPED = ("sort_key", "id", "role", "subject", "node_id", "ts", "item")
_WANT = ("integer", "blob", "text", "text", "text", "text", "blob")
_ITEM_COLUMNS = (
    ", ".join([f"typeof({c})" for c in _TYPED] + [f"CAST({c} AS BLOB)" for c in _TYPED[1:4]])
    + ", CAST(item AS BLOB)"
)
# Only the rows whose item column holds a blob are read back as items elsewhere.
BLOB_ITEM = "typeof(item) = 'blob'"


def _typed_row(table: str, row: tuple[Any, ...]) -> ItemRow | DamagedRow:
    seq, sort_key, types, (eid, role, subject, item) = row[0], row[1], row[2:9], row[9:]
    subject_text = _text(subject)
    wrong = [
        f"{c} holds {t}, not {w}" for c, t, w in zip(_TYPED, types, _WANT, strict=True) if t != w
    ]
    role_text = _text(role)
    if not wrong and (role_text is None or subject_text is None):
        wrong = ["role or subject is not UTF-8 text"]
    if wrong or role_text is None or subject_text is None:
        detail = "; ".join(wrong)
        digest = hashlib.sha256(item if isinstance(item, bytes) else b"").digest()
        return DamagedRow(table, int(seq), subject_text or "", detail, digest)
    return (int(sort_key), bytes(eid), role_text, subject_text, bytes(item))


def _text(value: object) -> str | None:
    if not isinstance(value, bytes):
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None


def item_page(
    conn: sqlite3.Connection, table: str, after: int | None
) -> tuple[list[ItemRow], list[DamagedRow], int | None]:
    """The next :data:`ITEM_PAGE` rows of ``table`` in (sort_key, id) order, after the
    row numbered ``after``: the items, the rows whose columns hold another type than the
    notary writes, and the row number the next page starts after (None at the end)."""
    sql = (
        f"SELECT seq, CASE WHEN typeof(sort_key) = 'integer' THEN sort_key END,"
        f" {_ITEM_COLUMNS} FROM {table}"
    )
    params: tuple[Any, ...] = ()
    if after is not None:
        sql += f" WHERE (sort_key, id) > (SELECT sort_key, id FROM {table} WHERE seq = ?)"
        params = (after,)
    sql += f" ORDER BY sort_key, id LIMIT {ITEM_PAGE}"
    rows = conn.execute(sql, params).fetchall()
    items: list[ItemRow] = []
    damaged: list[DamagedRow] = []
    for row in rows:
        typed = _typed_row(table, row)
        if isinstance(typed, DamagedRow):
            damaged.append(typed)
        else:
            items.append(typed)
    return items, damaged, (int(rows[-1][0]) if rows else None)


def enrolled_items(conn: sqlite3.Connection) -> list[bytes]:
    """Every item stored as an ``enrolled`` statement, in report order."""
    out: list[bytes] = []
    for table in TABLES:
        sql = (
            f"SELECT item FROM {table} WHERE role = 'enrolled' AND {BLOB_ITEM}"
            " ORDER BY sort_key, id"
        )
        out.extend(bytes(r[0]) for r in conn.execute(sql))
    return out


def items_about(
    conn: sqlite3.Connection, table: str, role: str, subjects: Sequence[str]
) -> list[tuple[bytes, bytes]]:
    """(sha256 of the item, item) of the ``role`` items of ``table`` whose subject column
    is one of ``subjects``, in (sort_key, id) order within each lookup."""
    out: list[tuple[bytes, bytes]] = []
    if table == ATTESTATIONS_TABLE and not has_subject_index(conn):
        return _scanned_about(conn, role, subjects)
    for start in range(0, len(subjects), LOOKUP):
        chunk = [s[:16] for s in subjects[start : start + LOOKUP]]
        marks = ",".join("?" * len(chunk))
        sql = (
            f"SELECT item FROM {table} WHERE role = ? AND {SUBJECT_KEY} IN ({marks})"
            f" AND {BLOB_ITEM} ORDER BY sort_key, id"
        )
        for (item,) in conn.execute(sql, [role, *chunk]):
            raw = bytes(item)
            out.append((hashlib.sha256(raw).digest(), raw))
    return out


def _scanned_about(
    conn: sqlite3.Connection, role: str, subjects: Sequence[str]
) -> list[tuple[bytes, bytes]]:
    """:func:`items_about` while a pull into the line has dropped the subject index
    (decision 0150): one pass over the table, not one per lookup."""
    wanted = set(subjects)
    sql = (
        f"SELECT subject, item FROM {ATTESTATIONS_TABLE} WHERE role = ? AND {BLOB_ITEM}"
        " ORDER BY sort_key, id"
    )
    out: list[tuple[bytes, bytes]] = []
    for subject, item in conn.execute(sql, (role,)):
        if subject in wanted:
            raw = bytes(item)
            out.append((hashlib.sha256(raw).digest(), raw))
    return out


def held_ids(conn: sqlite3.Connection, ids: Sequence[str]) -> set[str]:
    """Those of ``ids`` the line stores."""
    found: set[str] = set()
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), LOOKUP):
        chunk = unique[start : start + LOOKUP]
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT id FROM entries WHERE id IN ({marks})"
        found.update(str(r[0]) for r in conn.execute(sql, chunk))
    return found


def ts_of_ids(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, str]:
    """The stored ts of those of ``ids`` the line holds."""
    found: dict[str, str] = {}
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), LOOKUP):
        chunk = unique[start : start + LOOKUP]
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT id, ts FROM entries WHERE id IN ({marks})"
        found.update((str(i), str(t)) for i, t in conn.execute(sql, chunk) if type(t) is str)
    return found


def receipts_of(
    conn: sqlite3.Connection, ids: Sequence[str], known: set[int]
) -> tuple[list[int], list[tuple[int, bytes]]]:
    """The rows (seq) of the receipts whose index names one of ``ids`` (by its 16-character
    key: candidates, the caller checks the receipt's ids), and the items of those not in
    ``known`` (each receipt read once, not once per entry it names)."""
    keys = sorted({i[:16] for i in ids})
    seqs: set[int] = set()
    for start in range(0, len(keys), LOOKUP):
        chunk = keys[start : start + LOOKUP]
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT DISTINCT att_seq FROM witnessed_keys WHERE entry_key IN ({marks})"
        seqs.update(int(r[0]) for r in conn.execute(sql, chunk))
    wanted = sorted(seqs - known)
    items: list[tuple[int, bytes]] = []
    for start in range(0, len(wanted), LOOKUP):
        part = wanted[start : start + LOOKUP]
        marks = ",".join("?" * len(part))
        sql = f"SELECT seq, item FROM attestations WHERE seq IN ({marks}) AND {BLOB_ITEM}"
        items.extend((int(q), bytes(b)) for q, b in conn.execute(sql, part))
    return sorted(seqs), items


def reverse_page(
    conn: sqlite3.Connection, before: tuple[int, str, str] | None
) -> tuple[list[Entry], tuple[int, str, str] | None]:
    """The next entries in reverse stream order (children before parents), damaged rows
    left out as the forward stream leaves them; and where the page ended
    (None at the start of the line)."""
    sql = f"SELECT height, {COLUMNS} FROM entries"
    params: tuple[Any, ...] = ()
    if before is not None:
        sql += " WHERE (height, ts, id) < (?, ?, ?)"
        params = before
    sql += f" ORDER BY height DESC, ts DESC, id DESC LIMIT {REVERSE_PAGE}"
    rows = conn.execute(sql, params).fetchall()
    out: list[Entry] = []
    for row in rows:
        try:
            out.append(decode_row(row[1:]))
        except (ValueError, TypeError):
            continue
    end = (rows[-1][0], rows[-1][3], rows[-1][2]) if len(rows) == REVERSE_PAGE else None
    return out, end


class AuditReads(Protocol):
    """What a streaming audit reads of one line and its notary's tables, a page or a
    lookup at a time (each method's meaning is its SQLite function's, above)."""

    async def enrolled_items(self) -> list[bytes]:
        """Every item stored as an ``enrolled`` statement, in report order."""
        ...

    async def item_page(
        self, table: str, after: Cursor | None
    ) -> tuple[list[ItemRow], list[DamagedRow], Cursor | None]:
        """The next page of ``table``'s items in (sort_key, id) order (:func:`item_page`)."""
        ...

    async def items_about(
        self, table: str, role: str, subjects: Sequence[str]
    ) -> list[tuple[bytes, bytes]]:
        """(sha256, item) of the ``role`` items about ``subjects`` (:func:`items_about`)."""
        ...

    async def held_ids(self, ids: Sequence[str]) -> set[str]:
        """Those of ``ids`` the line stores."""
        ...

    async def ts_of_ids(self, ids: Sequence[str]) -> dict[str, str]:
        """The stored ts of those of ``ids`` the line holds."""
        ...

    async def receipts_of(
        self, ids: Sequence[str], known: set[Hashable]
    ) -> tuple[list[Hashable], list[tuple[Hashable, bytes]]]:
        """The receipts that may name ``ids``, and the items of those not ``known``
        (:func:`receipts_of`; a receipt's key is the reads' own)."""
        ...

    async def reverse_page(self, before: Cursor | None) -> tuple[list[Entry], Cursor | None]:
        """The next entries from the end of the stream (:func:`reverse_page`)."""
        ...

    async def source_findings(self) -> list[Finding]:
        """Who sent what (:func:`lifeline_mesh.notary.provenance.source_findings`)."""
        ...


class SqliteAuditReads:
    """:class:`AuditReads` of a line file: the functions above on its reader."""

    def __init__(self, store: SqlLine) -> None:
        self.store = store

    async def enrolled_items(self) -> list[bytes]:
        return await self.store.run_read(enrolled_items)

    async def item_page(
        self, table: str, after: Cursor | None
    ) -> tuple[list[ItemRow], list[DamagedRow], Cursor | None]:
        seq = cast("int | None", after)
        return await self.store.run_read(lambda c: item_page(c, table, seq))

    async def items_about(
        self, table: str, role: str, subjects: Sequence[str]
    ) -> list[tuple[bytes, bytes]]:
        return await self.store.run_read(lambda c: items_about(c, table, role, subjects))

    async def held_ids(self, ids: Sequence[str]) -> set[str]:
        return await self.store.run_read(partial(held_ids, ids=ids))

    async def ts_of_ids(self, ids: Sequence[str]) -> dict[str, str]:
        return await self.store.run_read(partial(ts_of_ids, ids=ids))

    async def receipts_of(
        self, ids: Sequence[str], known: set[Hashable]
    ) -> tuple[list[Hashable], list[tuple[Hashable, bytes]]]:
        seqs = {k for k in known if isinstance(k, int)}
        found, items = await self.store.run_read(partial(receipts_of, ids=ids, known=seqs))
        return list(found), list(items)

    async def reverse_page(self, before: Cursor | None) -> tuple[list[Entry], Cursor | None]:
        end = cast("tuple[int, str, str] | None", before)
        return await self.store.run_read(partial(reverse_page, before=end))

    async def source_findings(self) -> list[Finding]:
        return await self.store.run_read(source_findings)
