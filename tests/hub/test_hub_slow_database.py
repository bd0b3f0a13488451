"""A slow database under a hub: another connection holds the line's writer lock (its
``lines`` row, ``FOR UPDATE``, in an open transaction), as a stuck writer would. A session
writing that line fails after the lock timeout with the reason, having written nothing;
sessions of other lines go on meanwhile; once the lock is released everything converges
and the laptop's audit is clean. Real processes, a real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import asyncpg
import pytest

from tests.support.mesh_procs import cli, log_note, shared_node
from tests.support.pg_locks import HeldTransaction
from tests.support.pg_server import fresh_database, hub

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

LOCK_TIMEOUT_S = 2  # set through the URL, as an operator would (docs/hub.md)


def _ids(root: Path, line: str = "ledger") -> set[str]:
    out = cli("lifeline", root, "history", "--line", line, "--json").stdout
    return {e["id"] for e in json.loads(out)}


async def _hub_count(url: str, line: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval("SELECT n FROM lines WHERE name = $1", line) or 0)
    finally:
        await conn.close()


def test_a_blocked_line_times_out_its_session_and_nothing_is_lost(
    pg_server: str, tmp_path: Path
) -> None:
    url = asyncio.run(fresh_database(pg_server))
    hub_root, laptop, other = tmp_path / "hub", tmp_path / "laptop", tmp_path / "other"
    for root in (hub_root, laptop, other):
        shared_node(root)
        cli("lifeline", root, "--line", "notes", "init")
        cli("lifeline_mesh", root, "share", "notes")
    first = log_note(laptop, "before the lock")
    with hub(hub_root, f"{url}&lock_timeout={LOCK_TIMEOUT_S}s") as (proc, address):
        cli("lifeline_mesh", laptop, "sync", address, "--insecure")  # the line exists now
        second = log_note(laptop, "while the line is locked")
        with HeldTransaction(url, "SELECT 1 FROM lines WHERE name = $1 FOR UPDATE", "ledger"):
            started = time.monotonic()
            failed = cli("lifeline_mesh", laptop, "sync", address, "--insecure",
                         "--line", "ledger", check=False)  # fmt: skip
            took = time.monotonic() - started
            assert failed.returncode != 0
            message = failed.stderr.strip().splitlines()
            assert len(message) == 1 and "writer lock (lock_timeout)" in message[0], message
            assert "nothing half-written" in message[0]
            assert took < 60  # bounded: the lock timeout, not the lock holder, decides
            # another line, through the same hub process, meanwhile
            cli("lifeline", other, "log", "--line", "notes", "--kind", "note", "--summary",
                "another line")  # fmt: skip
            cli("lifeline_mesh", other, "sync", address, "--insecure", "--line", "notes")
            assert asyncio.run(_hub_count(url, "notes")) == 1
            assert asyncio.run(_hub_count(url, "ledger")) == 1  # nothing of the failed one
            assert proc.poll() is None  # still serving
        cli("lifeline_mesh", laptop, "sync", address, "--insecure")
        assert asyncio.run(_hub_count(url, "ledger")) == 2
        cli("lifeline_mesh", other, "sync", address, "--insecure")
        assert {first, second} <= _ids(other)
        assert len(_ids(laptop, "notes")) == 1
        audit = cli("lifeline_mesh", laptop, "verify", "--json", check=False)
        assert audit.returncode == 0, audit.stdout[-2000:] + audit.stderr
    assert proc.returncode == 0


class _StallingProxy:
    """A TCP proxy on 127.0.0.1 to the server's unix socket, on a thread of its own, that
    holds every byte while :attr:`stalled` is set (a network gone slow), then passes it on."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self.stalled = threading.Event()
        self.port = 0
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                while self.stalled.is_set():
                    await asyncio.sleep(0.02)
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_unix_connection(self.socket_path)
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _start(self) -> None:
        server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]

    def __enter__(self) -> _StallingProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stalled.clear()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)


def test_a_stalled_network_to_the_database_times_out_the_session(
    pg_server: str, tmp_path: Path
) -> None:
    url = asyncio.run(fresh_database(pg_server))
    parts = urlsplit(url)
    socket_dir = parse_qs(parts.query).get("host", [""])[0]
    if not socket_dir:
        pytest.skip("the test server is not on a local unix socket (LIFELINE_TEST_PG)")
    hub_root, laptop = tmp_path / "hub", tmp_path / "laptop"
    shared_node(hub_root)
    shared_node(laptop)
    first = log_note(laptop, "before the stall")
    with _StallingProxy(f"{socket_dir}/.s.PGSQL.5432") as proxy:
        through = f"postgresql://postgres@127.0.0.1:{proxy.port}{parts.path}?command_timeout=3"
        with hub(hub_root, through) as (proc, address):
            cli("lifeline_mesh", laptop, "sync", address, "--insecure")
            second = log_note(laptop, "during the stall")
            proxy.stalled.set()
            started = time.monotonic()
            failed = cli("lifeline_mesh", laptop, "sync", address, "--insecure", check=False)
            took = time.monotonic() - started
            proxy.stalled.clear()
            assert failed.returncode != 0
            message = failed.stderr.strip().splitlines()
            assert len(message) == 1 and "did not answer in time" in message[0], message
            assert took < 60, took  # the command timeout (3 s), not the stall, decides
            assert proc.poll() is None  # still serving
            cli("lifeline_mesh", laptop, "sync", address, "--insecure")
            assert asyncio.run(_hub_count(url, "ledger")) == 2
            assert {first, second} <= _ids(laptop)
        assert proc.returncode == 0
