"""The viewer's search: recall's ranking (FTS5 BM25, the summary weighing more than the body),
bounded so that a query whose words nearly every entry holds still costs a page's time.

Ranking every match by BM25 costs about as much per match as the rest of a page does in
all: a query matching 100k entries took 277 ms (decision 0028). So:

- **Matches are counted up to** :data:`COUNT_CAP`: the page says "1,234 entries match" or
  "more than 10,000 entries match", never counting a whole line.
- **At most** :data:`RANK_ALL` **matches: every one is ranked**, the order of ``lifeline
  recall`` (score, then id).
- **More: BM25 ranks a bounded set of candidates**: every match of the query's selective
  words (each word's matches counted up to :data:`RANK_ALL`; rarest first, while their sum
  stays within :data:`RANK_ALL`) and the :data:`NEWEST` newest matches of the whole query.
  A word held by most entries adds next to nothing to a BM25 score (its IDF is floored near
  zero), so the entries that hold a rare word come first as they would in a full ranking,
  and among the rest, where BM25 barely orders anything, the newest are the ones kept.

Hits are anchored as recall anchors them (an entry whose stored form no longer matches its
id is never shown) and weak hits are left out the same way (under ``floor`` times the best
score). Without FTS5, or on a copy whose index cannot be brought up to date, the search is
recall's scan (the whole line read), its hits counted.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from lifeline.store.sqlite import SqliteStore
from lifeline.truth.recall import (
    DEFAULT_FLOOR,
    FTS5_AVAILABLE,
    SUMMARY_WEIGHT,
    catch_up,
    hits_for,
    query_terms,
    recall,
)
from lifeline.truth.sections import Hit
from lifeline.truth.views import Truth

__all__ = ["COUNT_CAP", "KEPT", "NEWEST", "PAGE", "RANK_ALL", "Found", "RankCache", "search"]

COUNT_CAP = 10_000  # matches counted at most
RANK_ALL = 2_000  # up to this many matches, every one is ranked
NEWEST = 1_000  # beyond: the newest matches ranked with the selective words' matches
PAGE = 20  # hits a page
MAX_PAGES = 50  # pages offered; a reader refines the query instead
KEPT = 16  # rankings kept per line (RankCache)

_SCORE = f"-bm25(recall_fts, {SUMMARY_WEIGHT}, 1.0)"


@dataclass(frozen=True, slots=True)
class Found:
    """One page of hits and what was searched to find them."""

    hits: list[Hit]
    matches: int  # entries holding any of the words, counted up to COUNT_CAP
    more_than: bool  # more than COUNT_CAP entries match
    ranked_all: bool  # every match was ranked (else a bounded set: see the module)
    selective: tuple[str, ...]  # when not ranked_all: the words whose every match was ranked
    has_next: bool  # another page of hits follows
    newest: int = NEWEST  # when not ranked_all: how many of the newest matches were ranked


def _phrases(terms: Sequence[str]) -> str:
    # Terms hold only letters and digits (query_terms), so quoting makes each a phrase.
    return " OR ".join(f'"{t}"' for t in terms)


def _count(conn: sqlite3.Connection, match: str, cap: int) -> int:
    row = conn.execute(
        "SELECT count(*) FROM (SELECT rowid FROM recall_fts WHERE recall_fts MATCH ? LIMIT ?)",
        (match, cap),
    ).fetchone()
    return int(row[0])


def _behind(conn: sqlite3.Connection) -> bool:
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'recall_mark'").fetchone():
        raise LookupError("no recall index in this line")
    mark = conn.execute("SELECT seq FROM recall_mark").fetchone()[0]
    top = conn.execute("SELECT coalesce(max(seq), 0) FROM entries").fetchone()[0]
    return bool(top > mark)


@dataclass(frozen=True, slots=True)
class _Ranked:
    scored: list[tuple[str, float]]  # (entry id, score), best first
    matches: int
    ranked_all: bool
    selective: tuple[str, ...]


def _rank(conn: sqlite3.Connection, terms: Sequence[str]) -> _Ranked:
    """The candidates scored, best first (ties by id, as recall breaks them)."""
    query = _phrases(terms)
    matches = _count(conn, query, COUNT_CAP + 1)
    chosen: list[str] = []
    if matches <= RANK_ALL:
        rows = conn.execute(
            f"SELECT rowid, {_SCORE} FROM recall_fts WHERE recall_fts MATCH ?", (query,)
        ).fetchall()
    else:
        counted = sorted((_count(conn, _phrases([t]), RANK_ALL + 1), t) for t in terms)
        total = 0
        for n, term in counted:
            if total + n > RANK_ALL:
                break
            if n:  # a word no entry holds adds no candidate (and is not named on the page)
                chosen.append(term)
                total += n
        rows = conn.execute(
            f"SELECT rowid, {_SCORE} FROM recall_fts WHERE recall_fts MATCH ?"
            " ORDER BY rowid DESC LIMIT ?",
            (query, NEWEST),
        ).fetchall()
        if chosen:
            rows += conn.execute(
                f"SELECT rowid, {_SCORE} FROM recall_fts WHERE recall_fts MATCH ? AND rowid IN"
                " (SELECT rowid FROM recall_fts WHERE recall_fts MATCH ?)",
                (query, _phrases(chosen)),
            ).fetchall()
    score = dict(rows)
    ids = conn.execute(
        "SELECT seq, id FROM entries WHERE seq IN (SELECT value FROM json_each(?))",
        (json.dumps(list(score)),),
    ).fetchall()
    scored = sorted(((str(i), float(score[s])) for s, i in ids), key=lambda h: (-h[1], h[0]))
    return _Ranked(scored, matches, matches <= RANK_ALL, tuple(chosen))


class RankCache:
    """The last KEPT rankings of a line, by query words and the line's state (its highest
    row and the generation its triggers raise when a row changes or goes).

    BM25 counts every entry that holds each of the query's words, on every query: for a
    word most entries hold, that is a walk over most of the line (~60 ms a word at 1M
    entries, however few hits are scored). So a ranking is kept: the next page of hits, the
    same query again, a reader going back, read it from here until the line changes."""

    def __init__(self) -> None:
        self._held: dict[tuple[tuple[str, ...], tuple[int, int]], _Ranked] = {}

    def get(self, terms: Sequence[str], key: tuple[int, int]) -> _Ranked | None:
        return self._held.get((tuple(terms), key))

    def put(self, terms: Sequence[str], key: tuple[int, int], ranked: _Ranked) -> None:
        self._held.pop((tuple(terms), key), None)
        self._held[(tuple(terms), key)] = ranked
        while len(self._held) > KEPT:
            del self._held[next(iter(self._held))]  # the oldest first


def _state(conn: sqlite3.Connection) -> tuple[int, int]:
    top = conn.execute("SELECT coalesce(max(seq), 0) FROM entries").fetchone()[0]
    try:
        gen = conn.execute("SELECT n FROM truth_generation").fetchone()
    except sqlite3.OperationalError:  # no truth tables: the highest row alone
        gen = None
    return int(top), int(gen[0]) if gen else -1


async def _ranked(
    store: SqliteStore, terms: Sequence[str], cache: RankCache | None = None
) -> _Ranked:
    index_tx = store.write(catch_up)

    def ranked(conn: sqlite3.Connection) -> _Ranked:
        # one thread hop: the index's catch-up (if rows arrived) and the queries together
        if _behind(conn):
            try:
                index_tx()
            except sqlite3.OperationalError as exc:  # e.g. a read-only copy of a line
                raise LookupError(f"cannot bring the recall index up to date: {exc}") from exc
        if cache is None:
            return _rank(conn, terms)
        key = _state(conn)
        found = cache.get(terms, key)
        if found is None:
            found = _rank(conn, terms)
            cache.put(terms, key, found)
        return found

    return await store.run_read(ranked)


async def search(
    store: SqliteStore,
    truth: Truth,
    query: str,
    *,
    page: int = 0,
    floor: float = DEFAULT_FLOOR,
    cache: RankCache | None = None,
) -> Found:
    """Page ``page`` (from 0) of the hits for ``query`` (its ranking kept in ``cache``)."""
    terms = query_terms(query)
    if not terms:
        return Found([], 0, False, True, (), False)
    try:
        if not FTS5_AVAILABLE:
            raise LookupError("no FTS5 in this SQLite")
        ranked = await _ranked(store, terms, cache)
    except LookupError:
        every = await recall(store, truth, query, k=PAGE * MAX_PAGES, floor=floor)
        part = every[page * PAGE : (page + 1) * PAGE]
        return Found(part, len(every), False, True, (), len(every) > (page + 1) * PAGE)
    best = ranked.scored[0][1] if ranked.scored else 0.0
    if best <= 0.0:
        return Found([], ranked.matches, False, ranked.ranked_all, ranked.selective, False)
    kept = [(i, s / best) for i, s in ranked.scored if s >= floor * best]
    start = page * PAGE
    shown = kept[start : start + PAGE]
    hits = await hits_for(store, truth, shown, PAGE)
    return Found(
        hits,
        min(ranked.matches, COUNT_CAP),
        ranked.matches > COUNT_CAP,
        ranked.ranked_all,
        ranked.selective,
        len(kept) > start + PAGE and page + 1 < MAX_PAGES,
        NEWEST,
    )
