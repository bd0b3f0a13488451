"""A hub's database failing under it: lost in the middle of serving (that session fails
with the reason, the process keeps serving and reconnects), and a hub process killed with
SIGKILL while it admits a batch (the batch is in or out, never half). Each test runs its
own throwaway cluster, so stopping it disturbs no other test."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from lifeline.entry import Entry
from lifeline.store.sqlite import SqliteStore
from lifeline.store.summary import entry_token
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.notary.sign import sign_entries
from tests.support.mesh_procs import cli, log_note, shared_node
from tests.support.needs import missing
from tests.support.pg_server import HOW_TO, Cluster, fresh_database, hub, server_binaries

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # real processes, a loaded box


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    bin_dir = server_binaries()
    if bin_dir is None:
        missing(HOW_TO)
    own = Cluster(bin_dir)
    own.start()
    try:
        yield own
    finally:
        own.stop()


def _node(root: Path) -> None:
    shared_node(root)
    cli("lifeline_mesh", root, "init")


def test_a_lost_database_fails_the_session_and_serving_goes_on(
    cluster: Cluster, tmp_path: Path
) -> None:
    url = asyncio.run(fresh_database(cluster.url))
    _node(tmp_path / "hub")
    laptop = tmp_path / "laptop"
    _node(laptop)
    with hub(tmp_path / "hub", url) as (proc, address):
        log_note(laptop, "before")
        cli("lifeline_mesh", laptop, "sync", address, "--insecure")
        cluster.halt()
        log_note(laptop, "while the database is down")
        failed = cli("lifeline_mesh", laptop, "sync", address, "--insecure", check=False)
        assert failed.returncode != 0
        assert "database" in failed.stderr and len(failed.stderr.strip().splitlines()) == 1
        assert proc.poll() is None  # still serving
        cluster.resume()
        cli("lifeline_mesh", laptop, "sync", address, "--insecure")
        assert asyncio.run(_count(url)) == 2  # reconnected: the entry went up
    assert proc.returncode == 0


async def _count(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval("SELECT n FROM lines WHERE name = 'ledger'"))
    finally:
        await conn.close()


async def _consistent(url: str) -> int:
    """The hub's line is whole: kept count and token sum equal the rows, row numbers are
    gapless, every entry's author signature is there and counted. Returns the count."""
    conn = await asyncpg.connect(url)
    try:
        row = await conn.fetchrow("SELECT line_id, n, token_sum FROM lines WHERE name = 'ledger'")
        if row is None:
            return 0
        line_id, n, token_sum = row
        rows = await conn.fetch(
            "SELECT seq, id, ts FROM entries WHERE line_id = $1 ORDER BY seq", line_id
        )
        assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
        assert n == len(rows)
        total = sum(entry_token(bytes(r[1]).hex(), r[2]) for r in rows) % (1 << 256)
        assert int.from_bytes(token_sum, "little") == total
        signed = await conn.fetchval(
            "SELECT count(*) FROM attestations WHERE line_id = $1 AND role = 'author'", line_id
        )
        kept = await conn.fetchval(
            "SELECT n FROM notary_totals WHERE line_id = $1 AND name = 'attestations'", line_id
        )
        assert signed >= 0 and (kept or 0) == signed
        return int(n)
    finally:
        await conn.close()


async def _signed_chain(root: Path, n: int) -> None:
    identity = NodeIdentity.load(NodeHome(root).key_path)
    out: list[Entry] = []
    for k in range(n):
        parents = (out[-1].id,) if out else ()
        ts = f"2026-03-01T{10 + k // 3600:02d}:{k // 60 % 60:02d}:{k % 60:02d}.000000Z"
        out.append(Entry.create(ts=ts, kind="note", summary=f"bulk {k}", parents=parents))
    async with await SqliteStore.open(root / ".lifeline" / "ledger.db") as store:
        await store.append_many(out)
        await sign_entries(store, identity, out)


def test_a_hub_killed_mid_admission_keeps_whole_batches(cluster: Cluster, tmp_path: Path) -> None:
    url = asyncio.run(fresh_database(cluster.url))
    _node(tmp_path / "hub")
    laptop = tmp_path / "laptop"
    _node(laptop)
    asyncio.run(_signed_chain(laptop, 6000))
    with hub(tmp_path / "hub", url) as (proc, address):
        import subprocess
        import sys

        sync = subprocess.Popen(
            [sys.executable, "-m", "lifeline_mesh", "--root", str(laptop), "sync", address,
             "--insecure"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and asyncio.run(_signatures(url)) == 0:
            time.sleep(0.02)  # signatures first: the entries are on their way now
        assert asyncio.run(_signatures(url)) > 0, "the session never reached the hub"
        time.sleep(0.3)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        sync.communicate(timeout=120)
    held = asyncio.run(_consistent(url))  # whole batches only, whatever the moment
    assert 0 <= held <= 6000
    with hub(tmp_path / "hub", url) as (_again, address):  # a new process finishes the job
        cli("lifeline_mesh", laptop, "sync", address, "--insecure")
    assert asyncio.run(_consistent(url)) == 6000


async def _signatures(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        if not await conn.fetchval("SELECT to_regclass('attestations') IS NOT NULL"):
            return 0
        return int(await conn.fetchval("SELECT count(*) FROM attestations"))
    finally:
        await conn.close()
