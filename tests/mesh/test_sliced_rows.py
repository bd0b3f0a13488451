"""A large change's rows over the Watch calls (decision 0099): a change of up to
``ANNOUNCED_ROWS_MAX`` rows — what a catch-up session brings after a partition — is read
and announced in slices that each fit one announcement, instead of being announced without
rows (which made every watcher sync for it); and a node takes the slices it hears from
several peers at once one at a time, so each is verified and stored once and a later slice
finds its parents. Real line files, real signatures."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lifeline.entry import Entry, format_ts
from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.node.root import Node
from lifeline_mesh.notary.sign import sign_entries
from lifeline_mesh.peering.changes import ANNOUNCED_ROWS_MAX, ChangeFeed
from lifeline_mesh.peering.table import PeerAddress, PeerState
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.recon.sets import ParsedItem
from lifeline_mesh.transport.announce import MAX_CHANGE_ITEMS, ChangeItems
from tests.support.mesh_procs import signed_node

LINE = "ledger"
ROWS = 300  # a 5-minute partition's writes of the other half, in the fault lab


def _peer(address: str) -> PeerState:
    return PeerState(key=address, address=PeerAddress.parse(address), sources=set())


def _count(line: Path, table: str) -> int:
    with sqlite3.connect(line) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


async def _write_signed(root: Path, n: int) -> None:
    """``n`` more signed notes on ``root``'s line, each a child of the one before."""
    identity, _ = NodeIdentity.load_or_create(NodeHome(root))
    path = Home(root).line_path(LINE)
    with sqlite3.connect(path) as conn:
        prev = conn.execute("SELECT id FROM entries ORDER BY seq DESC LIMIT 1").fetchone()[0]
    batch = []
    now = datetime.now(UTC).timestamp()  # after their parent's, and not ahead of any clock
    for k in range(n):
        ts = format_ts(datetime.fromtimestamp(now + k / 1000, UTC))
        entry = Entry.create(ts=ts, kind="note", summary=f"note {k}", parents=(prev,))
        batch.append(entry)
        prev = entry.id
    async with await SqliteStore.open(path) as store:
        await store.append_many(batch)
        await sign_entries(store, identity, batch)


async def test_a_large_change_is_announced_in_slices_and_taken_once(tmp_path: Path) -> None:
    signed_node(tmp_path / "a", "first")
    signed_node(tmp_path / "b")
    await _write_signed(tmp_path / "a", ROWS - 1)
    a = Node(NodeHome(tmp_path / "a"), insecure=True)
    b = Node(NodeHome(tmp_path / "b"), insecure=True)

    # Read to announce: slices of at most MAX_CHANGE_ITEMS rows, parents first, all on a's
    # tree (a wrote them all), each with its entries' author signatures.
    runs = await a.rows.read(LINE, 0, ROWS)
    assert [len(r.entries) for r in runs] == [MAX_CHANGE_ITEMS, ROWS - MAX_CHANGE_ITEMS]
    assert all(r.fits() and r.tree == a.rows.tree for r in runs)
    assert [len(r.attestations) for r in runs] == [len(r.entries) for r in runs]

    # The feed announces such a change with its rows: a watcher gets the slices as two
    # announcements (merged, they would not fit one), not a bare "changed" to sync for.
    feed = ChangeFeed(lambda: [LINE], a.rows.read)
    path = a.home.line_path(LINE)
    with feed.subscribe(items=True) as sub:
        feed.publish_paths([path], {path: (0, ROWS)})
        assert await sub.next(5.0) == {LINE}
        announced = sub.take_items()[LINE]
        assert [len(r.entries) for r in announced] == [len(r.entries) for r in runs]
        # a larger change (a bulk sync) is still announced without rows: its watchers sync
        feed.publish_paths([path], {path: (0, ANNOUNCED_ROWS_MAX + 1)})
        assert await sub.next(5.0) == {LINE}
        assert sub.take_items() == {}
        feed.close()

    # b hears the first slice from two peers and the second from one of them, all at once:
    # the slices are taken one at a time, so the copy costs no second verification and
    # the second slice finds its parents (else it would be refused: a session instead).
    one, other = _peer("127.0.0.1:1"), _peer("127.0.0.1:2")
    taken = await asyncio.gather(
        b.take_rows(one, announced[0]),
        b.take_rows(other, announced[0]),
        b.take_rows(other, announced[1]),
    )
    assert list(taken) == [True, True, True]
    assert b.rows.taken == {"changes": 2, "entries": ROWS, "refused": 0, "held": 1}
    line_b = b.home.line_path(LINE)
    assert _count(line_b, "entries") == ROWS
    assert _count(line_b, "attestations") >= ROWS  # each author signature, and b's statements


async def test_rows_a_session_stored_meanwhile_are_held_after_a_take(tmp_path: Path) -> None:
    """Rows announced while a session stored some of them are held once taken: a third
    copy from another peer is not verified again (decision 0099)."""
    signed_node(tmp_path / "a", "first", "second")
    signed_node(tmp_path / "b")
    a = Node(NodeHome(tmp_path / "a"), insecure=True)
    b = Node(NodeHome(tmp_path / "b"), insecure=True)
    [rows] = await a.rows.read(LINE, 0, 2)
    first = ChangeItems(LINE, rows.attestations[:1], rows.entries[:1])
    assert await b.take_rows(_peer("127.0.0.1:1"), first)
    b.rows.held = type(b.rows.held)()  # as if a session, not a take, had stored the first
    assert await b.take_rows(_peer("127.0.0.1:2"), rows)  # one new, one stored already
    before = dict(b.rows.taken)
    assert await b.take_rows(_peer("127.0.0.1:3"), rows)
    assert b.rows.taken["held"] == before["held"] + 1
    assert b.rows.taken["changes"] == before["changes"]


async def test_a_copy_of_rows_taken_is_known_by_its_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relay heard from several peers: the copies of rows taken already are recognised
    by a digest of their bytes, not parsed again; bytes altered in any way are parsed,
    refused, and store nothing (decision 0100)."""
    signed_node(tmp_path / "a", "first", "second")
    signed_node(tmp_path / "b")
    a = Node(NodeHome(tmp_path / "a"), insecure=True)
    b = Node(NodeHome(tmp_path / "b"), insecure=True)
    [rows] = await a.rows.read(LINE, 0, 2)
    parsed: list[bytes] = []
    parse = EntryCodec.parse

    def counted(codec: EntryCodec, raw: bytes) -> ParsedItem:
        parsed.append(raw)
        return parse(codec, raw)

    monkeypatch.setattr(EntryCodec, "parse", counted)
    assert await b.take_rows(_peer("127.0.0.1:1"), rows)
    assert len(parsed) == 2
    for port in (2, 3):  # the same rows from two more peers: held, nothing parsed
        assert await b.take_rows(_peer(f"127.0.0.1:{port}"), rows)
    assert len(parsed) == 2 and b.rows.taken["held"] == 2

    # the same entry with one byte changed (its id kept): parsed, refused, nothing stored
    entries_before = _count(b.home.line_path(LINE), "entries")
    altered = rows.entries[1].replace(b'"summary":"second"', b'"summary":"secont"')
    assert altered != rows.entries[1]
    forged = ChangeItems(LINE, rows.attestations, (rows.entries[0], altered), tree=rows.tree)
    assert not await b.take_rows(_peer("127.0.0.1:4"), forged)
    assert parsed[-1] == altered and b.rows.taken["refused"] == 1
    assert _count(b.home.line_path(LINE), "entries") == entries_before
