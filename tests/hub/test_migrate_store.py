"""`lifeline-mesh migrate-store`: a node's lines and evidence to PostgreSQL and back, with
the real CLI; each copy verified, a second run adds nothing (resumable), bad input is one
line."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import asyncpg
import pytest

from lifeline.entry import Entry
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.notary.seals import SEAL_MIN
from lifeline_mesh.notary.sign import sign_entries
from tests.support.mesh_procs import cli, log_note, shared_node
from tests.support.pg_server import fresh_database

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # real processes, a loaded box


def _evidence(root: Path) -> set[bytes]:
    conn = sqlite3.connect(root / ".lifeline" / "ledger.db")
    try:
        rows = conn.execute("SELECT item FROM attestations UNION SELECT item FROM statements")
        return {bytes(r[0]) for r in rows}
    finally:
        conn.close()


async def _nul_entry(root: Path, parent: str) -> str:
    """A signed entry holding U+0000 (no command line can carry one)."""
    entry = Entry.create(
        ts="2026-03-01T10:00:00.000000Z", kind="note", summary="a\x00NUL", parents=(parent,)
    )
    async with await SqliteStore.open(root / ".lifeline" / "ledger.db") as store:
        await store.append(entry)
        await sign_entries(store, NodeIdentity.load(NodeHome(root).key_path), [entry])
    return entry.id


async def _read_models(url: str) -> dict[str, tuple[int, int]]:
    """Per line: the rows its truth tables and its recall index cover."""
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT l.name, c.count, r.docs FROM lines l JOIN truth_core c USING (line_id)"
            " JOIN recall_mark r USING (line_id)"
        )
        return {str(n): (int(c), int(d)) for n, c, d in rows}
    finally:
        await conn.close()


def test_lines_go_to_postgresql_and_back_verified(pg_server: str, tmp_path: Path) -> None:
    laptop = tmp_path / "laptop"
    shared_node(laptop)
    cli("lifeline_mesh", laptop, "init")
    ids = [log_note(laptop, f"note {k}") for k in range(3)]
    ids.append(asyncio.run(_nul_entry(laptop, ids[-1])))
    cli("lifeline", laptop, "--line", "research", "init")
    cli("lifeline", laptop, "--line", "research", "log", "--kind", "note", "--summary", "r")
    url = asyncio.run(fresh_database(pg_server))
    first = json.loads(cli("lifeline_mesh", laptop, "migrate-store", str(laptop), url,
                           "--json").stdout)  # fmt: skip
    by_line = {c["line"]: c for c in first}
    assert set(by_line) == {"ledger", "research"} and all(c["verified"] for c in first)
    assert by_line["ledger"]["entries"] == 4 == by_line["ledger"]["added"]
    assert by_line["ledger"]["attestations"] == 4  # each entry's author signature
    # ready to read: truth tables and recall index made by the copy, not by a first reader
    assert asyncio.run(_read_models(url)) == {"ledger": (4, 4), "research": (1, 1)}
    again = json.loads(cli("lifeline_mesh", laptop, "migrate-store", str(laptop), url,
                           "--json").stdout)  # fmt: skip
    assert [c["added"] for c in again] == [0, 0]  # resumable: what is there is kept
    back = tmp_path / "restored"
    done = cli("lifeline_mesh", laptop, "migrate-store", url, str(back), "--line", "ledger")
    assert "ledger: 4 entries (4 new), 4 attestations" in done.stdout and "verified" in done.stdout
    history = json.loads(cli("lifeline", back, "history", "--json").stdout)
    assert sorted(e["id"] for e in history) == sorted(ids)
    assert any("\x00" in e["summary"] for e in history)  # U+0000 survived PostgreSQL
    assert _evidence(back) == _evidence(laptop)


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    nowhere = tmp_path / "empty"
    nowhere.mkdir()
    done = cli("lifeline_mesh", tmp_path, "migrate-store", str(nowhere), str(tmp_path / "x"),
               check=False)  # fmt: skip
    assert done.returncode == 2 and "holds no .lifeline/ folder" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    same = cli("lifeline_mesh", tmp_path, "migrate-store", "a", "a", check=False)
    assert same.returncode == 2 and "the same" in same.stderr


def _seals(root: Path) -> list[tuple[bytes, int, int]]:
    conn = sqlite3.connect(root / ".lifeline" / "ledger.db")
    try:
        rows = conn.execute("SELECT item, first_key, last_key FROM seals ORDER BY first_key")
        return [(bytes(i), int(lo), int(hi)) for i, lo, hi in rows]
    finally:
        conn.close()


async def _bulk(root: Path, n: int) -> None:
    """``n`` signed entries written at once: sealed (decision 0149)."""
    entries = [
        Entry.create(ts=f"2026-03-01T10:00:{k:02d}.000000Z", kind="note", summary=f"bulk {k}")
        for k in range(n)
    ]
    async with await SqliteStore.open(root / ".lifeline" / "ledger.db") as store:
        await store.append_many(entries)
        await sign_entries(store, NodeIdentity.load(NodeHome(root).key_path), entries)


def test_a_lines_seals_go_along_checked(pg_server: str, tmp_path: Path) -> None:
    laptop = tmp_path / "laptop"
    shared_node(laptop)
    cli("lifeline_mesh", laptop, "init")
    asyncio.run(_bulk(laptop, SEAL_MIN))
    [sealed] = _seals(laptop)
    url = asyncio.run(fresh_database(pg_server))
    cli("lifeline_mesh", laptop, "migrate-store", str(laptop), url)
    back = tmp_path / "restored"
    cli("lifeline_mesh", laptop, "migrate-store", url, str(back), "--line", "ledger")
    assert _seals(back) == [sealed]
    assert _evidence(back) == _evidence(laptop)
