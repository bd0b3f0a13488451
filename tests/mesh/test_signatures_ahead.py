"""A node that serves while its line takes local writes never sends an entry without its
author's signature (decision 0106).

A session reads the signatures before the entries; an entry written in between (a
`lifeline log` beside `serve`, on a line file or a hub root) used to reach the peer
unsigned, and `verify` there failed it until a later session. Real processes: `serve`,
signed notes written in a loop on the served root as `lifeline log` writes them, and
`lifeline-mesh sync` from a laptop, in both directions, on a line file and on a hub
(real PostgreSQL); the receiving line is read after every session. Two hub processes
taking pushes while laptops pull: tests/hub/test_hub_postgres.py.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg
import pytest

from lifeline.home import Home
from lifeline.ledger import Draft, Ledger
from lifeline.plugins import load_append_hooks
from tests.support.hub_roots import hub_root
from tests.support.mesh_procs import cli, serve_insecure, shared_node
from tests.support.pg_server import fresh_database, hub

pytestmark = pytest.mark.slow

ROUNDS = 8


def _node(root: Path) -> None:
    shared_node(root)
    cli("lifeline_mesh", root, "init")  # a node key: every local write is signed


def _unsigned(line_file: Path) -> list[str]:
    """The entries of a line file that hold no author signature."""
    with sqlite3.connect(line_file) as conn:
        signed = {
            s for (s,) in conn.execute("SELECT subject FROM attestations WHERE role = 'author'")
        }
        return [i for (i,) in conn.execute("SELECT id FROM entries") if i not in signed]


@contextmanager
def _writing(root: Path) -> Iterator[list[str]]:
    """Signed notes written on ``root``'s line, one after another, while the block runs
    (what `lifeline log` does — the same home, line and hooks — without a process start
    per note, so the writes are as dense as a busy node's); yields the ids written."""
    written: list[str] = []
    stop = threading.Event()

    async def loop() -> None:
        home = Home(root)
        async with home.open_line("ledger") as store:
            ledger = Ledger(store, hooks=load_append_hooks(home))
            while not stop.is_set():
                draft = Draft("note", f"written while serving, #{len(written)}")
                written.append((await ledger.append(draft))[0].id)

    thread = threading.Thread(target=asyncio.run, args=(loop(),))
    thread.start()
    try:
        yield written
    finally:
        stop.set()
        thread.join(timeout=120)


def _rounds(laptop: Path, address: str, written: list[str]) -> None:
    received = 0
    for _ in range(ROUNDS):
        done = cli("lifeline_mesh", laptop, "sync", address, "--insecure", "--json")
        [report] = json.loads(done.stdout)
        received += report["entries_received"]
        assert _unsigned(laptop / ".lifeline" / "ledger.db") == [], report
    assert received >= 3 and len(written) >= 3  # the writes ran alongside the sessions


def test_a_line_file_served_while_written_sends_every_signature(tmp_path: Path) -> None:
    served, laptop = tmp_path / "served", tmp_path / "laptop"
    for root in (served, laptop):
        _node(root)
    with serve_insecure(served) as (_proc, address), _writing(served) as written:
        _rounds(laptop, address, written)


def test_a_push_while_the_pusher_writes_sends_every_signature(tmp_path: Path) -> None:
    """The other way: the laptop writes while its own sessions push to the served node."""
    served, laptop = tmp_path / "served", tmp_path / "laptop"
    for root in (served, laptop):
        _node(root)
    with serve_insecure(served) as (_proc, address), _writing(laptop) as written:
        for _ in range(ROUNDS):
            cli("lifeline_mesh", laptop, "sync", address, "--insecure", "--json")
            assert _unsigned(served / ".lifeline" / "ledger.db") == []
    assert len(written) >= 3


def test_a_hub_served_while_written_sends_every_signature(pg_server: str, tmp_path: Path) -> None:
    """A hub root's local writes sign in the entry's own transaction, as a line file's do."""
    url = asyncio.run(fresh_database(pg_server))
    served, laptop = tmp_path / "hub", tmp_path / "laptop"
    hub_root(served, url)
    _node(laptop)
    with hub(served, url) as (_proc, address), _writing(served) as written:
        _rounds(laptop, address, written)
    together, apart = asyncio.run(_same_transaction(url))
    assert together >= len(written) and apart == 0


async def _same_transaction(url: str) -> tuple[int, int]:
    """(author signatures written in their entry's own transaction, in another one): the
    rows' ``xmin``, the transaction that inserted them."""
    conn = await asyncpg.connect(url)
    try:
        row = await conn.fetchrow(
            "SELECT count(*) FILTER (WHERE e.xmin::text = a.xmin::text),"
            " count(*) FILTER (WHERE e.xmin::text <> a.xmin::text)"
            " FROM entries e JOIN attestations a ON a.line_id = e.line_id"
            " AND a.role = 'author' AND a.subject = encode(e.id, 'hex')"
        )
        return int(row[0]), int(row[1])
    finally:
        await conn.close()
