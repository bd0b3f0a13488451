"""The fast paths of a sync session sit behind one switch (lifeline_mesh/sync/fast.py).

With the switch off a session uses no helper process, reads no frame ahead, admits each
batch before it goes on and commits each batch alone; it must still store exactly what the
fast session stores (with `sync`'s grouped commits, too), row for row, in every table of
the line.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from lifeline.entry import Entry
from lifeline.errors import ConfigError, PeerError
from lifeline.store import sqlite_group
from lifeline_mesh.helpers import pool
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.node.root import NODE_LIMITS
from lifeline_mesh.notary import verifier
from lifeline_mesh.notary.sign import sign_entries
from lifeline_mesh.recon.session import SessionLimits
from lifeline_mesh.recon.sets import Snapshot
from lifeline_mesh.sync import driver, entry_offload
from lifeline_mesh.sync.entry_set import EntrySet
from lifeline_mesh.sync.fast import ENV, FAST, PLAIN, FastPaths
from tests.support.recon_helpers import chain
from tests.support.sync_helpers import make_node, serving, write

N = 400
NOW = "2026-03-01T12:00:00.000000Z"


def _entries(n: int) -> list[Entry]:
    out: list[Entry] = []
    for k in range(n):
        out.append(
            Entry.create(
                ts=f"2026-02-01T10:{k // 60 % 60:02d}:{k % 60:02d}.{k:06d}Z",
                kind="decision" if k % 3 else "note",
                summary=f"fast or plain {k} — ü",
                body=f"entry {k}",
                parents=tuple(e.id for e in out[-2:][: k % 3]),
            )
        )
    return out


def _tables(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of a line file, in a stable order."""
    conn = sqlite3.connect(path)
    try:
        names = [
            n
            for (n,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        return {n: sorted(conn.execute(f'SELECT * FROM "{n}"'), key=repr) for n in names}
    finally:
        conn.close()


async def _source(root: Path) -> None:
    """A signed line of N entries."""
    identity, _ = NodeIdentity.load_or_create(NodeHome(root))
    entries = _entries(N)
    async with make_node(root).open_line("ledger") as store:
        await store.append_many(entries)
        await sign_entries(store, identity, entries)


async def _synced(tmp_path: Path, name: str, fast: FastPaths) -> dict[str, list[tuple[Any, ...]]]:
    """A fresh receiver (the same identity each time) pulls the whole line, both on ``fast``."""
    # Small frames: the line travels in many batches, so batches overlap when fast.
    limits = SessionLimits(fetch_chunk=100, max_frame_bytes=64 << 10)
    a = make_node(tmp_path / "a", limits=limits, fast=fast, clock=lambda: NOW)
    root = tmp_path / name
    key = NodeHome(root).key_path
    key.parent.mkdir(parents=True)
    shutil.copy2(NodeHome(tmp_path / "receiver").key_path, key)
    b = make_node(root, limits=limits, fast=fast, clock=lambda: NOW)
    async with serving(a) as (_, address):
        [report] = await b.sync(address, ["ledger"])
    assert report.entries_received == N
    tables = _tables(NodeHome(root).line_path("ledger"))
    # when each migration ran: the one column that is a time of this run
    tables["schema_migrations"] = [row[:2] for row in tables["schema_migrations"]]
    return tables


async def test_a_sync_without_fast_paths_stores_exactly_what_a_fast_one_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every batch large enough for the helper processes, so the fast run uses them.
    monkeypatch.setattr(entry_offload, "MIN_OFFLOAD", 8)
    monkeypatch.setattr(verifier, "MIN_OFFLOAD", 8)
    calls: list[bytes] = []
    call = pool._Worker.call

    def counted(worker: Any, op: bytes, payload: object, local: Any) -> Any:
        calls.append(op)
        return call(worker, op, payload, local)

    monkeypatch.setattr(pool._Worker, "call", counted)

    await _source(tmp_path / "a")
    NodeIdentity.load_or_create(NodeHome(tmp_path / "receiver"))
    fast = await _synced(tmp_path, "fast", FAST)
    used_fast = len(calls)
    plain = await _synced(tmp_path, "plain", PLAIN)
    used_plain = len(calls) - used_fast
    # `sync`'s grouped writes, a group committed every ~300 rows: several in the pull
    monkeypatch.setattr(sqlite_group, "GROUP_CHANGES", 300)
    commits: list[bool] = []
    commit = sqlite_group.WriteGroup.commit

    def counted_commit(group: sqlite_group.WriteGroup, conn: sqlite3.Connection) -> None:
        commits.append(conn.in_transaction)
        commit(group, conn)

    monkeypatch.setattr(sqlite_group.WriteGroup, "commit", counted_commit)
    grouped = await _synced(tmp_path, "grouped", dataclasses.replace(FAST, grouped=True))
    assert sum(commits) >= 3, "the grouped pull committed several batches at a time"

    assert used_fast > 0, "the fast session checked batches in the helper processes"
    assert used_plain == 0, "the plain session used no helper process"
    assert fast["entries"] and len(fast["entries"]) == N
    assert fast.keys() == plain.keys() == grouped.keys()
    for table in fast:
        assert fast[table] == plain[table], f"table {table} differs"
        assert grouped[table] == plain[table], f"table {table} differs when grouped"


@pytest.mark.serial  # wall-clock bounds: a loaded machine's stalls would pass for silence
async def test_without_read_ahead_a_silent_peer_still_ends_in_the_idle_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wait for a frame is given up at the idle timeout while the read stays pending
    (cancelling it would cancel the gRPC call and lose the reason)."""
    monkeypatch.setattr(driver, "IDLE_TIMEOUT", 0.6)
    built = EntrySet.snapshot

    async def slow(self: EntrySet) -> Snapshot:
        if self.snapshots.cache is b.snapshots:  # the serving side is silent for longer than that
            await asyncio.sleep(1.5)
        return await built(self)

    monkeypatch.setattr(EntrySet, "snapshot", slow)
    no_keep_alive = dataclasses.replace(NODE_LIMITS, keep_alive=False)
    a = make_node(tmp_path / "a", limits=no_keep_alive, fast=PLAIN)
    b = make_node(tmp_path / "b", fast=PLAIN)
    await write(a, chain(40, "a"))
    await write(b, chain(30, "b"))
    async with serving(b) as (_, address):
        with pytest.raises(PeerError, match="sent nothing for 1s"):
            await a.sync(address, ["ledger"])


def test_the_switch_reads_the_environment() -> None:
    assert FastPaths.from_env({}) == FAST
    assert FastPaths.from_env({ENV: "on"}) == FAST
    assert FastPaths.from_env({ENV: "off"}) == PLAIN
    assert FastPaths.from_env({ENV: " 0 "}) == PLAIN
    assert not PLAIN.any and FAST.any
    with pytest.raises(ConfigError, match=f"{ENV}='sometimes' is not understood"):
        FastPaths.from_env({ENV: "sometimes"})


def test_a_node_takes_its_fast_paths_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "off")
    assert make_node(tmp_path / "off").fast == PLAIN
    monkeypatch.delenv(ENV)
    assert make_node(tmp_path / "on").fast == FAST
