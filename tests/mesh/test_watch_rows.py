"""A change's rows over the Watch calls (decision 0046): the feed reads each change once, in
order, for the subscribers that take rows; a subscriber keeps every change's rows or none
(then it syncs); and a node takes announced rows through the same checks as a session's
items — real line files, real signatures — or refuses them and leaves its line untouched."""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.node.live_rows import HeldIds
from lifeline_mesh.node.root import Node
from lifeline_mesh.peering.changes import ANNOUNCED_ROWS_MAX, PENDING_ITEMS_MAX, ChangeFeed
from lifeline_mesh.peering.table import PeerAddress, PeerState
from lifeline_mesh.transport.announce import ChangeItems, tree_of
from tests.support.mesh_procs import cli, signed_node

LINE = "ledger"


def _rows(n: int, line: str = LINE) -> ChangeItems:
    return ChangeItems(line, (b"att%d" % n,), (b"entry%d" % n,))


def _one(runs: list[ChangeItems]) -> ChangeItems:
    """The rows of a line sent as one announcement (all on one tree)."""
    [rows] = runs
    return rows


async def test_a_subscriber_gets_every_change_s_rows_in_order() -> None:
    feed = ChangeFeed(lambda: [LINE])
    with feed.subscribe(items=True) as sub, feed.subscribe() as plain_sub:
        feed.publish([LINE], _rows(1))
        feed.publish([LINE], _rows(2))
        assert await sub.next(0) == {LINE}
        taken = _one(sub.take_items()[LINE])
        assert taken.entries == (b"entry1", b"entry2")
        assert taken.attestations == (b"att1", b"att2")
        assert sub.take_items() == {}  # taken once
        # a subscriber that did not ask for rows hears of the line only
        assert await plain_sub.next(0) == {LINE}
        assert plain_sub.take_items() == {}


async def test_rows_of_two_trees_are_sent_as_two_announcements() -> None:
    """Changes a subscriber has not taken yet are merged only on one tree of relays: rows
    of another tree stay a run of their own, so neither is flooded to every peer as rows
    of no tree (decision 0094)."""
    feed = ChangeFeed(lambda: [LINE])
    on_a, on_b = tree_of("node-a"), tree_of("node-b")
    with feed.subscribe(items=True) as sub:
        for n, tree in ((1, on_a), (2, on_a), (3, on_b), (4, on_a)):
            feed.publish([LINE], replace(_rows(n), tree=tree))
        assert await sub.next(0) == {LINE}
        runs = sub.take_items()[LINE]
        assert [(r.tree, r.entries) for r in runs] == [
            (on_a, (b"entry1", b"entry2")),
            (on_b, (b"entry3",)),
            (on_a, (b"entry4",)),
        ]


async def test_one_change_without_rows_makes_the_line_plain_until_taken() -> None:
    feed = ChangeFeed(lambda: [LINE, "other"])
    with feed.subscribe(items=True) as sub:
        feed.publish([LINE], _rows(1))
        feed.publish([LINE])  # rows not at hand: the subscriber must sync for this line
        feed.publish([LINE], _rows(2))  # a later change's rows alone would leave a gap
        feed.publish(["other"], _rows(3, "other"))
        assert await sub.next(0) == {LINE, "other"}
        assert set(sub.take_items()) == {"other"}
        feed.publish([LINE], _rows(4))  # after the sync: rows again
        assert await sub.next(0) == {LINE}
        assert _one(sub.take_items()[LINE]).entries == (b"entry4",)


async def test_a_stalled_subscriber_keeps_lines_not_rows() -> None:
    feed = ChangeFeed(lambda: [LINE])
    with feed.subscribe(items=True) as sub:
        for n in range(PENDING_ITEMS_MAX + 1):
            feed.publish([LINE], _rows(n))
        assert await sub.next(0) == {LINE}
        assert sub.take_items() == {}


async def test_the_feed_reads_each_change_once_in_order_and_only_for_takers() -> None:
    calls: list[tuple[str, int, int]] = []
    started = asyncio.Event()
    release = asyncio.Event()

    async def read(line: str, after: int, upto: int) -> list[ChangeItems]:
        calls.append((line, after, upto))
        started.set()
        await release.wait()
        if upto == 9:
            raise sqlite3.OperationalError("database is locked")
        return [_rows(upto)]

    feed = ChangeFeed(lambda: [LINE], read)
    path = Path(f"/nowhere/{LINE}.db")
    with feed.subscribe() as sub:  # nobody takes rows: nothing is read
        feed.publish_paths([path], {path: (1, 2)})
        assert await sub.next(0) == {LINE}
        assert calls == []
    with feed.subscribe(items=True) as sub:
        feed.publish_paths([path], {path: (2, 3)})
        feed.publish_paths([path], {path: (3, 5)})
        await started.wait()
        assert await sub.next(0) == set()  # nothing announced while its rows are read
        release.set()
        entries: tuple[bytes, ...] = ()
        while len(entries) < 2:
            assert await sub.next(5.0) == {LINE}
            entries += _one(sub.take_items()[LINE]).entries
        assert entries == (b"entry3", b"entry5")  # each read once, in the order of changes
        assert calls == [(LINE, 2, 3), (LINE, 3, 5)]
        # too many rows (more than a few slices: decision 0099), or no earlier mark:
        # announced at once, without rows
        feed.publish_paths([path], {path: (5, 6 + ANNOUNCED_ROWS_MAX)})
        feed.publish_paths([path], {path: (None, 3)})
        assert len(calls) == 2
        # a read that fails: the change is announced without its rows
        feed.publish_paths([path], {path: (8, 9)})
        while len(calls) < 3:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert await sub.next(0) == {LINE}
        assert sub.take_items() == {}
        feed.close()


def test_held_ids_forget_the_oldest_first() -> None:
    held = HeldIds(per_line=3)
    held.add(LINE, ["a", "b", "c"])
    held.add(LINE, ["a", "d"])  # "a" seen again: now the newest
    assert held.holds(LINE, ["a", "c", "d"])
    assert not held.holds(LINE, ["b"])
    assert not held.holds("other", ["a"])


# -- a node takes announced rows --------------------------------------------------------


def _peer(address: str = "127.0.0.1:1") -> PeerState:
    return PeerState(key=address, address=PeerAddress.parse(address), sources=set())


def _count(line: Path, table: str) -> int:
    with sqlite3.connect(line) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


async def _all_rows(node: Node) -> ChangeItems:
    with sqlite3.connect(node.home.line_path(LINE)) as conn:
        mark = int(conn.execute("SELECT max(seq) FROM entries").fetchone()[0])
    return _one(await node.rows.read(LINE, 0, mark))


async def _append_signed(node: Node, summary: str) -> ChangeItems:
    """`lifeline log` one more signed decision on ``node``: its rows, as announced."""
    before = _count(node.home.line_path(LINE), "entries")
    cli("lifeline", node.home.root, "log", "--kind", "decision", "--summary", summary)
    return _one(await node.rows.read(LINE, before, before + 1))


@pytest.fixture
def two_nodes(tmp_path: Path) -> tuple[Node, Node]:
    """Two lab nodes with identities; the first holds three signed decisions."""
    signed_node(tmp_path / "a", "first", "second", "third")
    signed_node(tmp_path / "b")
    a = Node(NodeHome(tmp_path / "a"), insecure=True)
    b = Node(NodeHome(tmp_path / "b"), insecure=True)
    return a, b


async def test_rows_read_on_one_node_are_taken_by_another(two_nodes: tuple[Node, Node]) -> None:
    a, b = two_nodes
    rows = await _all_rows(a)
    assert len(rows.entries) == 3 and len(rows.attestations) == 3
    line_b = b.home.line_path(LINE)
    assert await b.take_rows(_peer(), rows)
    assert _count(line_b, "entries") == 3
    # each entry with its author's signature, and one state statement by b for the new state
    assert _count(line_b, "attestations") == 3
    assert _count(line_b, "statements") == 1
    assert b.rows.taken == {"changes": 1, "entries": 3, "refused": 0, "held": 0}
    # the same rows again (a rebound from another peer): nothing to do, nothing signed
    assert await b.take_rows(_peer(), rows)
    assert _count(line_b, "statements") == 1
    assert b.rows.taken["changes"] == 1 and b.rows.taken["held"] == 1
    # a later change: b's line watcher sees row 4 appear, and announcing it to b's own
    # watchers reuses the rows just taken instead of reading them back
    later = await _append_signed(a, "fourth")
    assert await b.take_rows(_peer(), later)
    announced = _one(await b.rows.read(LINE, 3, 4))  # the rows just taken, with their sender
    assert announced.entries is later.entries
    assert announced.source == str(_peer().address)
    assert announced.tree == later.tree == a.rows.tree  # a relay keeps a's tree (0083)
    # The same rows again from another peer store nothing: the rows taken are still known
    assert await b.take_rows(_peer(), later)
    assert _one(await b.rows.read(LINE, 3, 4)).entries is later.entries
    # b writes one of its own, and takes another of a's, before its watcher polls: the
    # change is announced as three runs, each on its tree (decision 0094)
    own = await _append_signed(b, "b's own")  # read here from the line: on b's tree
    assert own.tree == b.rows.tree and a.rows.tree and b.rows.tree != a.rows.tree
    fifth = await _append_signed(a, "fifth")
    assert await b.take_rows(_peer(), fifth)
    runs = await b.rows.read(LINE, 3, 6)
    assert [r.tree for r in runs] == [a.rows.tree, b.rows.tree, a.rows.tree]
    assert runs[0].entries is later.entries and runs[2].entries is fifth.entries
    assert runs[1].entries == own.entries
    # rows taken long ago are not kept: read from the line, a's rows are on no tree
    b.rows._takes.clear()
    assert await b.rows.read(LINE, 3, 4) == [replace(later, tree=b"")]
    # what a node read to announce counts as held: its own rows coming back are free
    assert a.rows.held.holds(LINE, [Entry.from_json(r, check=False).id for r in rows.entries])


async def test_rows_that_cannot_all_be_admitted_are_refused_whole(
    two_nodes: tuple[Node, Node],
) -> None:
    a, b = two_nodes
    rows = await _all_rows(a)
    line_b = b.home.line_path(LINE)
    # the last entry alone: its parent is not held here, so b must sync instead
    orphan = ChangeItems(LINE, rows.attestations[-1:], rows.entries[-1:])
    assert not await b.take_rows(_peer(), orphan)
    # a forged signature (its last byte altered): the batch is refused whole
    forged = (
        *rows.attestations[:-1],
        rows.attestations[-1][:-1] + bytes([rows.attestations[-1][-1] ^ 1]),
    )
    assert not await b.take_rows(_peer(), ChangeItems(LINE, forged, rows.entries))
    # an altered entry: its content no longer gives its id
    tampered = ChangeItems(
        LINE, rows.attestations, (*rows.entries[:-1], rows.entries[-1].replace(b"third", b"THIRD"))
    )
    assert not await b.take_rows(_peer(), tampered)
    # an item over the session's size cap
    huge = ChangeItems(
        LINE, rows.attestations, (*rows.entries, b"x" * (b.limits.max_item_bytes + 1))
    )
    assert not await b.take_rows(_peer(), huge)
    assert _count(line_b, "entries") == 0
    assert _count(line_b, "statements") == 0
    assert b.rows.taken["refused"] == 4
    assert await b.take_rows(_peer(), rows)  # the whole change is still taken after all that
    assert _count(line_b, "entries") == 3


async def test_a_mesh_node_takes_rows_only_from_the_member_it_found_at_that_address(
    tmp_path: Path,
) -> None:
    signed_node(tmp_path / "a", "first")
    signed_node(tmp_path / "b")
    a = Node(NodeHome(tmp_path / "a"), insecure=True)
    rows = await _all_rows(a)
    b_home = NodeHome(tmp_path / "b")
    # b in a mesh of its own (TLS): the address's node is known only once a session met it
    cli("lifeline_mesh", tmp_path / "b", "init", "--new-mesh", "team")
    b = Node(b_home)
    peer = _peer("127.0.0.1:7")
    assert not await b.take_rows(peer, rows)
    identity = NodeIdentity.maybe_of(a.home)
    assert identity is not None
    a_id = identity.node_id
    b.pins.known[str(peer.address)] = a_id
    cli("lifeline_mesh", tmp_path / "b", "revoke", a_id, "--reason", "test")
    assert not await b.take_rows(peer, rows)
    assert _count(b_home.line_path(LINE), "entries") == 0


def _sources(line: Path) -> list[tuple[str, str, str, str]]:
    with sqlite3.connect(line) as conn:
        sql = "SELECT entry_id, ts, source, outcome FROM entry_sources ORDER BY outcome, entry_id"
        return [tuple(r) for r in conn.execute(sql)]


def _ts_of(line: Path, entry_id: str) -> str:
    with sqlite3.connect(line) as conn:
        return str(conn.execute("SELECT ts FROM entries WHERE id = ?", (entry_id,)).fetchone()[0])


async def test_announced_rows_cannot_rewrite_another_node_s_entry(
    two_nodes: tuple[Node, Node],
) -> None:
    """Decision 0048 on the Watch path: an announced copy of a's last entry, backdated and
    without its signature, is stored provisionally and named with the announcing peer; a's
    signed rows then give it back its signed ts; announced again, the copy is refused alone
    (the rows are taken: no session needed) and named."""
    a, b = two_nodes
    rows = await _all_rows(a)
    last = Entry.from_json(rows.entries[-1], check=False)
    when = dt.datetime.strptime(last.ts, "%Y-%m-%dT%H:%M:%S.%fZ") - dt.timedelta(seconds=60)
    early = when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # within the skew of its parent's ts
    copy = last.with_ts(early).to_json()
    line_b = b.home.line_path(LINE)
    relay = ChangeItems(LINE, rows.attestations[:-1], (*rows.entries[:-1], copy))
    rogue = _peer("127.0.0.1:9")
    assert await b.take_rows(rogue, relay)
    assert _ts_of(line_b, last.id) == early and early != last.ts
    assert _sources(line_b) == [(last.id, early, "127.0.0.1:9", "unsigned")]
    assert await b.take_rows(_peer(), rows)  # the author's signature arrives
    assert _ts_of(line_b, last.id) == last.ts
    assert (last.id, early, "127.0.0.1:9", "replaced") in _sources(line_b)
    b.rows.held = HeldIds()  # forget what was taken: the copy is looked at again
    assert await b.take_rows(rogue, relay)  # taken (the rest is held): no session needed
    assert _ts_of(line_b, last.id) == last.ts
    assert (last.id, early, "127.0.0.1:9", "refused") in _sources(line_b)
