"""The write side of the SQLite adapter: one batch stored on a connection, inside a write
transaction the caller has begun (``SqliteStore`` runs these on its worker thread, or in
place for a short local write). Pure functions of a ``sqlite3.Connection``: no threads, no
event loop.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple, TypeVar

from lifeline.entry import Entry
from lifeline.store import deferred_ids
from lifeline.store.order import order_batch
from lifeline.store.port import AppendResult
from lifeline.store.rows import stored_height
from lifeline.store.shallow import boundary_heights, leave_boundary
from lifeline.store.summary import ENTRIES_SET, bump_totals, entry_token, totals_for_update

__all__ = [
    "ENTRY_COLUMNS",
    "EntryRow",
    "InTransaction",
    "append_tx",
    "append_within",
    "declare_tx",
    "id_chunks",
    "in_transaction",
    "insert_rows",
]

# A hook run inside a local write's transaction: (connection, entries newly stored).
InTransaction = Callable[[sqlite3.Connection, Sequence[Entry]], None]

T = TypeVar("T")
ROWS_PER_STATEMENT = 1024  # a full statement's text is reused from the statement cache


def insert_rows(
    conn: sqlite3.Connection, head: str, rows: Sequence[Sequence[Any]], returning: str = ""
) -> list[tuple[Any, ...]]:
    """``head VALUES (?, ...), (?, ...), ...``: many rows a statement, not one a call.

    ``executemany`` runs one statement per row and gives up the interpreter lock around
    each; under a busy event-loop thread, winning it back costs up to a switch interval
    (5 ms) a row, so a batch written during a sync crawled (decision
    0014).
    With ``returning`` (column names), the rows actually inserted are returned (``INSERT OR
    IGNORE`` returns none for the rows it ignored).
    """
    if not rows:
        return []
    tail = f" RETURNING {returning}" if returning else ""
    if len(rows) == 1:  # a single local write: no list to flatten
        return conn.execute(_values_sql(head, len(rows[0]), 1) + tail, rows[0]).fetchall()
    width = len(rows[0])
    limit = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width
    per = max(1, min(ROWS_PER_STATEMENT, limit))
    out: list[tuple[Any, ...]] = []
    for start in range(0, len(rows), per):
        chunk = rows[start : start + per]
        sql = _values_sql(head, width, len(chunk)) + tail
        out += conn.execute(sql, [v for row in chunk for v in row]).fetchall()
    return out


@lru_cache(maxsize=64)  # the texts of a few batch sizes (up to ~30 KB each)
def _values_sql(head: str, width: int, count: int) -> str:
    one = "(" + ",".join("?" * width) + ")"
    return f"{head} VALUES {','.join([one] * count)}"


class EntryRow(NamedTuple):
    """One new row of the ``entries`` table, in its column order."""

    seq: int
    id: str
    ts: str
    kind: str
    author: str
    agent: str
    provider: str
    model: str
    summary: str
    body: str
    parents: str  # JSON list of ids
    dedup_key: str | None
    height: int


ENTRY_COLUMNS = ", ".join(EntryRow._fields)


@dataclass(slots=True)
class _Plan:
    """What one batch changes: new rows (numbered), their links, and lowered ts."""

    rows: list[EntryRow] = field(default_factory=list)
    links: list[tuple[int, int]] = field(default_factory=list)  # (parent seq, child seq)
    foreign: list[tuple[str, int]] = field(default_factory=list)  # (external parent, seq)
    lowered: list[str] = field(default_factory=list)  # ids stored with a later ts
    relabelled: list[tuple[str, str, str]] = field(default_factory=list)  # (id, old, new ts)
    new_ts: dict[str, str] = field(default_factory=dict)  # id -> its lowered ts


def append_tx(
    conn: sqlite3.Connection, entries: Sequence[Entry], *, received: bool = False
) -> AppendResult:
    """Store ``entries`` on ``conn`` inside a write transaction already begun: heights,
    row numbers, parent links, the tips, dedup keys and earliest ts (see SqliteStore).

    The dedup keys of new entries become this line's own keys (``own_keys``, what a local
    retry finds), unless the entries were ``received`` from a peer (decision 0115)."""
    # A pull into an empty line goes on with its own lookup of ids; anything else builds
    # the id index it deferred first (decision 0147).
    mapped = received and deferred_ids.settle(conn)
    if not received:
        deferred_ids.ensure_index(conn)
    totals = totals_for_update(conn, ENTRIES_SET, "entries")  # sync's whole-set summary
    plan = _plan(conn, entries)
    if plan.lowered:
        conn.executemany(
            "UPDATE entries SET ts = ? WHERE id = ? AND ts > ?",
            [(plan.new_ts[i], i, plan.new_ts[i]) for i in plan.lowered],
        )
    if plan.rows:
        _insert(conn, entries, _unique_keys(conn, plan.rows), plan)
        if mapped:
            _remember(conn, plan.rows)
        if not received:  # the keys as written: the entries column may have lost one
            own = [(r.dedup_key, r.id) for r in plan.rows if r.dedup_key is not None]
            insert_rows(conn, "INSERT OR IGNORE INTO own_keys (key, id)", own)
    if plan.rows or plan.relabelled:
        bump_totals(
            conn,
            ENTRIES_SET,
            totals,
            mark=plan.rows[-1].seq if plan.rows else None,  # rows are numbered in order
            added=[entry_token(r.id, r.ts) for r in plan.rows]
            + [entry_token(i, new) for i, _, new in plan.relabelled],
            removed=[entry_token(i, old) for i, old, _ in plan.relabelled],
        )
    return AppendResult(tuple(r.id for r in plan.rows), tuple(plan.lowered))


def _remember(conn: sqlite3.Connection, rows: list[EntryRow]) -> None:
    """The rows a pull into an empty line stored, added to its lookup of ids (0147)."""
    key = deferred_ids.key_of
    try:
        insert_rows(conn, deferred_ids.LOOKUP_INSERT, [(key(r.id), r.seq) for r in rows])
    except sqlite3.IntegrityError:
        deferred_ids.clashed(conn)


def declare_tx(conn: sqlite3.Connection, externals: Sequence[tuple[str, str]]) -> None:
    """Declare cross-line parents ``(id, line)`` inside a write transaction: a declaration
    already held is never replaced, and an id this line holds as an entry is none."""
    if not externals:
        return
    held = {r[0] for r in deferred_ids.rows_by_id(conn, "id", sorted({i for i, _ in externals}))}
    conn.executemany(
        "INSERT OR IGNORE INTO externals (id, line) VALUES (?, ?)",
        [(i, line) for i, line in externals if i not in held],
    )


def _plan(conn: sqlite3.Connection, entries: Sequence[Entry]) -> _Plan:
    """Heights from the parents, a row number for each new entry, and its links."""
    own = {e.id for e in entries}
    named = {p for e in entries for p in e.parents}
    # One lookup for heights, row numbers and stored ts; externals only for parents
    # found nowhere else.
    known, stamps, seqs = _lookup(conn, own | named)
    existing_ts = {i: stamps[i] for i in own if i in stamps}
    unresolved = named - own - known.keys()
    if unresolved:  # parents a shallow sync left out: their recorded heights
        known.update(boundary_heights(conn, unresolved))
    externals = _externals_among(conn, unresolved - known.keys()) if unresolved else {}
    plan = _Plan()
    seq = _last_seq(conn) if len(existing_ts) < len(own) else 0
    for entry, height in order_batch(entries, known.get, externals):
        old_ts = existing_ts.get(entry.id)
        if old_ts is not None:
            if entry.ts < old_ts:
                plan.lowered.append(entry.id)
                plan.relabelled.append((entry.id, old_ts, entry.ts))
                existing_ts[entry.id] = plan.new_ts[entry.id] = entry.ts
            continue
        existing_ts[entry.id] = entry.ts
        seq += 1  # rows are numbered here, so links can name them before they exist
        seqs[entry.id] = seq
        plan.rows.append(_row(seq, entry, height))
        for parent in set(entry.parents):
            parent_seq = seqs.get(parent)
            if parent_seq is None:
                plan.foreign.append((parent, seq))
            else:
                plan.links.append((parent_seq, seq))
    return plan


def _row(seq: int, e: Entry, height: int) -> EntryRow:
    return EntryRow(
        seq, e.id, e.ts, e.kind, e.author, e.agent, e.provider, e.model, e.summary, e.body,
        _parents_json(e.parents), e.dedup_key, height,
    )  # fmt: skip


def _unique_keys(conn: sqlite3.Connection, rows: list[EntryRow]) -> list[EntryRow]:
    """``rows`` with a dedup key already stored, or met earlier in the batch, cleared."""
    taken = _taken_keys(conn, [r.dedup_key for r in rows if r.dedup_key is not None])
    seen: set[str] = set()
    out: list[EntryRow] = []
    for row in rows:
        key = row.dedup_key
        if key is not None and (key in taken or key in seen):
            row = row._replace(dedup_key=None)
        elif key is not None:
            seen.add(key)
        out.append(row)
    return out


def _insert(
    conn: sqlite3.Connection, entries: Sequence[Entry], rows: list[EntryRow], plan: _Plan
) -> None:
    """The new rows, their links, and the batch's net effect on the tips."""
    insert_rows(conn, f"INSERT INTO entries ({ENTRY_COLUMNS})", rows)
    insert_rows(conn, "INSERT OR IGNORE INTO links", plan.links)
    insert_rows(conn, "INSERT OR IGNORE INTO foreign_links", plan.foreign)
    # Only the net effect: a chain of 1,000 adds one tip and removes one, instead of
    # 1,000 inserts and 1,000 deletes.
    fresh = {r.id for r in rows}
    parents = {p for e in entries if e.id in fresh for p in e.parents}
    # A shallow line deepened: an entry on its boundary has children held, so no tip.
    parents |= leave_boundary(conn, {r.id: r.height for r in rows})
    conn.executemany(
        "INSERT OR IGNORE INTO tips VALUES (?)", [(i,) for i in fresh if i not in parents]
    )
    conn.executemany("DELETE FROM tips WHERE id = ?", [(p,) for p in parents if p not in fresh])


def in_transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """``fn(conn)`` then COMMIT, inside a transaction already begun; rolled back if either
    fails (a failed COMMIT, e.g. a full disk, must not leave the transaction open)."""
    try:
        result = fn(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result


def _parents_json(parents: tuple[str, ...]) -> str:
    """``json.dumps(list(parents))``, without the encoder for the usual hex ids."""
    if not parents:
        return "[]"
    joined = "".join(parents)
    if joined.isascii() and joined.isalnum():  # nothing to escape
        return '["' + '", "'.join(parents) + '"]'
    return json.dumps(list(parents))


def id_chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _lookup(
    conn: sqlite3.Connection, ids: set[str]
) -> tuple[dict[str, int], dict[str, str], dict[str, int]]:
    """Height, stored ts and row number of those ``ids`` that are stored."""
    heights: dict[str, int] = {}
    stamps: dict[str, str] = {}
    seqs: dict[str, int] = {}
    for eid, height, ts, seq in deferred_ids.rows_by_id(conn, "id, height, ts, seq", sorted(ids)):
        heights[eid] = height if type(height) is int else stored_height(eid, height)
        stamps[eid] = ts
        seqs[eid] = seq
    return heights, stamps, seqs


def _last_seq(conn: sqlite3.Connection) -> int:
    """The highest row number ever given (a deleted last row's number is not reused, as
    with AUTOINCREMENT: readers that remember how far they have read rely on that)."""
    row = conn.execute(
        "SELECT max(coalesce((SELECT max(seq) FROM entries), 0),"
        " coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'entries'), 0))"
    ).fetchone()
    return int(row[0])


def _externals_among(conn: sqlite3.Connection, ids: set[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for chunk in id_chunks(sorted(ids), 500):
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT id, line FROM externals WHERE id IN ({marks})"
        found.update(conn.execute(sql, chunk).fetchall())
    return found


def _taken_keys(conn: sqlite3.Connection, keys: list[str]) -> set[str]:
    taken: set[str] = set()
    for chunk in id_chunks(keys, 500):
        marks = ",".join("?" * len(chunk))
        taken.update(
            r[0]
            for r in conn.execute(
                f"SELECT dedup_key FROM entries WHERE dedup_key IN ({marks})", chunk
            )
        )
    return taken


def append_within(
    within: InTransaction, conn: sqlite3.Connection, entries: Sequence[Entry]
) -> AppendResult:
    """``append_tx``, then ``within`` on the entries it added, in the same transaction."""
    result = append_tx(conn, entries)
    if result.added:
        added = set(result.added)
        within(conn, [e for e in entries if e.id in added])
    return result
