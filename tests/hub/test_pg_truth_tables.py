"""The truth tables on PostgreSQL (decision 0077) give what a full fold gives — the same
state, truth and context bytes — whether the rows were folded by the appends themselves
(in their transactions), caught up by a reader (a writer without the hook, a ts changed in
place) or backfilled for a line written before the tables existed. Real PostgreSQL."""

from __future__ import annotations

import random
import string
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from lifeline.entry import Entry
from lifeline.store.memory import MemoryStore
from lifeline.store.pg_lines import pg_append_hooks, pg_components
from lifeline.store.postgres import PgDatabase, PgStore
from lifeline.truth.budget import Budget
from lifeline.truth.parse import THREAD_LONGEST
from lifeline.truth.reducers import fold_all
from lifeline.truth.service import build_context, read_shown, resume_of
from lifeline.truth.snapshot import truth_source
from lifeline.truth.views import derive
from tests.support.arrival import arrival_order
from tests.support.pg_server import fresh_database
from tests.support.truth_ledgers import random_ledger


@asynccontextmanager
async def _line(url: str, *, hooks: bool = True, truth: bool = True) -> AsyncIterator[PgStore]:
    migrations = pg_components() if truth else {}
    db = await PgDatabase.connect(
        url, migrations=migrations, after_append=pg_append_hooks() if hooks else ()
    )
    try:
        yield await db.line("l")
    finally:
        await db.close()


async def _contexts(store: MemoryStore | PgStore, threads: list[str]) -> list[str]:
    out = []
    for budget in (Budget(400), Budget(20_000), Budget(300, "tokens")):
        for thread in [None, *threads]:
            for query in (None, "refund s3"):
                ctx = await build_context(
                    store, line="l", budget=budget, query=query, thread=thread, recent=5
                )
                out.append(ctx.stable + ctx.volatile)
    out.append(repr(await resume_of(store)))
    return out


async def _folded_rows(store: PgStore) -> int:
    rows = await store.fetch_line("SELECT last_seq FROM truth_core WHERE line_id = $1")
    return int(rows[0][0]) if rows else -1


async def test_appends_keep_the_tables_equal_to_a_full_fold(pg_server: str) -> None:
    for seed, n, step in ((3, 70, 7), (11, 45, 1), (29, 90, 25)):
        url = await fresh_database(pg_server)
        entries = random_ledger(seed, n)
        order = arrival_order(entries, random.Random(seed))
        reference = MemoryStore()
        await reference.append_many(entries)
        full = fold_all(entries)
        threads = sorted(full.threads)
        async with _line(url) as store:
            await store.append_many(order[:step])
            await read_shown(store)  # the first read folds what is there
            for start in range(step, len(order), step):
                await store.append_many(order[start : start + step])
                # the append folded its rows: the tables are current before any read
                assert await _folded_rows(store) == min(start + step, len(order))
                shown = await read_shown(store)
                assert shown.truth == derive(fold_all(order[: start + step]))
            assert (await truth_source(store).state()).to_json() == full.to_json()
            assert (await truth_source(store).superseded()).by == derive(full).superseded
            assert await _contexts(store, threads) == await _contexts(reference, threads)


async def test_a_thread_name_past_an_index_key_is_taken_cut(pg_server: str) -> None:
    """A checkpoint whose ``thread:`` line holds more than PostgreSQL's index key (~2.7 kB,
    text that does not compress) is taken as a line file takes it, its thread named by its
    first THREAD_LONGEST characters on both: the hub used to refuse it, and with it every
    sync that carried it."""
    name = "".join(random.Random(3).choices(string.ascii_letters + string.digits, k=8000))
    entries = [
        *random_ledger(7, 20),
        Entry.create(
            ts="2026-05-01T00:00:00Z", kind="checkpoint", summary="long", body=f"thread: {name}"
        ),
    ]
    reference = MemoryStore()
    await reference.append_many(entries)
    threads = sorted(fold_all(entries).threads)
    assert name[:THREAD_LONGEST] in threads and name not in threads
    async with _line(await fresh_database(pg_server)) as store:
        await store.append_many(entries[:5])
        await read_shown(store)  # current: the next append folds in its transaction
        await store.append_many(entries[5:])
        assert await _contexts(store, threads) == await _contexts(reference, threads)


async def test_a_reader_catches_up_what_writers_without_the_hook_wrote(pg_server: str) -> None:
    url = await fresh_database(pg_server)
    entries = random_ledger(17, 80)
    async with _line(url, hooks=False, truth=False) as old:  # written before the upgrade
        await old.append_many(entries[:40])
    async with _line(url) as store:  # the upgrade: tables made empty, backfilled on read
        assert await _folded_rows(store) == -1
        assert (await read_shown(store)).truth == derive(fold_all(entries[:40]))
        assert await _folded_rows(store) == 40
    async with _line(url, hooks=False) as other:  # a writer that does not fold
        await other.append_many(entries[40:])
    async with _line(url) as store:
        assert await _folded_rows(store) == 40
        assert (await truth_source(store).state()).to_json() == fold_all(entries).to_json()
        assert await _folded_rows(store) == 80


async def test_a_ts_changed_in_place_is_folded_again(pg_server: str) -> None:
    url = await fresh_database(pg_server)
    entries = random_ledger(5, 50)
    async with _line(url) as store:
        await store.append_many(entries)
        await read_shown(store)
        target = next(e for e in entries if e.kind == "decision")
        earlier = target.with_ts("2019-01-01T00:00:00Z")
        result = await store.append_many([earlier])
        assert result.ts_lowered == (target.id,)
        assert await _folded_rows(store) == -1  # the trigger dropped the core, as SQLite's
        now = [e async for e in store.stream()]
        assert next(e.ts for e in now if e.id == target.id).startswith("2019-01-01")
        state = await truth_source(store).state()
        assert state.items[target.id][1].startswith("2019-01-01")
        assert state.to_json() == fold_all(now).to_json()


# The same lie told in both databases: (SQLite statement, PostgreSQL statement).
TAMPER = [
    (
        "UPDATE truth_items SET summary = 'forged' WHERE id = ?",
        "UPDATE truth_items SET summary = 'forged'::bytea WHERE line_id = $1 AND id = $2",
    ),
    (
        "UPDATE truth_items SET role = 'd' WHERE id = ?",
        "UPDATE truth_items SET role = 'd'::bytea WHERE line_id = $1 AND id = $2",
    ),
    (
        "DELETE FROM truth_marks WHERE id = ?",
        "DELETE FROM truth_marks WHERE line_id = $1 AND id = $2",
    ),
]


async def test_verify_finds_a_row_tampered_in_sql_as_on_sqlite(pg_server: str, tmp_path) -> None:
    from lifeline.audit.line import verify_store
    from lifeline.store.sqlite import SqliteStore
    from lifeline.truth.pg_table import b

    entries = random_ledger(23, 60)
    # an open item with a thread: it has an item row, a role and a mark to lie about
    victim = next(e for e in entries if e.kind == "open" and "thread:" in e.body)
    for sqlite_sql, pg_sql in TAMPER:
        url = await fresh_database(pg_server)
        path = tmp_path / f"{len(sqlite_sql)}.db"
        found = {}
        async with _line(url) as hub_line, await SqliteStore.open(path) as file_line:
            for store in (hub_line, file_line):
                await store.append_many(entries)
                await read_shown(store)
            before = await _contexts(file_line, [])
            assert await _contexts(hub_line, []) == before

            def lie(conn, sql=sqlite_sql) -> None:
                conn.execute(sql, (victim.id,))

            await file_line.run_write(lie)
            async with hub_line.transaction() as conn:
                await conn.execute(pg_sql, hub_line.line_id, b(victim.id))
            for name, store in (("pg", hub_line), ("sqlite", file_line)):
                report = await verify_store(store, "l")
                found[name] = [(f.check, f.entry_id, f.detail) for f in report.findings]
                assert (await verify_store(store, "l")).ok  # rebuilt from the entries
            assert await _contexts(hub_line, []) == before
        assert found["pg"] == found["sqlite"], sqlite_sql
        assert found["pg"][-1][0] == "truth-rebuilt"
        assert any(c == "truth-row" and e == victim.id for c, e, _d in found["pg"]), found


async def test_a_reader_kept_from_the_line_lock_folds_the_line_instead(pg_server: str) -> None:
    import asyncpg

    url = await fresh_database(pg_server)
    entries = random_ledger(31, 60)
    async with _line(url) as store:
        await store.append_many(entries[:30])
        await read_shown(store)
    async with _line(url, hooks=False) as other:  # the tables fall behind
        await other.append_many(entries[30:])
    holder = await asyncpg.connect(url)  # a long write holds the line's lock
    try:
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM lines WHERE name = 'l' FOR UPDATE")
            impatient = url + ("&" if "?" in url else "?") + "lock_timeout=200ms"
            async with _line(impatient) as reader:
                assert (await truth_source(reader).state()).to_json() == fold_all(entries).to_json()
                assert (await read_shown(reader)).truth == derive(fold_all(entries))
    finally:
        await holder.close()
    async with _line(url) as store:
        assert await _folded_rows(store) == 30  # not caught up by that reader
        assert (await read_shown(store)).truth == derive(fold_all(entries))
        assert await _folded_rows(store) == 60
