"""Two `lifeline-mesh serve --store postgresql://…` processes on one database (a hub behind
a load balancer): laptops sync through either, write the same line at the same time, and
every copy converges with nothing lost, the notary's evidence included. Real processes, a
real PostgreSQL server (tests/support/pg_server.py)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import asyncpg
import pytest

from lifeline.ledger import Draft, Ledger
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.notary.sign import AuthorHook
from tests.support.mesh_procs import cli, shared_node
from tests.support.pg_server import fresh_database, hub

pytestmark = pytest.mark.slow


def _laptop(root: Path) -> None:
    shared_node(root)
    cli("lifeline_mesh", root, "init")  # a node key: every local write is signed


def _sync(root: Path, address: str) -> dict[str, object]:
    done = cli("lifeline_mesh", root, "sync", address, "--insecure", "--json")
    [report] = json.loads(done.stdout)
    assert isinstance(report, dict)
    return report


def _ids(root: Path) -> set[str]:
    out = cli("lifeline", root, "history", "--json").stdout
    return {e["id"] for e in json.loads(out)}


async def _hub_line(url: str) -> tuple[int, int, list[int], int]:
    """(entries kept in lines, entry rows, their row numbers, author signatures)."""
    conn = await asyncpg.connect(url)
    try:
        line_id, n = await conn.fetchrow("SELECT line_id, n FROM lines WHERE name = 'ledger'")
        seqs = [r[0] for r in await conn.fetch(
            "SELECT seq FROM entries WHERE line_id = $1 ORDER BY seq", line_id
        )]  # fmt: skip
        signed = await conn.fetchval(
            "SELECT count(*) FROM attestations WHERE line_id = $1 AND role = 'author'", line_id
        )
        return int(n), len(seqs), seqs, int(signed)
    finally:
        await conn.close()


async def _write_signed(root: Path, summaries: list[str]) -> list[str]:
    identity = NodeIdentity.load(NodeHome(root).key_path)
    async with await SqliteStore.open(root / ".lifeline" / "ledger.db") as store:
        ledger = Ledger(store, hooks=[AuthorHook(identity)])
        return [(await ledger.append(Draft("note", text)))[0].id for text in summaries]


@pytest.mark.timeout(900)  # real processes: minutes when the machine is loaded
def test_two_hub_processes_on_one_database_converge(pg_server: str, tmp_path: Path) -> None:
    url = asyncio.run(fresh_database(pg_server))
    hubs = [tmp_path / "hub1", tmp_path / "hub2"]
    laptops = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    for root in [*hubs, *laptops]:
        _laptop(root)  # a hub has a node key too: it signs the state it admitted
    with hub(hubs[0], url) as (one, first_address), hub(hubs[1], url) as (two, second):
        first = [first_address, second]
        written: dict[Path, list[str]] = {root: [] for root in laptops}
        failures: list[BaseException] = []

        def work(root: Path, address: str, rounds: int) -> None:
            try:
                for r in range(rounds):
                    # signed local writes, as `lifeline log` makes them (in-process: the
                    # concurrency under test is the hubs', and a subprocess per note is slow)
                    notes = [f"{root.name} round {r} note {k}" for k in range(3)]
                    written[root] += asyncio.run(_write_signed(root, notes))
                    _sync(root, address)
            except BaseException as exc:  # reported below, with the others' results
                failures.append(exc)

        # a and b write the same line through different hub processes at the same time;
        # c through the first, like a
        threads = [
            threading.Thread(target=work, args=(laptops[0], first[0], 3)),
            threading.Thread(target=work, args=(laptops[1], first[1], 3)),
            threading.Thread(target=work, args=(laptops[2], first[0], 2)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert not failures, failures
        everything = {i for ids in written.values() for i in ids}
        assert len(everything) == 24
        for root, via in zip(laptops, [first[1], first[0], first[1]], strict=True):
            _sync(root, via)  # each through the other process now
        _sync(laptops[0], first[0])
        for root in laptops:
            assert _ids(root) == everything, root.name
        n, rows, seqs, signed = asyncio.run(_hub_line(url))
        assert n == rows == len(everything) and seqs == list(range(1, rows + 1))
        assert signed == len(everything)  # every author signature reached the hub
        hub_ids = {cli("lifeline_mesh", h, "id").stdout.strip() for h in hubs}
        for root in laptops:  # every signature verifies; without a mesh no signer is a
            # member, so membership is all the audit can hold against them
            audit = cli("lifeline_mesh", root, "verify", "--json", "--require-signed",
                        check=False)  # fmt: skip
            [report] = json.loads(audit.stdout)["lines"]
            assert report["signed"] == len(everything) and report["unsigned"] == 0
            checks = {p["check"] for p in report["findings"]}
            assert checks == {"unknown-signer"}, report["findings"][:5]
            signers = {p["detail"].split(" by ")[1].split(",")[0] for p in report["findings"]}
            assert hub_ids <= signers  # the hubs' state statements reached the laptops
            # and no entry ever arrived without its signature, though each hub process
            # stored the other's rows between its reads (decision 0106)
            with sqlite3.connect(root / ".lifeline" / "ledger.db") as conn:
                arrived = conn.execute(
                    "SELECT count(*) FROM entry_sources WHERE outcome = 'unsigned'"
                ).fetchone()
            assert arrived == (0,), root.name
    for proc in (one, two):
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""


def test_an_unreachable_database_stops_serve_with_one_line(tmp_path: Path) -> None:
    root = tmp_path / "hub"
    shared_node(root)
    url = f"postgresql://postgres@/lifeline?host={tmp_path / 'no-server-here'}"
    done = subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "serve", "--insecure",
         "--listen", "127.0.0.1:0", "--store", url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0 and "listening" not in done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot use the PostgreSQL database" in lines[0], done.stderr
    assert "check that the server runs" in lines[0]
