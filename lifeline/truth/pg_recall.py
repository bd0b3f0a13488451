"""Recall's index on PostgreSQL: a hub line's twin of a line file's FTS5 index (decision 0109).

Without it a hub's `recall` read the whole line and scored it (24.7 s at a million entries).
Per line, a partition of ``recall_docs`` (as ``entries`` has one) holds a row for each entry
that has a word: its row number, its length in words, its distinct words and each word's
weighted count (the summary's count :data:`~lifeline.truth.bm25.SUMMARY_WEIGHT` times,
plus the body's), with a GIN index on the words. ``recall_terms`` counts the entries holding
each word, ``recall_mark`` the rows indexed, how many entries and how many words they hold.
The words are the laptop's (:func:`~lifeline.truth.bm25.words`) and the score its BM25
(:class:`~lifeline.truth.bm25.Bm25`) over the same bounds (the newest
:data:`~lifeline.truth.bm25.CANDIDATES` matches and every match of a rare word), so a hub
and a laptop holding the same entries rank them alike.

Brought up to date by its readers, as on a line file (decision 0009): the rows past the
mark, :data:`CHUNK` a transaction, under an advisory lock of the line's own (two readers
take turns; a writer never waits, and never pays for the index); and after a large load,
by the hub process that took it, in the background (:func:`index_after_load`). Nothing
indexed is ever changed: an entry's summary and body are its content, and a hub changes a
stored entry's ts only. A row whose JSON does not decode is left out, as the hub's scan
leaves it out.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lifeline.truth.bm25 import CANDIDATES, SUMMARY_WEIGHT, Bm25, words
from lifeline.truth.progress import FoldProgress, fold_progress
from lifeline.truth.table import SHOWN_FOLD

if TYPE_CHECKING:
    from lifeline.store.pg_schema import Conn, Migrations
    from lifeline.store.postgres import PgStore

__all__ = ["CHUNK", "LONGEST", "PG_RECALL", "catch_up", "index_after_load", "ranked", "term_key"]

log = logging.getLogger(__name__)

CHUNK = 5_000  # rows indexed a transaction
LONGEST = 200  # characters of a word kept as itself (term_key)
_LOCK = 0x12EC411  # pg_advisory_xact_lock(_LOCK, line_id): one catch-up of a line at a time

PG_RECALL: Migrations = {
    "recall": [
        (
            1,
            [
                """CREATE TABLE recall_mark (
                    line_id int PRIMARY KEY,
                    seq     bigint NOT NULL,
                    docs    bigint NOT NULL,
                    length  bigint NOT NULL)""",
                """CREATE TABLE recall_docs (
                    line_id int NOT NULL,
                    seq     bigint NOT NULL,
                    length  int NOT NULL,
                    terms   text[] NOT NULL,
                    counts  int[] NOT NULL,
                    PRIMARY KEY (line_id, seq)
                ) PARTITION BY LIST (line_id)""",
                "CREATE INDEX recall_docs_terms ON recall_docs USING gin (terms)",
                """CREATE TABLE recall_terms (
                    line_id int NOT NULL,
                    term    text COLLATE "C" NOT NULL,
                    n       bigint NOT NULL,
                    PRIMARY KEY (line_id, term))""",
            ],
        )
    ]
}

# The newest matches of any of $2's terms, by row number (the GIN index, or the row
# numbers walked back when the words are common: the planner's choice by their counts).
_NEWEST = (
    "SELECT seq FROM recall_docs WHERE line_id = $1 AND terms && $2::text[]"
    " AND seq < $3 ORDER BY seq DESC LIMIT $4"
)
# Each candidate's entry id, length and weighted count of every query term ($2), in order.
_SCORED = (
    "SELECT e.id, d.length, ARRAY(SELECT coalesce(d.counts[array_position(d.terms, q.t)], 0)"
    " FROM unnest($2::text[]) WITH ORDINALITY AS q(t, k) ORDER BY q.k)"
    " FROM recall_docs d JOIN entries e ON e.line_id = d.line_id AND e.seq = d.seq"
    " WHERE d.line_id = $1 AND d.seq = ANY($3::bigint[])"
)
_NO_END = 2**62


async def _partition(conn: Conn, line_id: int) -> None:
    """The line's partition of ``recall_docs``, made once (under the schema's lock, as a
    line's partition of ``entries`` is)."""
    from lifeline.store.pg_schema import lock_key

    if await conn.fetchval("SELECT to_regclass($1)", f"recall_docs_{line_id}") is not None:
        return
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", lock_key())
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS recall_docs_{int(line_id)}"
            f" PARTITION OF recall_docs FOR VALUES IN ({int(line_id)})"
        )


def term_key(word: str) -> str:
    """How a word is kept: itself, or past :data:`LONGEST` characters (a hash, a blob of
    base64 in a body) ``#`` and its SHA-256, which no word can be (words hold letters and
    digits only). PostgreSQL refuses an index key over ~2.7 kB: one such word would stop
    every row after it from being indexed. Words and queries are kept alike, so a long word
    is found, counted and scored as itself."""
    if len(word) <= LONGEST:
        return word
    return "#" + hashlib.sha256(word.encode("utf-8", "surrogatepass")).hexdigest()


def _indexed(seq: int, doc: str) -> tuple[int, dict[str, int]] | None:
    """An entry's length in words and each word's weighted count; None when its JSON does
    not decode to an entry's fields."""
    try:
        fields = json.loads(doc)
        summary, body = fields["summary"], fields["body"]
    except (ValueError, TypeError, KeyError) as exc:
        log.warning("recall: row %s left out, it does not decode: %s", seq, exc)
        return None
    if not isinstance(summary, str) or not isinstance(body, str):
        return None
    said, rest = words(summary), words(body)
    counts: Counter[str] = Counter()
    weight = int(SUMMARY_WEIGHT)
    for word in said:
        counts[term_key(word)] += weight
    counts.update(map(term_key, rest))
    return len(said) + len(rest), dict(counts)


async def _index_chunk(conn: Conn, line_id: int) -> tuple[int, int, int]:
    """One chunk past the mark, in the caller's transaction: (rows read, mark, line top)."""
    await conn.execute("SELECT pg_advisory_xact_lock($1, $2)", _LOCK, line_id)
    found = await conn.fetchrow(
        "SELECT seq, docs, length FROM recall_mark WHERE line_id = $1", line_id
    )
    mark, docs, length = (0, 0, 0) if found is None else (int(v) for v in found)
    top = int(await conn.fetchval("SELECT next_seq - 1 FROM lines WHERE line_id = $1", line_id))
    rows = await conn.fetch(
        f"SELECT seq, doc FROM entries WHERE line_id = $1 AND seq > $2 ORDER BY seq LIMIT {CHUNK}",
        line_id,
        mark,
    )
    if not rows:
        return 0, mark, top
    seqs, lengths, terms, counts = [], [], [], []
    held: Counter[str] = Counter()
    for seq, doc in rows:
        got = _indexed(int(seq), doc)
        if got is None:
            continue
        n, weights = got
        docs += 1
        length += n
        if weights:
            seqs.append(int(seq))
            lengths.append(n)
            # words hold only letters and digits (bm25.words): a space parts them
            terms.append(" ".join(weights))
            counts.append(" ".join(map(str, weights.values())))
            held.update(weights.keys())
    await conn.execute(
        "INSERT INTO recall_docs (line_id, seq, length, terms, counts)"
        " SELECT $1, u.seq, u.length, string_to_array(u.terms, ' '),"
        " string_to_array(u.counts, ' ')::int[]"
        " FROM unnest($2::bigint[], $3::int[], $4::text[], $5::text[])"
        " AS u(seq, length, terms, counts)",
        line_id,
        seqs,
        lengths,
        terms,
        counts,
    )
    await conn.execute(
        "INSERT INTO recall_terms (line_id, term, n)"
        " SELECT $1, u.term, u.n FROM unnest($2::text[], $3::bigint[]) AS u(term, n)"
        " ON CONFLICT (line_id, term) DO UPDATE SET n = recall_terms.n + excluded.n",
        line_id,
        list(held.keys()),
        list(held.values()),
    )
    mark = int(rows[-1][0])
    await conn.execute(
        "INSERT INTO recall_mark VALUES ($1, $2, $3, $4) ON CONFLICT (line_id)"
        " DO UPDATE SET seq = $2, docs = $3, length = $4",
        line_id,
        mark,
        docs,
        length,
    )
    return len(rows), mark, top


async def catch_up(store: PgStore) -> int:
    """Index every row of the line past the mark, :data:`CHUNK` a transaction (each
    commits: a reader stopped halfway leaves the next less to do). Returns the rows read.
    A long one (after a large load, or the first after the upgrade that adds the index)
    reports its progress as the truth's fold does."""
    async with store.db.pool.acquire() as conn:
        return await _catch_up(conn, store.line_id, fold_progress())


async def index_after_load(conn: Conn, line_id: int) -> None:
    """After a large load (``lifeline.pg_after_load``: the store's background upkeep,
    :mod:`lifeline.store.pg_maintain`, and `migrate-store` before it ends): the rows
    indexed, and the planner told of them."""
    if await _catch_up(conn, line_id, fold_progress()) >= CHUNK:
        await conn.execute(f"ANALYZE recall_docs_{int(line_id)}, recall_terms")


async def _catch_up(conn: Conn, line_id: int, progress: FoldProgress | None) -> int:
    current = await conn.fetchval(
        "SELECT (SELECT seq FROM recall_mark WHERE line_id = $1)"
        " = (SELECT next_seq - 1 FROM lines WHERE line_id = $1)",
        line_id,
    )
    if current:  # the usual read: one row each side, no lock, no transaction
        return 0
    done, start = 0, None
    shown: FoldProgress | None = None
    await _partition(conn, line_id)
    while True:
        async with conn.transaction():
            read, mark, top = await _index_chunk(conn, line_id)
        if not read:
            return done
        done += read
        if start is None:
            start = mark - read  # near enough: row numbers are dense
            shown = progress if top - start >= SHOWN_FOLD else None
        if shown is not None:
            shown(mark - start, top - start)


async def ranked(store: PgStore, terms: Sequence[str], limit: int) -> list[tuple[str, float]]:
    """The best ``limit`` entries for ``terms`` as (id, BM25 score), best first, ties by id:
    the index brought up to date, then read in one snapshot."""
    terms = [term_key(t) for t in terms]
    await catch_up(store)
    line_id = store.line_id
    async with store.read_view() as conn:
        totals = await conn.fetchrow(
            "SELECT docs, length FROM recall_mark WHERE line_id = $1", line_id
        )
        if totals is None or not totals[0]:
            return []
        rows = await conn.fetch(
            "SELECT term, n FROM recall_terms WHERE line_id = $1 AND term = ANY($2::text[])",
            line_id,
            list(terms),
        )
        found = {str(r[0]): int(r[1]) for r in rows}
        held = [found.get(t, 0) for t in terms]
        if not any(held):
            return []
        seqs = await _candidates(conn, line_id, terms, held)
        rows = await conn.fetch(_SCORED, line_id, list(terms), seqs)
    scorer = Bm25(int(totals[0]), int(totals[1]), held)
    return scorer.best(((bytes(r[0]), r[2], int(r[1])) for r in rows), limit)


async def _candidates(
    conn: Conn, line_id: int, terms: Sequence[str], held: Sequence[int]
) -> list[int]:
    """The rows worth scoring, as the FTS5 index bounds them (``recall._bounds``): every
    match when there are at most CANDIDATES; else the newest CANDIDATES and every match of
    a rare word (one in at most CANDIDATES entries)."""
    wanted = [t for t, n in zip(terms, held, strict=True) if n]
    newest = [
        int(r[0]) for r in await conn.fetch(_NEWEST, line_id, wanted, _NO_END, CANDIDATES + 1)
    ]
    if len(newest) <= CANDIDATES:
        return newest
    newest = newest[:CANDIDATES]
    rare = [t for t, n in zip(terms, held, strict=True) if 0 < n <= CANDIDATES]
    if rare:
        older = await conn.fetch(_NEWEST, line_id, rare, newest[-1], len(rare) * CANDIDATES)
        newest.extend(int(r[0]) for r in older)
    return newest
