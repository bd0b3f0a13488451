"""Recall: ranked search over summary and body, every hit anchored to a verified entry.

SQLite FTS5 with BM25 (the summary weighs :data:`SUMMARY_WEIGHT` times the body). The
index is brought up to date when it is read, not when entries are written: before each
query, rows past the last indexed ``seq`` are indexed in one transaction, so rows written by
any path (local writes, sync, other processes) are found and the write path pays nothing
(docs/decisions/0009-write-path.md). User text only ever becomes quoted terms, never FTS
syntax. The abstention floor is relative to the best hit: a hit scoring under ``floor`` times
the best score is dropped, so a query whose words occur in some entry always finds one, and a
query that shares no word with any entry finds nothing (BM25 scores of a small line sit far
below any absolute floor). Scores are reported relative to the best hit (1.0). A hit whose
stored entry no longer matches its id is never served. When this SQLite lacks FTS5 (probed at
import), or ``LIFELINE_RECALL=scan``, the same BM25 runs over a scan of the line (slower, same
answers in kind). A hub's line has the twin of the index in PostgreSQL
(:mod:`lifeline.truth.pg_recall`).
"""

from __future__ import annotations

import json
import os
import sqlite3
from array import array
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Protocol

from lifeline.entry import Entry
from lifeline.store.backend import on_backend
from lifeline.store.port import Store
from lifeline.store.tiers import SqlLine
from lifeline.truth.bm25 import CANDIDATES, SUMMARY_WEIGHT, Bm25, words
from lifeline.truth.reducers import why_excerpt
from lifeline.truth.sections import Hit

if TYPE_CHECKING:
    from lifeline.store.postgres import PgStore
    from lifeline.store.sqlite import SqliteStore

__all__ = [
    "CANDIDATES",
    "DEFAULT_FLOOR",
    "FTS5_AVAILABLE",
    "RECALL_MIGRATIONS",
    "SUMMARY_WEIGHT",
    "Bm25",
    "Bm25Scan",
    "catch_up",
    "hits_for",
    "query_terms",
    "recall",
    "words",
]

DEFAULT_FLOOR = 0.25  # a fraction of the best hit's score, in (0, 1]
MAX_TERMS = 16


def _scan_forced() -> bool:
    """``LIFELINE_RECALL=scan``: every backend ranks by the scan, index or not."""
    return os.environ.get("LIFELINE_RECALL") == "scan"


def _probe_fts5() -> bool:
    if _scan_forced():
        return False
    try:
        sqlite3.connect(":memory:").execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    except sqlite3.OperationalError:
        return False
    return True


FTS5_AVAILABLE = _probe_fts5()

# The recall index in a line (component "recall"; lifeline/store/schema.py, line_schema):
# none where this SQLite lacks FTS5 (recall then scans).
RECALL_MIGRATIONS: list[tuple[int, str]] = (
    []
    if not FTS5_AVAILABLE
    else [
        (
            1,
            """
                CREATE VIRTUAL TABLE recall_fts USING fts5(
                    summary, body, content='entries', content_rowid='seq',
                    tokenize='unicode61 remove_diacritics 2'
                );
                CREATE TRIGGER recall_on_insert AFTER INSERT ON entries BEGIN
                    INSERT INTO recall_fts(rowid, summary, body)
                    VALUES (new.seq, new.summary, new.body);
                END;
                CREATE TRIGGER recall_on_delete AFTER DELETE ON entries BEGIN
                    INSERT INTO recall_fts(recall_fts, rowid, summary, body)
                    VALUES ('delete', old.seq, old.summary, old.body);
                END;
                CREATE TRIGGER recall_on_update AFTER UPDATE OF summary, body ON entries BEGIN
                    INSERT INTO recall_fts(recall_fts, rowid, summary, body)
                    VALUES ('delete', old.seq, old.summary, old.body);
                    INSERT INTO recall_fts(rowid, summary, body)
                    VALUES (new.seq, new.summary, new.body);
                END;
                INSERT INTO recall_fts(recall_fts) VALUES ('rebuild');
                """,
        ),
        (
            2,
            # Off the write path: indexing moves to read time (catch-up past the mark).
            # Updates and deletes only touch rows already indexed: 'delete' of a row
            # that was never inserted would corrupt an external-content index.
            """
                DROP TRIGGER recall_on_insert;
                DROP TRIGGER recall_on_delete;
                DROP TRIGGER recall_on_update;
                CREATE TABLE recall_mark (
                    one INTEGER PRIMARY KEY CHECK (one = 1),
                    seq INTEGER NOT NULL
                );
                INSERT INTO recall_mark VALUES (1, (SELECT coalesce(max(seq), 0) FROM entries));
                CREATE TRIGGER recall_on_delete AFTER DELETE ON entries
                WHEN old.seq <= (SELECT seq FROM recall_mark) BEGIN
                    INSERT INTO recall_fts(recall_fts, rowid, summary, body)
                    VALUES ('delete', old.seq, old.summary, old.body);
                END;
                CREATE TRIGGER recall_on_update AFTER UPDATE OF summary, body ON entries
                WHEN old.seq <= (SELECT seq FROM recall_mark) BEGIN
                    INSERT INTO recall_fts(recall_fts, rowid, summary, body)
                    VALUES ('delete', old.seq, old.summary, old.body);
                    INSERT INTO recall_fts(rowid, summary, body)
                    VALUES (new.seq, new.summary, new.body);
                END;
                """,
        ),
    ]
)


def query_terms(text: str) -> list[str]:
    """The distinct terms of user text, in order, at most :data:`MAX_TERMS`."""
    return list(dict.fromkeys(words(text)))[:MAX_TERMS]


def _fts_query(terms: Sequence[str]) -> str:
    # Terms hold only letters and digits, so quoting makes each a plain phrase.
    return " OR ".join(f'"{t}"' for t in terms)


def _behind(conn: sqlite3.Connection) -> bool:
    """Whether rows were written since the index was last brought up to date."""
    has = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'recall_mark'").fetchone()
    if not has:
        raise LookupError("no recall index in this line")
    mark = conn.execute("SELECT seq FROM recall_mark").fetchone()[0]
    top = conn.execute("SELECT coalesce(max(seq), 0) FROM entries").fetchone()[0]
    return bool(top > mark)


def catch_up(conn: sqlite3.Connection, limit: int | None = None) -> int:
    """Index every row past the mark and advance it (call inside a write transaction);
    with ``limit``, at most that many rows (a background fold in parts:
    node/read_upkeep.py). Returns the rows indexed."""
    mark = conn.execute("SELECT seq FROM recall_mark").fetchone()[0]
    top = conn.execute("SELECT coalesce(max(seq), 0) FROM entries").fetchone()[0]
    if limit is not None:
        top = min(top, mark + limit)  # row numbers: ``limit`` rows or fewer
    if top <= mark:
        return 0
    conn.execute(
        "INSERT INTO recall_fts(rowid, summary, body)"
        " SELECT seq, summary, body FROM entries WHERE seq > ? AND seq <= ? ORDER BY seq",
        (mark, top),
    )
    conn.execute("UPDATE recall_mark SET seq = ?", (top,))
    return int(top - mark)


def _newest(conn: sqlite3.Connection, query: str) -> list[int]:
    """Row numbers of the newest ``CANDIDATES + 1`` matches of ``query`` (no scoring)."""
    return [
        int(r[0])
        for r in conn.execute(
            "SELECT rowid FROM recall_fts WHERE recall_fts MATCH ? ORDER BY rowid DESC LIMIT ?",
            (query, CANDIDATES + 1),
        )
    ]


def _bounds(conn: sqlite3.Connection, terms: Sequence[str]) -> tuple[str, tuple[object, ...]]:
    """The rows worth scoring, as a WHERE clause: every match when there are at most
    :data:`CANDIDATES`; else the newest :data:`CANDIDATES` and every match of a rare word
    (one in at most :data:`CANDIDATES` entries), so an old entry holding the one telling
    word of a query is still found. Scoring every match of words most entries hold (BM25
    then ranks near-ties) took seconds at a million entries."""
    newest = _newest(conn, _fts_query(terms))
    if len(newest) <= CANDIDATES:
        return "", ()
    lo = newest[CANDIDATES - 1]
    rare: set[int] = set()
    for term in terms:
        rows = _newest(conn, _fts_query([term]))
        if len(rows) <= CANDIDATES:
            rare.update(r for r in rows if r < lo)
    if not rare:
        return " AND recall_fts.rowid >= ?", (lo,)
    return (
        " AND recall_fts.rowid >= ? AND (+recall_fts.rowid >= ?"
        " OR +recall_fts.rowid IN (SELECT value FROM json_each(?)))",
        (min(rare), lo, json.dumps(sorted(rare))),
    )


def _fts_rank(
    conn: sqlite3.Connection, terms: Sequence[str], limit: int
) -> list[tuple[str, float]]:
    where, args = _bounds(conn, terms)
    rows = conn.execute(
        f"SELECT e.id, -bm25(recall_fts, {SUMMARY_WEIGHT}, 1.0) AS score FROM recall_fts"
        f" JOIN entries e ON e.seq = recall_fts.rowid WHERE recall_fts MATCH ?{where}"
        " ORDER BY score DESC, e.id LIMIT ?",
        (_fts_query(terms), *args, limit),
    ).fetchall()
    return [(str(i), float(s)) for i, s in rows]


def scan_rank(
    entries: Iterable[Entry], terms: Sequence[str], limit: int
) -> list[tuple[str, float]]:
    """BM25 as FTS5 computes it, over entries (the fallback path)."""
    scan = Bm25Scan(terms)
    for entry in entries:
        scan.add(entry)
    return scan.ranked(limit)


class Bm25Scan:
    """:func:`scan_rank` in one pass: it keeps the line's totals and, for each entry that
    holds a term, its id, term counts and length in flat arrays (~60 bytes an entry), not
    the entries: a hub's recall over a million entries held them all, 3.7 GB."""

    def __init__(self, terms: Sequence[str]) -> None:
        self.terms = list(terms)
        self._wanted = set(self.terms)
        self._docs = 0
        self._length = 0
        self._held = [0] * len(self.terms)  # entries holding each term
        self._ids = bytearray()  # 32 bytes an entry that matches
        self._counts = array("d")  # len(terms) weighted counts an entry that matches
        self._lengths = array("q")

    def add(self, entry: Entry) -> None:
        summary, body = words(entry.summary), words(entry.body)
        length = len(summary) + len(body)
        self._docs += 1
        self._length += length
        if self._wanted.isdisjoint(summary) and self._wanted.isdisjoint(body):
            return
        try:
            raw = bytes.fromhex(entry.id)
        except ValueError:
            raw = b""
        if len(raw) != 32:
            return  # no entry id (a damaged row): never served, so never ranked
        s, b = Counter(summary), Counter(body)
        for k, term in enumerate(self.terms):
            f = SUMMARY_WEIGHT * s[term] + b[term]
            self._counts.append(f)
            if f:
                self._held[k] += 1
        self._ids += raw
        self._lengths.append(length)

    def ranked(self, limit: int) -> list[tuple[str, float]]:
        width = len(self.terms)
        scorer = Bm25(self._docs, self._length, self._held)
        ids, counts = self._ids, self._counts
        return scorer.best(
            (
                (bytes(ids[m * 32 : m * 32 + 32]), counts[m * width : (m + 1) * width], n)
                for m, n in enumerate(self._lengths)
            ),
            limit,
        )


class _Rankers:
    """How a line ranks entries for terms, per backend: FTS5 on a line file opened with
    recall's index, its twin on a hub's database (:mod:`lifeline.truth.pg_recall`), BM25
    over the entries read once elsewhere."""

    def sqlite(self, store: SqliteStore) -> Ranker:
        return partial(_fts_ranked, store) if "recall" in store.schema else partial(_scanned, store)

    def postgres(self, store: PgStore) -> Ranker:
        if "recall" not in store.components or _scan_forced():
            return partial(_scanned, store)
        from lifeline.truth.pg_recall import ranked

        return partial(ranked, store)

    def plain(self, store: Store) -> Ranker:
        return partial(_scanned, store)


Ranker = Callable[[Sequence[str], int], Awaitable[list[tuple[str, float]]]]
_RANKERS = _Rankers()


async def _scanned(store: Store, terms: Sequence[str], limit: int) -> list[tuple[str, float]]:
    scan = Bm25Scan(terms)
    async for entry in store.stream():
        scan.add(entry)
    return scan.ranked(limit)


async def _fts_ranked(store: SqlLine, terms: Sequence[str], limit: int) -> list[tuple[str, float]]:
    index_tx = store.write(catch_up)

    def ranked(conn: sqlite3.Connection) -> list[tuple[str, float]]:
        # one thread hop: the catch-up transaction (if any) and the query together
        if _behind(conn):
            try:
                index_tx()
            except sqlite3.OperationalError as exc:  # e.g. a read-only copy of a line
                raise LookupError(f"cannot bring the recall index up to date: {exc}") from exc
        return _fts_rank(conn, terms, limit)

    try:
        return await store.run_read(ranked)
    except LookupError:
        return await _scanned(store, terms, limit)


async def _rank(store: Store, terms: Sequence[str], limit: int) -> list[tuple[str, float]]:
    return await on_backend(store, _RANKERS)(terms, limit)


class Superseding(Protocol):
    """What recall needs of the truth: whether an entry is superseded."""

    def is_superseded(self, entry_id: str) -> bool: ...


async def hits_for(
    store: Store, truth: Superseding, scored: Sequence[tuple[str, float]], k: int
) -> list[Hit]:
    """The hits of ``scored`` (id, relative score; best first), at most ``k``: each entry
    read and checked against its id at read time, so a tampered one is never served."""
    found = {e.id: e for e in await store.get_many([i for i, _s in scored])}
    hits: list[Hit] = []
    for eid, score in scored:
        entry = found.get(eid)
        if entry is None or not entry.is_intact():
            continue
        summary = " ".join(entry.summary.split())
        excerpt = why_excerpt(entry.body, 300)
        hits.append(Hit(eid, round(score, 4), truth.is_superseded(eid), summary, excerpt))
        if len(hits) == k:
            break
    return hits


async def recall(
    store: Store, truth: Superseding, query: str, *, k: int = 8, floor: float = DEFAULT_FLOOR
) -> list[Hit]:
    """The best ``k`` hits for ``query``, near enough to the best; tampered entries never served.

    ``floor`` is a fraction of the best hit's score (0 keeps every match); each hit's score
    is relative to the best one.
    """
    if not 0.0 <= floor <= 1.0:
        raise ValueError(f"the recall floor is a fraction of the best score; got {floor}")
    terms = query_terms(query)
    if not terms or k <= 0:
        return []
    ranked = await _rank(store, terms, k * 4)
    best = ranked[0][1] if ranked else 0.0
    if best <= 0.0:
        return []
    ranked = [(i, s / best) for i, s in ranked if s >= floor * best]
    return await hits_for(store, truth, ranked, k)
