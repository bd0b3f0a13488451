"""Recall: BM25 weighting, safe queries, abstention, superseded marks, anchoring, fallback."""

from __future__ import annotations

import dataclasses
import sqlite3
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.store.memory import MemoryStore
from lifeline.store.sqlite import SqliteStore
from lifeline.truth import recall as recall_mod
from lifeline.truth.recall import FTS5_AVAILABLE, query_terms, recall, scan_rank
from lifeline.truth.service import read_truth

FILLER = [f"routine note number {i} about the build" for i in range(20)]


def _corpus() -> list[Entry]:
    out = [
        Entry.create(ts=f"2026-01-01T00:00:{i:02d}Z", kind="note", summary=s, body="plain text")
        for i, s in enumerate(FILLER)
    ]
    out.append(
        Entry.create(
            ts="2026-01-02T00:00:00Z", kind="decision", summary="Cache: Redis", body="fast sessions"
        )
    )
    out.append(
        Entry.create(
            ts="2026-01-02T00:00:01Z",
            kind="note",
            summary="meeting notes",
            body="we talked about redis once",
        )
    )
    out.append(
        Entry.create(
            ts="2026-01-02T00:00:02Z",
            kind="correction",
            summary="Cache: Memcached",
            body="replaces redis",
            parents=(out[-2].id,),
        )
    )
    out.append(
        Entry.create(
            ts="2026-01-02T00:00:03Z", kind="note", summary="Café naïve résumé", body="accents"
        )
    )
    return out


@pytest.fixture(params=["fts", "scan"])
async def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    if request.param == "fts" and not FTS5_AVAILABLE:
        pytest.skip("this SQLite has no FTS5")
    if request.param == "scan":
        monkeypatch.setattr(recall_mod, "FTS5_AVAILABLE", False)  # the fallback path, forced
    s = await SqliteStore.open(tmp_path / "l.db")
    await s.append_many(_corpus())
    yield s
    await s.close()


async def _hits(store: SqliteStore, query: str, **kw: float) -> list[tuple[str, bool]]:
    truth = (await read_truth(store)).truth
    return [(h.summary, h.superseded) for h in await recall(store, truth, query, **kw)]


async def test_summary_outweighs_body_and_superseded_is_marked(store: SqliteStore) -> None:
    hits = await _hits(store, "redis")
    assert hits[0] == ("Cache: Redis", True)  # in the summary: first, and marked superseded
    assert ("Cache: Memcached", False) in hits and ("meeting notes", False) in hits


async def test_user_text_never_becomes_search_syntax(store: SqliteStore) -> None:
    for text in [
        'redis" OR "',
        "redis AND NOT x",
        "redis*",
        "summary:redis",
        "(redis",
        "NEAR(redis sessions, 2)",
        "redis -x ^y",
    ]:
        hits = await _hits(store, text)
        assert hits and hits[0][0] == "Cache: Redis", text
    assert await _hits(store, '"" * ) ( :') == []
    assert query_terms('a"b OR c*') == ["a", "b", "or", "c"]


async def test_accents_fold(store: SqliteStore) -> None:
    assert (await _hits(store, "cafe naive"))[0][0] == "Café naïve résumé"


async def test_abstention_floor_is_relative_to_the_best_hit(store: SqliteStore) -> None:
    common = await _hits(store, "routine build note")  # in every filler: still found
    assert common and all(summary.startswith("routine note number") for summary, _s in common)
    assert await _hits(store, "nothing like this") == []  # shares no word: nothing
    truth = (await read_truth(store)).truth
    ranked = await recall(store, truth, "redis", floor=0.0)
    assert ranked[0].score == 1.0 and all(0.0 < h.score <= 1.0 for h in ranked)
    assert len(await recall(store, truth, "redis", floor=1.0)) < len(ranked)
    with pytest.raises(ValueError, match="fraction of the best score"):
        await recall(store, truth, "redis", floor=1.5)


async def test_tampered_entry_is_never_served(store: SqliteStore) -> None:
    def tamper(conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE entries SET body = 'memcached is evil' WHERE summary = 'Cache: Redis'")

    await store.run_write(tamper)
    assert all(summary != "Cache: Redis" for summary, _s in await _hits(store, "redis"))


async def test_a_row_whose_id_is_no_id_is_never_served(store: SqliteStore) -> None:
    def garble(conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE entries SET id = 'not-an-id' WHERE summary = 'Cache: Redis'")

    await store.run_write(garble)
    hits = await _hits(store, "redis")
    assert hits and all(summary != "Cache: Redis" for summary, _s in hits)
    # the scan itself, handed such an entry (a hub's row decodes it as it is): not ranked
    good = _corpus()[0]
    bad = dataclasses.replace(good, id="not-an-id")
    assert [i for i, _s in scan_rank([good, bad], query_terms(good.summary), 5)] == [good.id]


def test_scan_rank_matches_fts5_ordering() -> None:
    if not FTS5_AVAILABLE:
        pytest.skip("this SQLite has no FTS5")
    corpus = _corpus()
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE f USING fts5(summary, body, tokenize='unicode61 remove_diacritics 2')"
    )
    conn.executemany(
        "INSERT INTO f(rowid, summary, body) VALUES (?, ?, ?)",
        [(n, e.summary, e.body) for n, e in enumerate(corpus)],
    )
    rows = conn.execute(
        "SELECT rowid, -bm25(f, 3.0, 1.0) FROM f WHERE f MATCH '\"redis\"' ORDER BY 2 DESC"
    ).fetchall()
    fts = [(corpus[r].id, round(s, 6)) for r, s in rows]
    scan = [(i, round(s, 6)) for i, s in scan_rank(corpus, ["redis"], 10)]
    assert sorted(fts, key=lambda h: (-h[1], h[0])) == scan


def test_a_scan_holds_its_matches_not_the_line() -> None:
    """The scan a hub's recall runs keeps the counts of the entries that match, not every
    entry read (a million held whole took 3.7 GB)."""

    def line(every: int) -> Iterator[Entry]:
        for n in range(8_000):
            body = "lorem ipsum dolor sit amet " * 30 + " redis" * (n % 3 + 1) * (n % every == 0)
            yield Entry.create(ts="2026-01-01T00:00:00Z", kind="note", summary=f"n{n}", body=body)

    for every, matches in ((400, 20), (1, 8_000)):  # a rare word, and a word in every entry
        tracemalloc.start()
        try:
            hits = scan_rank(line(every), ["redis"], 50)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert len(hits) == min(matches, 50) and peak < 2_000_000, (every, peak)
        assert hits == sorted(hits, key=lambda h: (-h[1], h[0]))


async def test_memory_store_uses_the_scan() -> None:
    store = MemoryStore()
    await store.append_many(_corpus())
    truth = (await read_truth(store)).truth
    hits = await recall(store, truth, "memcached")
    assert hits[0].summary == "Cache: Memcached"
