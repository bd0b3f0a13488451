"""What is in force on a hub's line, kept between reads (decision 0087): after a write by
another writer a reader that kept the decisions and open items in order reads only the
items touched since, and its context is the one a reader that kept nothing computes —
through new decisions, corrections that change roles, a writer without the fold hook, a
lowered ts (a new generation of the tables) and a rebuild. Real PostgreSQL."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

from lifeline.entry import Entry
from lifeline.store.pg_lines import pg_append_hooks, pg_components
from lifeline.store.postgres import PgDatabase, PgStore
from lifeline.truth.budget import Budget
from lifeline.truth.pg_table import rebuild
from lifeline.truth.pg_view import read_current, shown_state
from lifeline.truth.sections import PieceMemo
from lifeline.truth.service import build_context, resolve_name
from lifeline.truth.tableview import ItemMemo
from tests.support.arrival import arrival_order
from tests.support.pg_server import fresh_database
from tests.support.truth_ledgers import random_ledger


@asynccontextmanager
async def _line(url: str, *, hooks: bool = True) -> AsyncIterator[PgStore]:
    """Line ``l`` through a pool of its own: each stands for another hub process."""
    db = await PgDatabase.connect(
        url, migrations=pg_components(), after_append=pg_append_hooks() if hooks else ()
    )
    try:
        yield await db.line("l")
    finally:
        await db.close()


async def _context(store: PgStore, items: ItemMemo | None, pieces: PieceMemo | None) -> str:
    out = []
    for budget in (Budget(600), Budget(20_000)):
        ctx = await build_context(store, line="l", budget=budget, items=items, pieces=pieces)
        out.append(ctx.stable + ctx.volatile + repr(ctx.omitted))
    return "\n".join(out)


async def test_a_kept_reader_sees_every_write_by_another_writer(pg_server: str) -> None:
    url = await fresh_database(pg_server)
    entries = random_ledger(41, 160)
    order = arrival_order(entries, random.Random(41))
    items, pieces = ItemMemo(), PieceMemo()
    async with _line(url) as reader, _line(url) as writer, _line(url, hooks=False) as plain:
        await writer.append_many(order[:40])
        assert await _context(reader, items, pieces) == await _context(reader, None, None)
        start, steps = 40, 0
        while start < len(order):
            size = (1, 1, 2, 9)[steps % 4]  # one entry at a time, as `lifeline log` writes
            # now and then by a writer that does not fold: the reader catches up
            by = plain if steps % 5 == 3 else writer
            await by.append_many(order[start : start + size])
            start, steps = start + size, steps + 1
            kept = await _context(reader, items, pieces)
            assert kept == await _context(reader, None, None), f"after row {start}"
        # a role changed in SQL with no row appended (what `verify` would then find)
        async with writer.transaction() as conn:
            done = await conn.execute(
                "UPDATE truth_items SET role = 'd'::bytea WHERE line_id = $1 AND id ="
                " (SELECT id FROM truth_items WHERE line_id = $1 AND role = 'o'::bytea"
                "  ORDER BY ts, id LIMIT 1)",
                writer.line_id,
            )
        assert done == "UPDATE 1"
        kept = await _context(reader, items, pieces)
        assert kept == await _context(reader, None, None)
        target = next(e for e in order if e.kind == "decision")
        assert (await writer.append_many([target.with_ts("2019-01-01T00:00:00Z")])).ts_lowered
        kept = await _context(reader, items, pieces)
        assert kept == await _context(reader, None, None)
        async with writer.transaction() as conn:
            await rebuild(conn, writer.line_id)
        later = Entry.create(ts="2026-02-01T00:00:00Z", kind="decision", summary="after rebuild")
        await writer.append_many([later])
        kept = await _context(reader, items, pieces)
        assert kept == await _context(reader, None, None)
        assert "after rebuild" in kept


class _Counting:
    """A real connection, counting the bytes of what its reads return."""

    def __init__(self, conn: Any, tally: list[int]) -> None:
        self._conn, self._tally = conn, tally

    def _count(self, value: Any) -> None:
        if isinstance(value, bytes | str):
            self._tally.append(len(value))
        elif isinstance(value, list | tuple) or hasattr(value, "values"):
            for v in value.values() if hasattr(value, "values") else value:
                self._count(v)

    async def fetch(self, *args: Any) -> Any:
        rows = await self._conn.fetch(*args)
        self._count([tuple(r) for r in rows])
        return rows

    async def fetchrow(self, *args: Any) -> Any:
        row = await self._conn.fetchrow(*args)
        self._count(None if row is None else tuple(row))
        return row

    async def fetchval(self, *args: Any) -> Any:
        value = await self._conn.fetchval(*args)
        self._count(value)
        return value

    async def execute(self, *args: Any) -> Any:
        return await self._conn.execute(*args)


class _CountingLine:
    """``store`` as the truth's readers see it, its connections counted."""

    def __init__(self, store: PgStore) -> None:
        self.store, self.tally = store, list[int]()
        self.line_id, self.components = store.line_id, store.components

    @asynccontextmanager
    async def read_view(self) -> AsyncIterator[Any]:
        async with self.store.read_view() as conn:
            yield _Counting(conn, self.tally)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Any]:
        async with self.store.transaction() as conn:
            yield _Counting(conn, self.tally)


def _decisions(n: int) -> Iterator[Entry]:
    for i in range(n):
        ts = f"2026-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z"
        yield Entry.create(ts=ts, kind="decision", summary=f"decision {i}", body="why: load")


async def test_after_a_write_a_kept_reader_reads_what_changed_not_every_id(
    pg_server: str,
) -> None:
    url = await fresh_database(pg_server)
    async with _line(url) as reader, _line(url) as writer:
        await writer.append_many(list(_decisions(1_500)))
        line, items = _CountingLine(reader), ItemMemo()
        read = shown_state(None, 12, 40, resolve_name, items)
        first = await read_current(line, read)
        cold = sum(line.tally)
        note = Entry.create(ts="2026-03-01T00:00:00Z", kind="note", summary="a note")
        decided = Entry.create(ts="2026-03-01T00:00:01Z", kind="decision", summary="one more")
        await writer.append_many([note, decided])
        line.tally.clear()
        after = await read_current(line, read)
        assert first is not None and after is not None
        assert len(after[1].decisions) == len(first[1].decisions) + 1 == 1_501
        assert after[1].decisions[-1] == decided.id
        # the ids in force alone are ~100 KB (1,500 × 64 hex digits): not read again
        assert cold > 1_500 * 64
        assert sum(line.tally) < 20_000, f"read {sum(line.tally)} bytes after one write"
