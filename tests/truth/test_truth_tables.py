"""The truth tables (incremental, persisted) always give what a full fold gives: the same
state, the same truth and the same context bytes, whatever the arrival order and however
the rows arrive in increments; and a line written before the tables migrates to them."""

from __future__ import annotations

import random
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lifeline.entry import Entry
from lifeline.store import schema
from lifeline.store.memory import MemoryStore
from lifeline.store.sqlite import SqliteStore
from lifeline.store.sqlite_open import connect_read_only
from lifeline.truth.budget import Budget
from lifeline.truth.reducers import fold_all
from lifeline.truth.service import build_context, read_shown, read_truth, resume_of
from lifeline.truth.snapshot import truth_source
from lifeline.truth.table import _V1
from lifeline.truth.views import derive
from tests.support.arrival import arrival_order
from tests.support.truth_ledgers import random_ledger as _ledger


async def _contexts(store: SqliteStore | MemoryStore, threads: list[str]) -> list[str]:
    out = []
    for budget in (Budget(400), Budget(1500), Budget(20_000), Budget(300, "tokens")):
        for thread in [None, *threads]:
            for query in (None, "refund s3"):
                ctx = await build_context(
                    store, line="l", budget=budget, query=query, thread=thread, recent=5
                )
                out.append(ctx.stable + ctx.volatile)
    out.append(repr(await resume_of(store)))
    return out


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 45), step=st.integers(1, 12))
async def test_tables_equal_a_full_fold(seed: int, n: int, step: int, tmp_path: Path) -> None:
    entries = _ledger(seed, n)
    order = arrival_order(entries, random.Random(seed))
    reference = MemoryStore()
    for e in entries:
        await reference.append(e)
    full = fold_all(entries)
    want_truth = derive(full)
    threads = sorted(full.threads)
    want = await _contexts(reference, threads)
    path = tmp_path / f"{seed}-{n}-{step}.db"
    path.unlink(missing_ok=True)
    async with await SqliteStore.open(path) as store:
        for start in range(0, len(order), step):  # several syncs, each caught up on read
            await store.append_many(order[start : start + step])
            shown = await read_shown(store)
            part = fold_all(order[: start + step])
            assert shown.truth == derive(part)
        assert (await truth_source(store).state()).to_json() == full.to_json()
        assert (await read_truth(store)).truth == want_truth
        assert await _contexts(store, threads) == want


async def test_a_line_with_the_old_snapshot_migrates(tmp_path: Path) -> None:
    entries = _ledger(5, 60)
    path = tmp_path / "old.db"
    old = {**schema.line_schema(), "truth": [(1, _V1)]}
    async with await SqliteStore.open(path, schema=old) as store:
        await store.append_many(entries[:40])

        def snapshot(conn: sqlite3.Connection) -> None:  # as the old release left it
            conn.execute("INSERT INTO truth_snapshot VALUES (0, 40, 40, '{}')")

        await store.run_write(snapshot)
    async with await SqliteStore.open(path) as store:
        tables = await store.run_read(
            lambda c: {r[0] for r in c.execute("SELECT name FROM sqlite_master")}
        )
        assert "truth_snapshot" not in tables and "truth_core" in tables
        await store.append_many(entries[40:])
        reference = MemoryStore()
        for e in entries:
            await reference.append(e)
        threads = sorted(fold_all(entries).threads)
        assert await _contexts(store, threads) == await _contexts(reference, threads)
        assert (await truth_source(store).state()).to_json() == fold_all(entries).to_json()


async def test_a_read_only_copy_that_is_behind_folds_in_memory(tmp_path: Path) -> None:
    entries = _ledger(9, 30)
    path = tmp_path / "l.db"
    async with await SqliteStore.open(path) as store:
        await store.append_many(entries[:10])
        await read_shown(store)
        await store.append_many(entries[10:])
    # opened as `SqliteStore.open` opens a file in a folder it cannot write
    pool = ThreadPoolExecutor(max_workers=1)
    store = SqliteStore(path, connect_read_only(path), pool, schema.line_schema())
    store.read_only = True
    async with store:
        ctx = await build_context(store, line="l", budget=Budget(3000))
        behind = await store.run_read(
            lambda c: c.execute("SELECT last_seq FROM truth_core").fetchone()[0]
        )
    assert behind == 10  # nothing was written
    reference = MemoryStore()
    for e in entries:
        await reference.append(e)
    assert ctx.text == (await build_context(reference, line="l", budget=Budget(3000))).text


async def test_an_item_arriving_after_its_correction(tmp_path: Path) -> None:
    """A correction may name an entry the line does not hold yet (a cross-line parent);
    when that entry arrives later, what it is (a question, a decision) changes the truth."""
    question = Entry.create(ts="2026-01-01T00:00:00Z", kind="open", summary="Which CDN?")
    decision = Entry.create(ts="2026-01-01T00:00:01Z", kind="decision", summary="Use A")
    fix = Entry.create(
        ts="2026-01-01T00:01:00Z",
        kind="correction",
        summary="CDN: maybe B?",
        body="status: open",
        parents=(question.id, decision.id),
    )
    reference = MemoryStore()
    for e in (question, decision, fix):
        await reference.append(e)
    async with await SqliteStore.open(tmp_path / "l.db") as store:
        await store.declare_external(question.id, "other")
        await store.declare_external(decision.id, "other")
        await store.append(fix)
        await read_shown(store)
        await store.append_many([question, decision])
        got = await read_shown(store)
        assert got.truth == (await read_truth(reference)).truth
        # (the tips differ: the line learnt the parents after their child; not truth)
        big = Budget(20_000)
        ours = await build_context(store, line="l", budget=big)
        theirs = await build_context(reference, line="l", budget=big)
        assert ours.stable == theirs.stable
        assert "CDN: maybe B?" in ours.stable and "Use A" not in ours.stable
