"""Recall scores a bounded set of rows: every match when there are few, else the newest
``CANDIDATES`` matches and every match of a rare word (decision 0026)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.store.sqlite import SqliteStore
from lifeline.truth import recall as recall_mod
from lifeline.truth.recall import FTS5_AVAILABLE, recall
from lifeline.truth.snapshot import truth_source

pytestmark = pytest.mark.skipif(not FTS5_AVAILABLE, reason="this SQLite has no FTS5")


def _line() -> list[Entry]:
    out = [
        Entry.create(
            ts="2026-01-01T00:00:00Z",
            kind="note",
            summary="zanzibar refund",
            body="the one old entry with the telling word",
        )
    ]
    for i in range(60):
        words = "refund latency webhook" if i % 2 else "refund latency latency webhook retry"
        out.append(
            Entry.create(
                ts=f"2026-01-01T00:{1 + i // 60:02d}:{i % 60:02d}Z",
                kind="note",
                summary=f"note {i} {words}",
                body=f"{words} body {i}",
            )
        )
    return out


async def _ids(store: SqliteStore, query: str) -> list[str]:
    hits = await recall(store, await truth_source(store).superseded(), query, k=8, floor=0.0)
    return [h.entry_id for h in hits]


async def test_few_matches_rank_exactly_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await SqliteStore.open(tmp_path / "l.db") as store:
        await store.append_many(_line())
        unbounded = await _ids(store, "refund latency webhook")
        monkeypatch.setattr(recall_mod, "CANDIDATES", 61)  # all 61 matches fit
        assert await _ids(store, "refund latency webhook") == unbounded


async def test_many_matches_rank_the_newest_and_keep_rare_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = _line()
    async with await SqliteStore.open(tmp_path / "l.db") as store:
        await store.append_many(line)
        monkeypatch.setattr(recall_mod, "CANDIDATES", 10)
        newest = {e.id for e in line[-10:]}
        assert set(await _ids(store, "latency webhook")) <= newest
        # 'zanzibar' is in one entry, older than the newest ten matches: still found, first
        found = await _ids(store, "refund zanzibar")
        assert found[0] == line[0].id
        assert set(found[1:]) <= newest
