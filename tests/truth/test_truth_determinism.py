"""Same set, same truth: state and context bytes do not depend on arrival order, and the
incremental SQLite snapshot always equals a full fold."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lifeline.entry import Entry
from lifeline.store.memory import MemoryStore
from lifeline.store.sqlite import SqliteStore
from lifeline.truth.budget import Budget
from lifeline.truth.reducers import fold_all
from lifeline.truth.service import build_context, read_truth
from lifeline.truth.snapshot import truth_source
from lifeline.truth.state import State
from tests.support.arrival import arrival_order

KINDS = ["decision", "open", "note", "checkpoint", "correction", "fix", "bootstrap"]


def _ledger(seed: int, n: int) -> list[Entry]:
    """A random DAG with every kind, threads, pins and corrections (chains of them too)."""
    rng = random.Random(seed)
    out: list[Entry] = []
    for i in range(n):
        kind = rng.choice(KINDS)
        k = rng.randint(0, min(2, len(out)))
        parents = tuple(sorted({p.id for p in rng.sample(out, k)}))
        body = f"why {rng.randint(0, 5)}"
        if kind == "checkpoint":
            body = f"thread: t{rng.randint(0, 2)}\nnext:\n  - step {i}"
        if kind == "note" and out and rng.random() < 0.3:
            target = rng.choice(out).id
            parents, body = (target,), f"pin: {target}"
        if kind == "correction" and not parents and out:
            parents = (rng.choice(out).id,)
        ts = f"2026-01-01T00:{rng.randint(0, 5):02d}:00Z"  # ties on purpose
        out.append(Entry.create(ts=ts, kind=kind, summary=f"s{i}", body=body, parents=parents))
    return out


async def _truth_bytes(entries: list[Entry]) -> tuple[str, str]:
    store = MemoryStore()
    for e in entries:
        await store.append(e)
    lt = await read_truth(store)
    ctx = await build_context(store, line="l", budget=Budget(1500), query="s3 why")
    return lt.state.to_json(), ctx.text


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 30), shuffle=st.randoms())
async def test_shuffled_arrival_gives_identical_bytes(
    seed: int, n: int, shuffle: random.Random
) -> None:
    entries = _ledger(seed, n)
    mixed = arrival_order(entries, shuffle)
    assert await _truth_bytes(entries) == await _truth_bytes(mixed)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 40), cut=st.integers(0, 40))
def test_incremental_fold_equals_full_fold(seed: int, n: int, cut: int) -> None:
    entries = _ledger(seed, n)
    order = arrival_order(entries, random.Random(seed))
    partial = fold_all(order[:cut])
    again = State.from_json(partial.to_json())  # through the snapshot's bytes
    assert fold_all(order[cut:], again).to_json() == fold_all(entries).to_json()


async def test_sqlite_snapshot_is_incremental_and_correct(tmp_path: Path) -> None:
    entries = _ledger(7, 60)
    path = tmp_path / "l.db"
    async with await SqliteStore.open(path) as store:
        await store.append_many(entries[:30])
        first = await truth_source(store).state()
        assert first.to_json() == fold_all(entries[:30]).to_json()
        await store.append_many(entries[30:])
        folded_now: list[int] = []

        def snap(conn: sqlite3.Connection) -> int:
            return int(conn.execute("SELECT last_seq FROM truth_core").fetchone()[0])

        folded_now.append(await store.run_read(snap))
        second = await truth_source(store).state()
        folded_now.append(await store.run_read(snap))
        assert folded_now == [30, 60]  # the second read folded only the 30 new rows
        assert second.to_json() == fold_all(entries).to_json()
        assert (await truth_source(store).state()).to_json() == second.to_json()


async def test_lowered_ts_and_tampering_invalidate_the_snapshot(tmp_path: Path) -> None:
    entries = _ledger(11, 20)
    async with await SqliteStore.open(tmp_path / "l.db") as store:
        await store.append_many(entries)
        await truth_source(store).state()
        earlier = entries[-1].with_ts("2025-01-01T00:00:00Z")
        await store.append(earlier)  # same id, earlier ts: the store lowers it
        expected = fold_all([*entries[:-1], earlier]).to_json()
        assert (await truth_source(store).state()).to_json() == expected
        victim = entries[3]

        def tamper(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE entries SET summary = 'forged' WHERE id = ?", (victim.id,))

        await store.run_write(tamper)
        state = await truth_source(store).state()
        assert victim.id in state.integrity


async def test_two_sqlite_nodes_same_set_same_context(tmp_path: Path) -> None:
    entries = _ledger(3, 40)
    texts = []
    for n, order in enumerate([entries, arrival_order(entries, random.Random(99))]):
        async with await SqliteStore.open(tmp_path / f"{n}.db") as store:
            for start in range(0, len(order), 7):  # several syncs, each folded incrementally
                await store.append_many(order[start : start + 7])
                await truth_source(store).state()
            ctx = await build_context(store, line="l", budget=Budget(3000), query="s1 why")
            texts.append((ctx.stable, ctx.volatile))
    assert texts[0] == texts[1]


async def test_rows_removed_behind_the_triggers_back_force_a_full_fold(tmp_path: Path) -> None:
    entries = _ledger(5, 25)
    async with await SqliteStore.open(tmp_path / "l.db") as store:
        await store.append_many(entries)
        await truth_source(store).state()

        def sneak(conn: sqlite3.Connection) -> None:
            conn.execute("DROP TRIGGER truth_on_delete")
            conn.execute("DELETE FROM entries WHERE id = ?", (entries[-1].id,))

        await store.run_write(sneak)
        state = await truth_source(store).state()
        assert state.count == 24
        assert state.to_json() == fold_all(entries[:-1]).to_json()
