"""Recall's index on PostgreSQL (decision 0109) ranks as a line file's FTS5 index does:
the same ids and scores for the same entries, within the same bounds, kept up to date by
its readers (rows written since, two readers at once, a row that does not decode). Real
PostgreSQL, real SQLite."""

from __future__ import annotations

import asyncio
import random
import string
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.store.pg_lines import pg_append_hooks, pg_components
from lifeline.store.postgres import PgDatabase, PgStore
from lifeline.store.sqlite import SqliteStore
from lifeline.truth import pg_recall
from lifeline.truth import recall as recall_mod
from lifeline.truth.recall import FTS5_AVAILABLE, query_terms
from tests.support.pg_server import fresh_database
from tests.support.truth_ledgers import random_ledger

# A word no index key can hold, and that does not compress (a blob of base64 in a body).
LONG = "".join(random.Random(1).choices(string.ascii_letters + string.digits, k=8000))
UNBOUNDED = recall_mod.CANDIDATES  # more than the corpus: every match scored
QUERIES = [
    "redis",
    "cache redis sessions",
    "routine build note",
    "cafe naive",
    "refund s3 latency",
    "decision thread",
    "nothing like this at all",
    "redis zeppelin",  # a rare word in an old entry: scored beside the newest matches
    LONG,  # a word past any index key's size, in three entries
    LONG + " redis",
]


def _corpus(n: int = 160) -> list[Entry]:
    out = list(random_ledger(5, n))
    words = ["redis", "cache", "sessions", "routine", "build", "note", "refund", "s3"]
    for i in range(n):
        text = " ".join(words[(i * k) % len(words)] for k in range(1, i % 7 + 2))
        out.append(
            Entry.create(
                ts=f"2026-02-01T00:{i // 60:02d}:{i % 60:02d}Z",
                kind="note",
                summary=f"{words[i % len(words)]} item {i}",
                body=f"{text} {'Café naïve ' * (i % 3)}"
                + (" zeppelin" if i == 1 else "")
                + (" " + LONG if i % 70 == 3 else ""),
            )
        )
    return out


@asynccontextmanager
async def _hub_line(url: str, name: str = "l") -> AsyncIterator[PgStore]:
    db = await PgDatabase.connect(url, migrations=pg_components(), after_append=pg_append_hooks())
    try:
        yield await db.line(name)
    finally:
        await db.close()


async def _ranked(store: SqliteStore | PgStore, query: str) -> list[tuple[str, float]]:
    got = await recall_mod._rank(store, query_terms(query), 40)
    return [(i, round(s, 9)) for i, s in got]


async def _docs(store: PgStore) -> tuple[int, int]:
    rows = await store.fetch_line(
        "SELECT (SELECT docs FROM recall_mark WHERE line_id = $1),"
        " (SELECT count(*) FROM recall_docs WHERE line_id = $1)"
    )
    return int(rows[0][0] or 0), int(rows[0][1])


@pytest.mark.parametrize("candidates", [UNBOUNDED, 12])
async def test_a_hub_ranks_as_a_line_file(
    pg_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, candidates: int
) -> None:
    """The same ids, scores and order as FTS5 for the same entries; with a small bound,
    the same newest matches and rare words scored (``recall._bounds``)."""
    if not FTS5_AVAILABLE:
        pytest.skip("this SQLite has no FTS5")
    monkeypatch.setattr(recall_mod, "CANDIDATES", candidates)
    monkeypatch.setattr(pg_recall, "CANDIDATES", candidates)
    corpus = _corpus()
    laptop = await SqliteStore.open(tmp_path / "l.db")
    await laptop.append_many(corpus)
    async with _hub_line(await fresh_database(pg_server)) as hub:
        await hub.append_many(corpus)
        for query in QUERIES:
            expected = await _ranked(laptop, query)
            assert await _ranked(hub, query) == expected, query
            if candidates == UNBOUNDED:  # no bound reached: the scan agrees
                assert await _ranked_by_scan(hub, query) == expected, query
        assert await _ranked(hub, "redis"), "the corpus holds the word"
        old = [e.id for e in corpus if "zeppelin" in e.body]
        assert old[0] in [i for i, _s in await _ranked(hub, "redis zeppelin")]
        long = [e.id for e in corpus if LONG in e.body]
        assert sorted(i for i, _s in await _ranked(hub, LONG)) == sorted(long)
        assert await _docs(hub) == (await laptop.count(), await laptop.count())
    await laptop.close()


async def test_rows_written_since_are_found_and_indexed_once(pg_server: str) -> None:
    corpus = _corpus(60)
    url = await fresh_database(pg_server)
    async with _hub_line(url) as hub, _hub_line(url) as other:
        await hub.append_many(corpus[:50])
        assert await _ranked(hub, "zebra") == []
        fresh = Entry.create(ts="2026-03-01T00:00:00Z", kind="note", summary="zebra", body="x")
        await hub.append_many([*corpus[50:], fresh])
        # two readers of two processes' pools bring the index up at once: each row once
        first, second = await asyncio.gather(_ranked(hub, "zebra"), _ranked(other, "zebra"))
        assert first == second and [i for i, _s in first] == [fresh.id]
        total = await hub.count()
        assert await _docs(hub) == (total, total)
        # nothing new: nothing read again
        assert await pg_recall.catch_up(hub) == 0


async def test_a_row_that_does_not_decode_is_left_out(pg_server: str) -> None:
    corpus = _corpus(30)
    async with _hub_line(await fresh_database(pg_server)) as hub:
        await hub.append_many(corpus)
        victim = corpus[3]
        async with hub.transaction() as conn:
            await conn.execute(
                "UPDATE entries SET doc = '{not json' WHERE line_id = $1 AND id = $2",
                hub.line_id,
                bytes.fromhex(victim.id),
            )
        hits = await _ranked(hub, victim.summary)
        assert victim.id not in [i for i, _s in hits]
        docs, _rows = await _docs(hub)
        assert docs == len(corpus) - 1


async def _ranked_by_scan(store: PgStore, query: str) -> list[tuple[str, float]]:
    got = await recall_mod._scanned(store, query_terms(query), 40)
    return [(i, round(s, 9)) for i, s in got]
