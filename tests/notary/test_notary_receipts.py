"""Witness receipts are found by the entries they name, through a short key: a receipt
that only shares the key with an entry is never taken for one that names it; a line
written with the first notary schema keeps its receipts."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.errors import BadSignature
from lifeline.store.schema import _statements, apply_migrations, line_schema
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.notary.sign import receipts, witness
from lifeline_mesh.notary.statement import Role, sign
from lifeline_mesh.notary.storage import NotaryStore, receipts_naming

T0 = "2026-03-01T12:00:00.000000Z"
WITNESS = NodeIdentity.generate()
X = "ab" * 8 + "0" * 48  # X and Y share their first 16 characters: one index key
Y = "ab" * 8 + "1" * 48
Z = "cd" * 32


async def test_a_shared_key_never_mixes_up_two_entries(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path / "line.db") as store:
        await NotaryStore.attach(store)
        [for_x] = await witness(store, WITNESS, [X, Z], T0)
        found = await store.run_read(lambda conn: receipts_naming(conn, [X, Y, Z]))
        assert found == {X: [for_x], Z: [for_x]}
        [for_y] = await witness(store, WITNESS, [Y], "2026-03-01T12:00:01.000000Z")
        found = await store.run_read(lambda conn: receipts_naming(conn, [X, Y]))
        assert found == {X: [for_x], Y: [for_y]}
        assert await store.run_read(lambda conn: receipts_naming(conn, ["ef" * 32])) == {}


async def test_receipts_of_the_first_schema_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    apply_migrations(conn, line_schema())  # every component, then back to notary v1
    conn.execute("DROP TABLE witnessed_keys")
    conn.execute("DELETE FROM schema_migrations WHERE component = 'notary' AND version = 2")
    version, script = line_schema()["notary"][0]
    assert version == 1
    for statement in _statements(script):
        if "CREATE TABLE witnessed" in statement:
            conn.execute(statement)
    [receipt] = receipts(WITNESS, [X, Z], T0)
    conn.execute(
        "INSERT INTO attestations (id, sort_key, role, subject, node_id, ts, item)"
        " VALUES (?,?,?,?,?,?,?)",
        (receipt.id, receipt.sort_key, "witness", receipt.subject, receipt.node_id,
         receipt.ts, receipt.item),
    )  # fmt: skip
    for entry_id in (X, Z):  # the first schema's index rows
        conn.execute(
            "INSERT INTO witnessed VALUES (?, ?, ?, ?)",
            (entry_id, receipt.id, receipt.node_id, receipt.ts),
        )
    conn.execute("UPDATE schema_migrations SET applied_at = ?", (time.time(),))
    conn.close()

    async with await SqliteStore.open(path) as store:
        await NotaryStore.attach(store)
        found = await store.run_read(lambda conn: receipts_naming(conn, [X, Y, Z]))
        assert found == {X: [receipt], Z: [receipt]}
    check = sqlite3.connect(path)
    tables = {r[0] for r in check.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    check.close()
    assert "witnessed" not in tables and "witnessed_keys" in tables


async def test_author_signatures_of_entries_sharing_a_key_stay_apart(tmp_path: Path) -> None:
    author = NodeIdentity.generate()
    ts_x, ts_y = "2026-03-01T10:00:00.000000Z", "2026-03-01T11:00:00.000000Z"
    async with await SqliteStore.open(tmp_path / "line.db") as store:
        notary = await NotaryStore.attach(store)
        await notary.add([sign(author, Role.AUTHOR, X, ts_x), sign(author, Role.AUTHOR, Y, ts_y)])

        def entry(entry_id: str, ts: str) -> Entry:  # only the id and ts matter here
            return Entry(entry_id, ts, "note", "", "human", "none", "human", "s", "")

        await notary.check_entries([entry(X, ts_x), entry(Y, ts_y)])
        with pytest.raises(BadSignature, match="time was edited"):
            await notary.check_entries([entry(X, ts_y)])  # Y's time is no proof for X
