"""Which address a discovered peer is dialed at, when anyone can send an advert naming it
(decision 0121). Pure table rules, then the real ``PeerWatches`` and ``SyncScheduler``
with a fake watch that answers as another node would."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from hypothesis import given
from hypothesis import strategies as st

from lifeline_mesh.peering.scheduler import SyncScheduler
from lifeline_mesh.peering.table import MAX_CANDIDATES, PeerAddress, PeerState, PeerTable
from lifeline_mesh.peering.watches import WATCH_BACKOFF, Heard, PeerWatches

NODE_X, NODE_Y = "aaaa-aaaa-aaaa-aaaa-xx", "bbbb-bbbb-bbbb-bbbb-yy"
REAL, FORGED, OTHER = (PeerAddress(f"10.0.0.{i}", 7411) for i in (1, 66, 2))


def _answered_row(table: PeerTable) -> PeerState:
    """X's row, where X answered a Watch call at REAL."""
    peer = table.discovered(NODE_X, (REAL,))
    assert peer is not None
    assert table.answered(peer, NODE_X, REAL)
    return peer


def test_an_advert_does_not_move_a_peer_off_the_address_its_node_answered_at() -> None:
    table = PeerTable()
    peer = _answered_row(table)
    assert table.discovered(NODE_X, (FORGED,)) is peer
    assert peer.address == REAL and peer.addresses == (REAL, FORGED)  # a candidate
    assert peer.to_json(mono_now=0, wall_now=0)["candidates"] == [str(FORGED)]
    # REAL fails: FORGED is tried; it fails too and is dropped; REAL stays
    assert table.unreachable(peer, REAL) and peer.address == FORGED
    assert table.unreachable(peer, FORGED) and peer.address == REAL
    assert peer.addresses == (REAL,)
    # a failure of another dial than the current one moves nothing
    assert not table.unreachable(peer, FORGED) and peer.address == REAL


def test_an_unanswered_row_follows_the_latest_advert_and_keeps_the_others() -> None:
    table = PeerTable()
    peer = table.discovered(NODE_X, (FORGED,))
    assert peer is not None and table.discovered(NODE_X, (REAL,)) is peer
    assert peer.address == REAL and peer.addresses == (REAL, FORGED)
    # REAL is down for now: FORGED is tried, and goes when it fails (no node answered there)
    assert table.unreachable(peer, REAL) and peer.address == FORGED
    assert peer.addresses == (FORGED,)  # REAL went: it had not answered either
    assert not table.unreachable(peer, FORGED)  # the last address stays


def test_a_node_that_moved_is_reached_at_its_new_address() -> None:
    table = PeerTable()
    peer = _answered_row(table)
    table.discovered(NODE_X, (OTHER,))  # its new address: a candidate
    assert table.unreachable(peer, REAL) and peer.address == OTHER
    assert table.answered(peer, NODE_X, OTHER)  # it answers there: the row stays there
    table.discovered(NODE_X, (OTHER,))
    assert peer.address == OTHER


def test_an_address_where_another_node_answered_is_dropped_and_never_tried_again() -> None:
    table = PeerTable()
    peer = table.discovered(NODE_X, (FORGED, REAL))
    assert peer is not None and peer.address == FORGED
    # Y answers at FORGED: the row moves on, and X's adverts never bring FORGED back
    assert not table.answered(peer, NODE_Y, FORGED)
    assert peer.address == REAL and peer.addresses == (REAL,)
    assert table.discovered(NODE_X, (FORGED,)) is peer and peer.addresses == (REAL,)
    # an advert naming only addresses of other nodes makes no row
    table.lost(NODE_X)
    assert table.discovered(NODE_X, (FORGED,)) is None and len(table) == 0
    # ... and a row whose only address answers as another node goes
    lone = table.discovered(NODE_X, (OTHER,))
    assert lone is not None and not table.answered(lone, NODE_Y, OTHER)
    assert len(table) == 0


def test_a_row_made_again_starts_at_the_address_its_node_answered_at() -> None:
    table = PeerTable()
    _answered_row(table)
    table.lost(NODE_X)  # a goodbye
    again = table.discovered(NODE_X, (FORGED,))
    assert again is not None and again.address == REAL and again.addresses == (REAL, FORGED)


def test_the_address_a_watcher_calls_from_is_tried_before_unanswered_ones() -> None:
    table = PeerTable()
    peer = table.discovered(NODE_X, (FORGED,))
    assert peer is not None
    assert table.watched_by(NODE_X, REAL) is None  # it has a row: no second one
    assert peer.address == REAL and peer.addresses == (REAL, FORGED)


@given(
    adverts=st.lists(
        st.lists(st.integers(2, 250).map(lambda i: PeerAddress(f"10.0.1.{i}", 7411)), min_size=1),
        max_size=30,
    )
)
def test_whatever_adverts_say_the_answered_address_stays_and_candidates_are_bounded(
    adverts: list[list[PeerAddress]],
) -> None:
    table = PeerTable()
    peer = _answered_row(table)
    for addresses in adverts:
        assert table.discovered(NODE_X, tuple(addresses)) is peer
        assert peer.address == REAL and peer.addresses[0] == REAL
        assert len(peer.addresses) <= MAX_CANDIDATES


async def test_a_watch_call_answered_by_another_node_is_closed_and_the_next_address_dialed() -> (
    None
):
    scheduler = SyncScheduler(_never, rand=lambda: 0.0)
    peer = scheduler.table.discovered(NODE_X, (FORGED, REAL))
    assert peer is not None
    dialed: list[PeerAddress] = []
    closed: list[PeerAddress] = []
    opened = asyncio.Event()

    async def watch_one(row: PeerState) -> AsyncIterator[Heard]:
        address = row.address
        dialed.append(address)
        try:
            # the node's hello, over the channel pinned to whoever serves there
            scheduler.learned(row.key, NODE_Y if address == FORGED else NODE_X)
            yield Heard.OPENED
            if address == REAL:
                opened.set()
            await asyncio.Event().wait()  # the call stays open
        finally:
            closed.append(address)

    watches = PeerWatches(scheduler, watch_one, policy=WATCH_BACKOFF)
    async with asyncio.timeout(10), asyncio.TaskGroup() as tg:
        watches.start(tg)
        await opened.wait()
        assert dialed == [FORGED, REAL] and closed == [FORGED]
        assert watches.live == {peer.key} and peer.address == REAL
        assert scheduler.table.serving == {FORGED: NODE_Y, REAL: NODE_X}
        for task in watches._tasks.values():
            task.cancel()


async def test_a_failed_dial_moves_the_row_to_its_next_address() -> None:
    scheduler = SyncScheduler(_refused, rand=lambda: 0.0)
    peer = scheduler.table.discovered(NODE_X, (FORGED, REAL))
    assert peer is not None
    await scheduler._session(peer)
    assert peer.address == REAL and peer.addresses == (REAL,) and peer.failures == 1


async def _never(peer: PeerState) -> str:
    raise AssertionError("no session runs in this test")


async def _refused(peer: PeerState) -> str:
    raise ConnectionRefusedError(f"nothing listens at {peer.address}")
