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


class _KeysCounted(SqliteStore):
    """The SQLite store, counting how often a write's tips are read, and how often the
    whole line's keys (never: it reads only the tips a write could join)."""

    keys_read = 0
    whole_line_read = 0

    async def tips_for_write(self, thread: str | None, cap: int) -> list[tuple[str, str, str]]:
        type(self).keys_read += 1
        return await super().tips_for_write(thread, cap)

    async def keys(self):  # type: ignore[no-untyped-def]
        type(self).whole_line_read += 1
        return await super().keys()


async def test_a_batch_with_its_parents_never_reads_the_lines_tips(tmp_path: Path) -> None:
    """A sessions line has a tip per session: past the join cap, finding which tips a
    draft joins reads the tips (once every key of the line). A batch whose drafts all name
    their parents (every ingest) joins none, so it reads none."""
    async with await _KeysCounted.open(tmp_path / "l.db") as store:
        ledger = Ledger(store, clock=_clock)
        for n in range(12):  # 12 separate chains: 12 tips, over the join cap of 8
            await ledger.append_many([Draft(kind="note", summary=f"root {n}", parents=())])
        assert len(await store.tips()) == 12
        read = _KeysCounted.keys_read
        root = (await store.tips())[0]
        batch = [Draft(kind="note", summary="child", parents=(root,))]
        result = await ledger.append_many(batch)
        assert len(result.added) == 1 and _KeysCounted.keys_read == read
        joined = await ledger.append_many([Draft(kind="note", summary="joins")])
        assert len(joined.added) == 1 and _KeysCounted.keys_read == read + 1  # still joins
        assert _KeysCounted.whole_line_read == 0
