"""Local writes without explicit parents join the line's tips, in one transaction on SQLite."""

from __future__ import annotations

from pathlib import Path

from lifeline.ledger import Draft, Ledger, TipsAppender
from lifeline.store.memory import MemoryStore
from lifeline.store.sqlite import SqliteStore


def _clock() -> str:
    return "2026-01-01T00:00:00.000000Z"


async def test_sqlite_and_memory_give_the_same_entries(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path / "l.db") as sqlite:
        memory = MemoryStore()
        assert isinstance(sqlite, TipsAppender) and not isinstance(memory, TipsAppender)
        results = []
        for store in (sqlite, memory):
            ledger = Ledger(store, clock=_clock)
            a, _ = await ledger.append(Draft(kind="note", summary="a"))
            b, _ = await ledger.append(Draft(kind="note", summary="b", parents=()))
            c, created = await ledger.append(Draft(kind="note", summary="c"))
            again, created_again = await ledger.append(Draft(kind="note", summary="b", parents=()))
            assert created and not created_again and again == b  # same content: same id
            assert c.parents == tuple(sorted((a.id, b.id)))  # joins both tips
            results.append([e.id async for e in store.stream()])
        assert results[0] == results[1]
