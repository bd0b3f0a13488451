"""One contract suite, run on every store adapter (SQLite, PostgreSQL, the in-memory twin)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lifeline.entry import Entry
from lifeline.errors import AmbiguousPrefix, InvalidEntry, NotFound
from lifeline.store import MemoryStore, SqliteStore, Store
from lifeline.store import newest as newest_module
from lifeline.store.newest import newest
from lifeline.store.port import AppendResult
from tests.support.entries import make_entry
from tests.support.pg_server import open_test_store


@pytest.fixture(params=["sqlite", "memory", "postgres", "postgres-nocache"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    s = await open_test_store(request, request.param, tmp_path)
    yield s
    await s.close()


def chain(n: int, prefix: str = "e") -> list[Entry]:
    out: list[Entry] = []
    for i in range(n):
        parents = (out[-1].id,) if out else ()
        out.append(make_entry(f"{prefix}{i}", parents, ts=f"2026-01-01T00:00:{i:02d}Z"))
    return out


async def ids_in_order(store: Store) -> list[str]:
    return [e.id async for e in store.stream()]


async def test_append_is_idempotent(store: Store) -> None:
    e = make_entry("a")
    assert await store.append(e) is True
    assert await store.append(e) is False
    assert await store.count() == 1
    assert await store.get(e.id) == e


async def test_append_many_takes_parents_from_the_same_batch_in_any_order(store: Store) -> None:
    entries = chain(5)
    result = await store.append_many(list(reversed(entries)))
    assert result.count == 5
    assert await ids_in_order(store) == [e.id for e in entries]


async def test_missing_parent_refuses_the_whole_batch(store: Store) -> None:
    good = make_entry("good")
    orphan = make_entry("orphan", ("f" * 64,))
    with pytest.raises(InvalidEntry, match="not in this line"):
        await store.append_many([good, orphan])
    assert await store.count() == 0


async def test_declared_external_parent_is_allowed(store: Store) -> None:
    other = "a" * 64
    await store.declare_external(other, "research")
    e = make_entry("x", (other,))
    assert await store.append(e)
    assert await store.externals() == {other: "research"}


async def test_a_declaration_held_is_never_replaced(store: Store) -> None:
    """A later declaration of the same id names another line (a peer's, or a mistake):
    the first stands, so an entry's cross-line parent cannot be moved to a line where
    `verify` no longer finds it. An id the line holds as an entry is not declared."""
    other = "a" * 64
    await store.declare_external(other, "design")
    held = make_entry("held")
    await store.append(held)
    await store.declare_external(other, "bogus")
    await store.declare_external(held.id, "bogus")
    assert await store.externals() == {other: "design"}
    assert await store.append(make_entry("x", (other,)))
    assert await store.externals() == {other: "design"}


async def test_earliest_ts_is_kept(store: Store) -> None:
    late = make_entry("same", ts="2026-02-01T00:00:00Z")
    early = late.with_ts("2026-01-01T00:00:00.000000Z")
    await store.append(late)
    result = await store.append_many([early])
    assert result.ts_lowered == (late.id,)
    assert (await store.get(late.id)).ts == early.ts
    await store.append(late)
    assert (await store.get(late.id)).ts == early.ts


async def test_get_by_prefix(store: Store) -> None:
    entries = chain(30)
    await store.append_many(entries)
    target = entries[7]
    assert await store.resolve(target.id[:10]) == target
    with pytest.raises(NotFound, match="no entry id starts with"):
        await store.resolve("0000000000000000000000")
    # 30 ids over 16 hex digits: two share a first character (pigeonhole).
    firsts = [e.id[0] for e in entries]
    shared = next(c for c in firsts if firsts.count(c) > 1)
    with pytest.raises(AmbiguousPrefix, match="more than one"):
        await store.resolve(shared)


async def test_get_missing_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.get("0" * 64)


async def test_parents_children_tips(store: Store) -> None:
    root = make_entry("root")
    left = make_entry("left", (root.id,))
    right = make_entry("right", (root.id,))
    await store.append_many([root, left, right])
    assert await store.children(root.id) == sorted([left.id, right.id])
    assert await store.tips() == sorted([left.id, right.id])
    join = make_entry("join", (left.id, right.id))
    await store.append(join)
    assert await store.tips() == [join.id]
    assert (await store.get(join.id)).parents == tuple(sorted([left.id, right.id]))


async def test_tips_with_a_limit_are_the_first_of_them(store: Store) -> None:
    root = make_entry("root")
    await store.append_many([root, *(make_entry(f"leaf {k}", (root.id,)) for k in range(7))])
    every = await store.tips()
    assert len(every) == 7
    for limit in (0, 1, 5, 7, 9):
        assert await store.tips(limit=limit) == every[:limit]
    assert await store.tips(limit=None) == every


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 0, 1)])  # parents first, or not
async def test_children_across_batches_and_of_a_cross_line_parent(
    store: Store, order: tuple[int, int, int]
) -> None:
    other = "a" * 64
    await store.declare_external(other, "research")
    root = make_entry("root")
    await store.append(root)
    a = make_entry("a", (root.id, other))
    b = make_entry("b", (a.id,))
    c = make_entry("c", (root.id,))
    batch = [a, b, c]
    await store.append_many([batch[k] for k in order])
    assert await store.children(root.id) == sorted([a.id, c.id])
    assert await store.children(a.id) == [b.id]
    assert await store.children(other) == [a.id]
    assert await store.children(b.id) == []
    assert await store.tips() == sorted([b.id, c.id])
    assert await store.append_many([a, b]) == AppendResult(())  # nothing new, nothing moved
    assert await store.tips() == sorted([b.id, c.id])


async def test_dedup_key_is_unique_and_never_drops_an_entry(store: Store) -> None:
    a = make_entry("a", dedup_key="k1")
    b = make_entry("b", dedup_key="k1")
    await store.append(a)
    assert await store.append(b)  # stored, without the key
    assert (await store.by_dedup_key("k1")) == a
    assert (await store.get(b.id)).dedup_key is None
    assert await store.count() == 2
    assert await store.by_dedup_key("nope") is None


async def test_keys_are_height_then_id(store: Store) -> None:
    entries = chain(3)
    side = make_entry("side")
    await store.append_many([*entries, side])
    keys = await store.keys()
    assert keys == sorted(keys)
    assert dict((i, h) for h, i in keys)[entries[2].id] == 3
    assert dict((i, h) for h, i in keys)[side.id] == 1


def _dag(seed: int, n: int) -> list[Entry]:
    rng = random.Random(seed)
    out: list[Entry] = []
    for i in range(n):
        k = rng.randint(0, min(2, len(out)))
        parents = tuple(rng.sample([e.id for e in out], k)) if out else ()
        out.append(make_entry(f"n{i}", parents, ts=f"2026-01-01T00:00:{rng.randint(0, 59):02d}Z"))
    return out


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 30), st.randoms())
async def test_stream_order_does_not_depend_on_arrival(
    seed: int, n: int, rnd: random.Random
) -> None:
    entries = _dag(seed, n)
    orders = []
    for _ in range(2):
        shuffled = entries[:]
        rnd.shuffle(shuffled)
        s = MemoryStore()
        # Arrive in parent-closed batches of random size.
        await s.append_many(shuffled)
        orders.append(await ids_in_order(s))
    assert orders[0] == orders[1]
    position = {eid: n for n, eid in enumerate(orders[0])}
    for e in entries:
        for p in e.parents:
            assert position[p] < position[e.id]


async def test_the_newest_are_the_end_of_the_stream(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`history --limit N` reads the line from its end: the same entries, in the same
    order, as the last N of the stream, of one kind or of all."""
    rng = random.Random(5)
    entries: list[Entry] = []
    for i in range(80):  # a DAG whose kinds are mixed, heights and times out of step
        k = rng.randint(0, min(2, len(entries)))
        parents = tuple(rng.sample([e.id for e in entries], k))
        ts = f"2026-01-01T00:00:{rng.randint(0, 59):02d}Z"
        entries.append(make_entry(f"m{i}", parents, kind=rng.choice(["note", "decision"]), ts=ts))
    await store.append_many(entries)
    line = [e async for e in store.stream()]
    monkeypatch.setattr(newest_module, "PAGE", 9)  # several pages from the end
    for limit in (1, 7, 9, 10, 79, 80, 500):
        assert await newest(store, limit) == line[-limit:]
        decisions = [e for e in line if e.kind == "decision"]
        assert await newest(store, limit, "decision") == decisions[-limit:]
    assert await newest(store, 0) == [] and await newest(store, 5, "open") == []


async def test_sqlite_and_memory_agree_on_order(tmp_path: Path) -> None:
    entries = _dag(7, 60)
    mem = MemoryStore()
    sql = await SqliteStore.open(tmp_path / "x.db")
    try:
        await mem.append_many(entries)
        shuffled = entries[:]
        random.Random(3).shuffle(shuffled)
        await sql.append_many(shuffled)
        assert await ids_in_order(mem) == await ids_in_order(sql)
        assert await mem.tips() == await sql.tips()
        assert await mem.keys() == await sql.keys()
    finally:
        await sql.close()


async def test_postgres_and_memory_agree_on_order_tips_and_keys(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    entries = _dag(11, 60)
    mem = MemoryStore()
    pg = await open_test_store(request, "postgres", tmp_path)
    try:
        await mem.append_many(entries)
        shuffled = entries[:]
        random.Random(5).shuffle(shuffled)
        for start in range(0, 60, 7):  # parent-closed prefixes of the DAG, in random order
            await pg.append_many(shuffled_closed(entries, start + 7, random.Random(start)))
        assert await ids_in_order(mem) == await ids_in_order(pg)
        assert await mem.tips() == await pg.tips()
        assert await mem.keys() == await pg.keys()
        for e in entries[:10]:
            assert await mem.children(e.id) == await pg.children(e.id)
    finally:
        await pg.close()


def shuffled_closed(entries: list[Entry], upto: int, rnd: random.Random) -> list[Entry]:
    """The first ``upto`` entries (parent-closed: a DAG is built parents first), shuffled."""
    batch = entries[:upto]
    rnd.shuffle(batch)
    return batch


async def test_text_postgres_cannot_hold_is_kept(store: Store) -> None:
    """U+0000 is refused by PostgreSQL's text and jsonb; an entry holding it in its summary,
    body and dedup key must still be stored and given back unchanged, on every store."""
    e = make_entry("nul\x00 in the summary", body="and\x00 in the body", dedup_key="k\x00ey")
    child = make_entry("child", (e.id,))
    assert (await store.append_many([e, child])).count == 2
    assert await store.get(e.id) == e
    assert await store.by_dedup_key("k\x00ey") == e
    assert [x async for x in store.stream()] == [e, child]
    same = make_entry("nul\x00 in the summary", body="and\x00 in the body", dedup_key="k\x00ey")
    assert await store.append(same) is False


async def test_concurrent_appenders_on_one_line_converge(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Four connections (as four hub processes would) append overlapping batches to one
    line at once: the line ends as the in-memory twin fed the same entries, each dedup key
    held once, row numbers gapless, and the kept fingerprint equal to the stored tokens."""
    import asyncio

    from lifeline.store.postgres import PgStore
    from lifeline.store.summary import entry_token

    first = await open_test_store(request, "postgres", tmp_path)
    assert isinstance(first, PgStore)
    stores = [first] + [await PgStore.open(first.db.dsn, first.name) for _ in range(3)]
    shared = [make_entry(f"shared{i}", dedup_key=f"k{i % 7}") for i in range(40)]
    sent: list[list[Entry]] = []
    for w in range(4):
        own = [make_entry(f"w{w}-{i}", dedup_key=f"k{i % 5}") for i in range(60)]
        late = [e.with_ts(f"2026-01-0{w + 2}T00:00:00.000000Z") for e in shared]
        mixed = own + (late if w % 2 else shared)
        random.Random(w).shuffle(mixed)
        sent.append(mixed)
    try:

        async def writer(store: PgStore, batch: list[Entry]) -> None:
            for start in range(0, len(batch), 10):
                await store.append_many(batch[start : start + 10])

        await asyncio.gather(*(writer(s, b) for s, b in zip(stores, sent, strict=True)))
        ids = {e.id for batch in sent for e in batch}
        assert await first.count() == len(ids)
        assert {e.id async for e in first.stream()} == ids
        for e in shared:  # earliest ts wins whatever the order
            assert (await first.get(e.id)).ts == e.ts
        async with first.db.pool.acquire() as conn:
            seqs = [r[0] for r in await conn.fetch(
                "SELECT seq FROM entries WHERE line_id = $1 ORDER BY seq", first.line_id
            )]  # fmt: skip
            keys = await conn.fetch(
                "SELECT dedup, count(*) FROM entries WHERE line_id = $1 AND dedup IS NOT NULL"
                " GROUP BY dedup",
                first.line_id,
            )
        assert seqs == list(range(1, len(ids) + 1))
        assert sorted(bytes(k).decode() for k, _ in keys) == sorted(
            {f"k{i}" for i in range(7)} | {f"k{i}" for i in range(5)}
        )
        assert all(n == 1 for _, n in keys)
        totals = await first.entry_totals()
        stored = [await first.get(i) for i in ids]
        assert totals.count == len(ids)
        assert totals.total == sum(entry_token(e.id, e.ts) for e in stored) % (1 << 256)
        tokens = await first.snapshot_rows()
        assert sum(int.from_bytes(t, "little") for _, _, t in tokens) % (1 << 256) == totals.total
    finally:
        for s in stores:
            await s.close()
