"""Whole-set fingerprints kept beside the data: each synced set's count and sum of tokens.

Sync compares two nodes' sets by a fingerprint of the whole set first (docs/protocol.md).
Computing it from the rows costs a pass over the line — seconds at a million entries — so
each write keeps it up to date instead, in the same transaction as the rows it adds: the
in-sync check of a node that has not changed is then one primary-key read.

A set's row holds ``count``, ``total`` (the sum of its items' tokens mod 2^256, 32 bytes
little-endian) and ``mark``: the highest row number of the set's table when the row was
last brought up to date. A writer that does not maintain the row (an older release writing
the same file) moves the table past the mark; the row is then stale and is computed again
from the rows on the next read (:func:`read_totals`), never trusted. An absent row (a line
made before ledger migration 3) is computed the same way, once.

A token is what an item contributes to fingerprints (``lifeline_mesh/recon/sets.py``,
``token_of``): for an entry ``sha256(id ‖ 0x00 ‖ ts)``, for an item without a version its id.
This module must compute them the same way; a test compares both.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "ENTRIES_SET",
    "SetTotals",
    "bump_totals",
    "compute_totals",
    "entry_token",
    "read_totals",
    "table_mark",
    "totals_for_update",
]

ENTRIES_SET = "entries"
_MOD = 1 << 256

# Ledger migration 3 (lifeline/store/schema.py) creates the table:
#   set_summaries (name TEXT PRIMARY KEY, count INTEGER, total BLOB, mark INTEGER)


@dataclass(frozen=True, slots=True)
class SetTotals:
    """A whole set: how many items, and the sum of their tokens mod 2^256."""

    count: int
    total: int


def entry_token(entry_id: str, ts: str) -> int:
    """An entry's token as an integer (little-endian), as sync's snapshots sum it."""
    digest = hashlib.sha256(bytes.fromhex(entry_id) + b"\x00" + ts.encode("ascii")).digest()
    return int.from_bytes(digest, "little")


def table_mark(conn: sqlite3.Connection, table: str) -> int:
    """The highest row number in ``table`` (0 when empty): one primary-key lookup."""
    row = conn.execute(f"SELECT max(seq) FROM {table}").fetchone()
    return 0 if row[0] is None else int(row[0])


def totals_for_update(conn: sqlite3.Connection, name: str, table: str) -> SetTotals | None:
    """Inside a write transaction, before it changes ``table``: the set's totals when its
    row is up to date (one statement), else None: then :func:`bump_totals` drops the row,
    if any, and the next read computes it from the rows."""
    row = conn.execute(
        f"SELECT count, total, mark = coalesce((SELECT max(seq) FROM {table}), 0)"
        " FROM set_summaries WHERE name = ?",
        (name,),
    ).fetchone()
    if row is None or not row[2]:
        return None
    return SetTotals(int(row[0]), int.from_bytes(row[1], "little"))


def bump_totals(
    conn: sqlite3.Connection,
    name: str,
    before: SetTotals | None,
    *,
    mark: int | None,
    added: Iterable[int] = (),
    removed: Iterable[int] = (),
) -> None:
    """In the same write transaction, after the change: add and remove tokens. ``before``
    is from :func:`totals_for_update`; ``mark`` is the table's highest row number now (None:
    no row was added). A row that was not up to date is dropped rather than patched."""
    if before is None:
        conn.execute("DELETE FROM set_summaries WHERE name = ?", (name,))
        return
    count, total = before.count, before.total
    for token in added:
        total += token
        count += 1
    for token in removed:
        total -= token
        count -= 1
    blob = (total % _MOD).to_bytes(32, "little")
    if mark is None:
        conn.execute(
            "UPDATE set_summaries SET count = ?, total = ? WHERE name = ?", (count, blob, name)
        )
    else:
        conn.execute(
            "UPDATE set_summaries SET count = ?, total = ?, mark = ? WHERE name = ?",
            (count, blob, mark, name),
        )


def read_totals(conn: sqlite3.Connection, name: str, table: str) -> SetTotals | None:
    """The set's totals when its row is up to date, else None (compute them: the caller
    then runs :func:`compute_totals` in a write transaction)."""
    row = conn.execute(
        "SELECT count, total, mark FROM set_summaries WHERE name = ?", (name,)
    ).fetchone()
    if row is None or int(row[2]) != table_mark(conn, table):
        return None
    return SetTotals(int(row[0]), int.from_bytes(row[1], "little"))


def compute_totals(
    conn: sqlite3.Connection, name: str, table: str, tokens: Iterable[int]
) -> SetTotals:
    """Inside a write transaction: the totals of every token of the set, recorded."""
    mark = table_mark(conn, table)
    count = total = 0
    for token in tokens:
        total += token
        count += 1
    totals = SetTotals(count, total % _MOD)
    _write(conn, name, totals, mark)
    return totals


def _write(conn: sqlite3.Connection, name: str, totals: SetTotals, mark: int) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO set_summaries (name, count, total, mark) VALUES (?, ?, ?, ?)",
        (name, totals.count, totals.total.to_bytes(32, "little"), mark),
    )
