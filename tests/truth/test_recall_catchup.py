"""Recall indexes at read time: entries written after a recall are found by the next one,
and a line created under recall schema v1 (index kept by an insert trigger) keeps working."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.store import schema
from lifeline.store.sqlite import SqliteStore
from lifeline.truth.recall import FTS5_AVAILABLE, recall
from lifeline.truth.service import read_truth

pytestmark = pytest.mark.skipif(not FTS5_AVAILABLE, reason="this SQLite has no FTS5")


def _note(n: int, summary: str, body: str = "plain") -> Entry:
    return Entry.create(ts=f"2026-01-01T00:00:{n:02d}Z", kind="note", summary=summary, body=body)


async def _summaries(store: SqliteStore, query: str) -> list[str]:
    truth = (await read_truth(store)).truth
    return [h.summary for h in await recall(store, truth, query, floor=0.0)]


def _fts_state(conn: sqlite3.Connection) -> tuple[int, int, int]:
    mark = conn.execute("SELECT seq FROM recall_mark").fetchone()[0]
    top = conn.execute("SELECT max(seq) FROM entries").fetchone()[0]
    # integrity-check raises if the index is damaged; with rank 1 (only meaningful once
    # caught up) also if it disagrees with the entries table it indexes
    check = "('integrity-check', 1)" if mark == top else "('integrity-check', 0)"
    conn.execute(f"INSERT INTO recall_fts(recall_fts, rank) VALUES {check}")
    indexed = conn.execute("SELECT count(*) FROM recall_fts_docsize").fetchone()[0]
    return mark, top, indexed


async def test_entries_appended_after_a_recall_are_found(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path / "l.db") as store:
        await store.append_many([_note(1, "alpha gateway"), _note(2, "beta queue")])
        assert await _summaries(store, "gateway") == ["alpha gateway"]
        assert await store.run_read(_fts_state) == (2, 2, 2)
        await store.append(_note(3, "gamma gateway"))
        assert (await store.run_read(_fts_state))[2] == 2  # the write did not index
        assert sorted(await _summaries(store, "gateway")) == ["alpha gateway", "gamma gateway"]
        assert await store.run_read(_fts_state) == (3, 3, 3)


async def test_edits_of_unindexed_and_indexed_rows_keep_the_index_sound(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path / "l.db") as store:
        await store.append_many([_note(1, "alpha"), _note(2, "beta")])
        await _summaries(store, "alpha")  # rows 1-2 indexed
        await store.append(_note(3, "gamma"))

        def edit(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE entries SET summary = 'alpha two' WHERE seq = 1")  # indexed
            conn.execute("UPDATE entries SET summary = 'gamma two' WHERE seq = 3")  # not yet
            conn.execute("DELETE FROM entries WHERE seq = 2")

        await store.run_write(edit)
        assert await _summaries(store, "two") == []  # edited rows no longer match their ids
        assert await _summaries(store, "beta") == []
        assert await store.run_read(_fts_state) == (3, 3, 2)


async def test_line_from_recall_v1_keeps_working(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    v1 = [m for m in schema.line_schema()["recall"] if m[0] == 1]
    # the line as a release with recall v1 made it
    async with await SqliteStore.open(path, schema={**schema.line_schema(), "recall": v1}) as old:
        await old.append_many([_note(1, "alpha gateway"), _note(2, "beta queue")])
        assert (
            await old.run_read(
                lambda c: c.execute("SELECT count(*) FROM recall_fts_docsize").fetchone()[0]
            )
            == 2
        )  # indexed by the v1 trigger at write time
    async with await SqliteStore.open(path) as store:
        versions = await store.run_read(
            lambda c: c.execute(
                "SELECT version FROM schema_migrations WHERE component = 'recall'"
            ).fetchall()
        )
        assert sorted(v for (v,) in versions) == [1, 2]
        assert await store.run_read(_fts_state) == (2, 2, 2)  # mark starts past v1's rows
        await store.append(_note(3, "gamma gateway"))
        assert sorted(await _summaries(store, "gateway")) == ["alpha gateway", "gamma gateway"]
        assert await _summaries(store, "queue") == ["beta queue"]
        assert await store.run_read(_fts_state) == (3, 3, 3)
