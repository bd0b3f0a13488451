"""The write path's fast lanes: pipelined batches stay one transaction (all or nothing) and
give the same line as the plain path; a local write on an idle line runs in place (no thread
hop) and queues behind anything already handed to the worker or holding the line's lock;
the timestamp and size-check fast paths only accept what the full checks would."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lifeline.entry import normalize_ts
from lifeline.errors import InvalidEntry, StoreError
from lifeline.ledger import CHUNK, Draft, Ledger
from lifeline.store.memory import MemoryStore
from lifeline.store.sqlite import SqliteStore


def _clock() -> Callable[[], str]:
    ticks = iter(range(1_000_000))
    return lambda: f"2026-01-01T00:00:00.{next(ticks):06d}Z"


def _drafts(n: int) -> list[Draft]:
    return [Draft(kind="note", summary=f"entry {i}", body=f"body {i}") for i in range(n)]


async def _line(store: Any) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(e.id, e.ts, e.parents) async for e in store.stream()]


async def test_pipelined_batch_equals_the_plain_path(tmp_path: Path) -> None:
    size = CHUNK * 3 + 7
    async with await SqliteStore.open(tmp_path / "l.db") as sqlite:
        memory = MemoryStore()
        got = [await Ledger(s, clock=_clock()).append_many(_drafts(size)) for s in (sqlite, memory)]
        assert got[0] == got[1] and got[0].count == size
        assert await _line(sqlite) == await _line(memory)
        assert await sqlite.tips() == [got[0].added[-1]]
        keys = await sqlite.keys()
        assert [h for h, _i in keys] == list(range(1, size + 1))  # one chain across chunks


@pytest.mark.parametrize("bad_at", [CHUNK * 2 + 3, CHUNK * 3 + 1])
async def test_a_bad_draft_in_a_late_chunk_stores_nothing(tmp_path: Path, bad_at: int) -> None:
    drafts = _drafts(CHUNK * 3 + 5)
    drafts[bad_at] = Draft(kind="no-such-kind", summary="x")
    async with await SqliteStore.open(tmp_path / "l.db") as store:
        await Ledger(store).append(Draft(kind="note", summary="before"))
        with pytest.raises(InvalidEntry, match="no-such-kind"):
            await Ledger(store).append_many(drafts)
        assert await store.count() == 1  # earlier chunks were rolled back with the rest
        await Ledger(store).append_many(_drafts(CHUNK + 1))  # the store is still usable
        assert await store.count() == CHUNK + 2


async def test_a_store_refusal_in_a_late_chunk_stores_nothing(tmp_path: Path) -> None:
    drafts = _drafts(CHUNK * 2 + 5)
    drafts[CHUNK + 9] = Draft(kind="note", summary="orphan", parents=("f" * 64,))
    async with await SqliteStore.open(tmp_path / "l.db") as store:
        with pytest.raises(InvalidEntry, match="ffffffffffff"):
            await Ledger(store).append_many(drafts)
        assert await store.count() == 0 and await store.tips() == []


def _count_hops(store: SqliteStore) -> list[str]:
    hops: list[str] = []
    real = store._run

    async def counted(fn: Callable[..., Any], *args: Any) -> Any:
        hops.append(getattr(fn, "__name__", "?"))
        return await real(fn, *args)

    store._run = counted  # type: ignore[method-assign]
    return hops


async def test_a_local_write_on_an_idle_line_runs_in_place(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path / "l.db") as store:
        ledger = Ledger(store)
        hops = _count_hops(store)
        first, created = await ledger.append(Draft(kind="note", summary="a", dedup_key="k1"))
        assert created and hops == []
        again, created = await ledger.append(Draft(kind="note", summary="other", dedup_key="k1"))
        assert again == first and not created and hops == []
        second, _ = await ledger.append(Draft(kind="note", summary="b"))
        assert hops == [] and second.parents == (first.id,)
        assert await store.get(second.id) == second and await store.tips() == [second.id]


async def test_a_local_write_waits_for_another_writer_off_the_event_loop(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path / "l.db") as store:
        ledger = Ledger(store)
        hops = _count_hops(store)
        other = sqlite3.connect(tmp_path / "l.db", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process is writing this line
        task = asyncio.create_task(ledger.append(Draft(kind="note", summary="queued")))
        ticks = 0
        for _ in range(20):  # the event loop keeps running while the write waits
            await asyncio.sleep(0.005)
            ticks += 1
        assert not task.done() and ticks == 20
        other.execute("COMMIT")
        other.close()
        entry, created = await task
        assert created and len(hops) == 1 and await store.count() == 1
        assert (await store.get(entry.id)).summary == "queued"


async def test_a_local_write_never_overtakes_queued_work(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path / "l.db") as store:
        ledger = Ledger(store)

        holding, release = threading.Event(), threading.Event()

        def slow_count(conn: sqlite3.Connection) -> int:
            holding.set()  # the worker runs the read: it holds the connection
            assert release.wait(30), "never released"
            return int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])

        counted = asyncio.create_task(store.run_read(slow_count))
        assert await asyncio.to_thread(holding.wait, 30), "the read never started"
        hops = _count_hops(store)
        appended = asyncio.create_task(ledger.append(Draft(kind="note", summary="after the read")))
        deadline = time.monotonic() + 30
        while not hops and not appended.done():  # until the write has queued (or, wrongly, run)
            assert time.monotonic() < deadline, "the write neither queued nor ran"
            await asyncio.sleep(0)
        release.set()
        assert await counted == 0  # the read ran first, as it was asked first
        await appended
        assert len(hops) == 1 and await store.count() == 1


@pytest.mark.parametrize(
    "text",
    [
        "2026-01-31T23:59:59.123456Z",
        "2024-02-28T00:00:00.000000Z",
        "2024-02-29T12:00:00.000000Z",  # leap day: full parse, same answer
        "2026-02-29T12:00:00.000000Z",  # no such day: refused, never passed through
        "2026-04-31T12:00:00.000000Z",
        "2026-11-30T05:40:00.123456Z",
        "2026-12-31T23:59:59.999999Z",
        "2026-13-01T00:00:00.000000Z",
        "2026-01-01T24:00:00.000000Z",
        "2026-01-01T00:00:00Z",
        "2026-01-01T02:00:00.000000+02:00",
        " 2026-01-01T00:00:00.000000Z",
    ],
)
def test_ts_fast_path_agrees_with_the_full_parse(text: str) -> None:
    try:
        moment: datetime | None = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        moment = None
    if moment is None:
        with pytest.raises(InvalidEntry):
            normalize_ts(text)
        return
    got = normalize_ts(text)
    assert got == moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@pytest.mark.parametrize("in_place", [True, False])
async def test_a_failed_commit_rolls_back_and_leaves_the_line_writable(
    tmp_path: Path, in_place: bool
) -> None:
    async with await SqliteStore.open(tmp_path / "l.db") as store:

        def setup(conn: sqlite3.Connection) -> None:
            conn.execute("PRAGMA foreign_keys = ON")  # checked at COMMIT for deferred keys
            conn.execute("CREATE TABLE p (id INTEGER PRIMARY KEY)")
            conn.execute(
                "CREATE TABLE c (pid INTEGER REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED)"
            )

        await store.run_read(setup)

        def orphan(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO c VALUES (42)")  # fails only when committed

        write = store.run_short_write if in_place else store.run_write
        with pytest.raises(StoreError, match="FOREIGN KEY"):
            await write(orphan)
        assert not await store.run_read(lambda conn: conn.in_transaction)
        rows = await store.run_read(lambda conn: conn.execute("SELECT count(*) FROM c").fetchone())
        assert rows[0] == 0
        await Ledger(store).append(Draft(kind="note", summary="still writable"))
        assert await store.count() == 1
