"""A hub's change feed across hub processes: an entry a laptop writes through hub process A
is announced at once by hub process B to the laptop watching B (LISTEN/NOTIFY, at commit),
long before the periodic sync (60 s); and the listener, its connection cut, reports on
reconnecting what was written while it was away. Real processes, a real PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import asyncpg
import pytest

from lifeline.entry import Entry
from lifeline.store.pg_notify import LineListener
from lifeline.store.postgres import PgDatabase
from tests.support.mesh_procs import (
    cli,
    log_note,
    serve,
    shared_node,
    until,
    wait_for_entry,
    wait_watching,
)
from tests.support.pg_server import fresh_database, hub

LIVE_S = 2.0  # the periodic sync is 60 s: an entry seen this soon was announced


@pytest.mark.slow
@pytest.mark.serial  # a bound on wall-clock time: run alone
@pytest.mark.timeout(900)
def test_a_write_through_one_hub_process_is_announced_by_the_other(
    pg_server: str, tmp_path: Path
) -> None:
    url = asyncio.run(fresh_database(pg_server))
    writer, watcher = tmp_path / "writer", tmp_path / "watcher"
    shared_node(tmp_path / "hub-a")
    shared_node(tmp_path / "hub-b")
    shared_node(writer)
    watched_line = shared_node(watcher)
    with (
        hub(tmp_path / "hub-a", url) as (_a, address_a),
        hub(tmp_path / "hub-b", url) as (_b, address_b),
    ):
        dial = ("--listen", "127.0.0.1:0", "--peer", address_b, "--no-discovery", "--insecure")
        with serve(watcher, *dial):
            wait_watching(watcher)
            for k in range(3):  # the first, and again once the line exists on the hub
                entry_id = log_note(writer, f"through hub A, {k}")
                cli("lifeline_mesh", writer, "sync", address_a, "--insecure")
                written = time.monotonic()
                seen = wait_for_entry(watched_line, entry_id, deadline_s=30)
                assert seen - written < LIVE_S, f"note {k} took {seen - written:.2f}s"


async def test_a_listener_that_lost_its_connection_reports_what_it_missed(
    pg_server: str,
) -> None:
    url = await fresh_database(pg_server)
    db = await PgDatabase.connect(url)
    heard: list[list[str]] = []
    gate = asyncio.Event()
    gate.set()

    async def connect(dsn: str) -> asyncpg.Connection:
        await gate.wait()  # closed: the listener stays away while we write
        return await asyncpg.connect(dsn)

    listener = LineListener(url, heard.append, connect=connect)
    task = asyncio.create_task(listener.run())
    try:
        one, two = await db.line("one"), await db.line("two")
        await asyncio.wait_for(listener.listening.wait(), 30)
        await one.append(Entry.create(ts="2026-03-01T10:00:00Z", kind="note", summary="a"))
        await until(lambda: ["one"] in heard)
        assert listener.notified == 1

        gate.clear()
        async with db.pool.acquire() as conn:  # the listener's connection is cut
            assert await conn.fetchval("SELECT pg_terminate_backend($1)", listener.server_pid)
        await until(lambda: not listener.listening.is_set())
        heard.clear()
        await two.append(Entry.create(ts="2026-03-01T10:00:01Z", kind="note", summary="b"))
        await asyncio.sleep(0.3)
        assert heard == []  # nobody listens: the notification is lost
        gate.set()
        await until(lambda: ["two"] in heard)  # the re-check after reconnecting
        assert listener.connects == 2 and ["one"] not in heard
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await db.close()
