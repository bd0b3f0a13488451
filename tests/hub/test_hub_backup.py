"""A hub's database backed up and restored with PostgreSQL's own tools (docs/hub.md, "Backup
and restore"): Debian's `pg_dump -Fc` of a hub that laptops synced with, `pg_restore` into a
fresh database, the original dropped, a hub process serving from the restored one, and a
newcomer that syncs from it holds every entry with a clean `verify`. Real processes, mutual
TLS in a real mesh, a real PostgreSQL server (tests/support/pg_server.py)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import asyncpg
import pytest

from tests.support.mesh_procs import cli, join_mesh, log_note, shared_node
from tests.support.pg_server import fresh_database, hub, server_binaries

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # real processes, a loaded box


def _tool(name: str, *args: str) -> None:
    folder = server_binaries()
    assert folder is not None  # the pg_server fixture started a server from these
    done = subprocess.run([str(folder / name), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{name}: {done.stderr}"


async def _drop(server: str, url: str) -> None:
    conn = await asyncpg.connect(server)
    try:
        await conn.execute(f'DROP DATABASE "{url.split("?")[0].rsplit("/", 1)[1]}"')
    finally:
        await conn.close()


def _sync(root: Path, address: str) -> dict[str, int]:
    [report] = json.loads(cli("lifeline_mesh", root, "sync", address, "--json").stdout)
    return dict(report)


def test_a_dumped_and_restored_hub_database_serves_a_clean_verify(
    pg_server: str, tmp_path: Path
) -> None:
    laptop, hub_root, newcomer = tmp_path / "laptop", tmp_path / "hub", tmp_path / "newcomer"
    for root in (laptop, hub_root, newcomer):
        shared_node(root)
    join_mesh(laptop, [hub_root, newcomer])  # the laptop holds the CA; all three are members
    ids = {log_note(laptop, f"before the backup {k}") for k in range(3)}
    url = asyncio.run(fresh_database(pg_server))
    with hub(hub_root, url, insecure=False) as (_, address):
        assert _sync(laptop, address)["entries_sent"] == 3
    dump = tmp_path / "hub.dump"
    _tool("pg_dump", "-Fc", "-f", str(dump), "-d", url)
    restored = asyncio.run(fresh_database(pg_server))
    _tool("pg_restore", "--no-owner", "--exit-on-error", "-d", restored, str(dump))
    asyncio.run(_drop(pg_server, url))  # only the restored copy is left
    with hub(hub_root, restored, insecure=False) as (_, address):
        got = _sync(newcomer, address)
        assert got["entries_received"] == 3 and got["signatures_received"] >= 3, got
        again = _sync(laptop, address)  # the restored hub holds all the laptop has
        assert again["entries_sent"] == again["entries_received"] == 0, again
    history = json.loads(cli("lifeline", newcomer, "history", "--json").stdout)
    assert {e["id"] for e in history} == ids
    audit = cli("lifeline_mesh", newcomer, "verify", "--json", "--require-signed")
    report = json.loads(audit.stdout)
    assert report["ok"] is True, report
    [line] = report["lines"]
    assert line["entries"] == line["signed"] == 3 and line["failures"] == 0, line
    assert line["findings"] == [], line["findings"]
