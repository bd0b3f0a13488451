"""Catch-ups (decisions 0099, 0100): the session a reopened Watch call asks for runs one at
a time, never dropped, and on a node that kept another call open it starts at a time
spread over the mesh. Pure rules on a fake clock, and the real ``PeerWatches`` and
``SyncScheduler`` with a fake watch."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from lifeline_mesh.peering.schedule import (
    CATCH_UP_SPREAD_S,
    CATCH_UP_WAIT_S,
    Planner,
    SchedulePolicy,
)
from lifeline_mesh.peering.scheduler import SyncScheduler
from lifeline_mesh.peering.table import PeerAddress, PeerState, PeerTable
from lifeline_mesh.peering.watches import LINKED_S, Heard, PeerWatches

POLICY = SchedulePolicy()  # a 60 s period, back-off from 1 s to 300 s


def _planner(rand: float) -> Planner:
    return Planner(PeerTable(), POLICY, lambda: rand)


def test_catch_ups_run_one_at_a_time_and_none_is_dropped() -> None:
    """After a partition each node's Watch calls to the other half open at once: their
    sessions run one after another, never beside another session of this node (either
    way), and each runs — at the latest ``CATCH_UP_WAIT_S`` after its call opened — even
    when the peer proved up meanwhile (decision 0099)."""
    planner = _planner(rand=0.0)  # no spread (decision 0100): all three due at once
    peers = [planner.table.add_static(PeerAddress(f"10.0.0.{i}", 1)) for i in (1, 2, 3)]
    for peer in peers:
        planner.started(peer)
        planner.failed(peer, 0.0, 0.0, "unreachable")  # in back-off: the cut
    for peer in peers:
        assert planner.remote_change(peer.key, 10.0, fresh=True)
    first = planner.due(10.0)
    assert len(first) == 1
    planner.started(first[0])
    assert planner.due(10.5) == []  # the others wait for it
    # a peer proves up (its rows came over the call): its catch-up still decides
    waiting = [p for p in peers if p is not first[0]]
    assert planner.up_again(waiting[0].key, 10.6)
    assert waiting[0].next_attempt > 10.6 and planner.due(10.6) == []
    planner.succeeded(first[0], 11.0, 0.0, "ok")
    planner.idle(11.0)
    second = planner.due(11.0)
    assert len(second) == 1 and second[0] in waiting
    planner.started(second[0])
    # a session dialed to us keeps the last one waiting too, but not past its bound
    planner.succeeded(second[0], 12.0, 0.0, "ok")
    planner.idle(12.0)
    [last] = [p for p in waiting if p is not second[0]]
    assert last.next_attempt == 12.0 and planner.due(12.0, busy=True) == []
    assert planner.due(10.0 + CATCH_UP_WAIT_S, busy=True) == [last]


def test_catch_ups_are_spread_over_the_nodes_of_the_mesh() -> None:
    """A catch-up starts at a random time within ``CATCH_UP_SPREAD_S`` per node of the mesh
    this node knows (so that after a partition of many nodes a few catch up first and relay
    the rest), at most ``CATCH_UP_WAIT_S`` after its call opened (decision 0100)."""
    draws = iter([0.5, 0.5, 1.0])  # then 0.9
    planner = Planner(PeerTable(), POLICY, lambda: next(draws, 0.9))
    a, b, c, d = (planner.table.add_static(PeerAddress(f"10.0.0.{i}", 1)) for i in (1, 2, 3, 4))
    d.next_attempt = 60.0  # synced a moment ago
    assert planner.remote_change(a.key, 10.0, fresh=True, spread_over=2)
    assert a.next_attempt == 10.0 + 0.5 * 2 * CATCH_UP_SPREAD_S  # a pair: a short spread
    assert planner.remote_change(b.key, 10.0, fresh=True, spread_over=30)
    assert b.next_attempt == 10.0 + 0.5 * 30 * CATCH_UP_SPREAD_S
    assert planner.remote_change(c.key, 10.0, fresh=True, spread_over=1000)
    assert c.next_attempt == 10.0 + CATCH_UP_WAIT_S  # never past the bound
    assert planner.due(10.0) == [] and planner.due(10.0 + 0.25) == [a]
    planner.started(a)
    # b's time comes while a's session runs: it waits, then runs when a's ends
    at = b.next_attempt
    assert planner.due(at) == [] and b.wake is not None and b.wake.deferred
    planner.succeeded(a, at + 1.0, 0.0, "ok")
    planner.idle(at + 1.0)
    assert planner.due(at + 1.0) == [b]
    # a peer that changes meanwhile brings its catch-up forward (it is needed now)
    assert planner.remote_change(d.key, 20.0, fresh=True, spread_over=30)
    assert d.next_attempt > 20.0 and planner.remote_change(d.key, 20.5)
    assert d.next_attempt == 20.5


async def test_only_a_node_that_kept_another_call_open_spreads_its_catch_up() -> None:
    """A reopened call asks for a catch-up. A node reached meanwhile by no other call (it
    was cut off alone, or it restarted) catches up at once: nothing relayed will bring it
    what the peer holds, nor carry its own writes out. A node that kept another call open
    (``LINKED_S``) spreads it over the nodes of the mesh (decision 0100)."""
    now = [100.0]

    async def never(peer: PeerState) -> None:
        raise AssertionError("no session runs in this test")

    scheduler = SyncScheduler(never, clock=lambda: now[0], rand=lambda: 0.5)
    scheduler.nodes = lambda: 30
    opens: dict[str, asyncio.Event] = {}

    async def watch_one(peer: PeerState) -> AsyncIterator[Heard]:
        await opens.setdefault(peer.key, asyncio.Event()).wait()
        yield Heard.OPENED
        await asyncio.Event().wait()  # the call stays open

    watches = PeerWatches(scheduler, watch_one, clock=lambda: now[0])
    scheduler.linked = watches.linked
    a, b, c = (scheduler.add_static(PeerAddress(f"10.0.0.{i}", 1)) for i in (1, 2, 3))

    async def reopen(peer: PeerState) -> None:
        opens.setdefault(peer.key, asyncio.Event()).set()
        for _ in range(5):
            await asyncio.sleep(0)

    async with asyncio.TaskGroup() as tg:
        watches.start(tg)
        await reopen(a)  # the first call of a node: nothing else reaches it
        assert a.next_attempt == 100.0
        now[0] = 100.0 + LINKED_S / 2
        await reopen(b)  # a's call is too new to count as a link that stayed up
        assert b.next_attempt == now[0]
        now[0] = 100.0 + LINKED_S
        await reopen(c)  # a's call stayed open: c's catch-up is spread over 30 nodes
        assert c.next_attempt == now[0] + 0.5 * min(CATCH_UP_WAIT_S, 30 * CATCH_UP_SPREAD_S)
        assert watches.linked(c.key) and not watches.linked(a.key)  # b, c: too new
        for task in watches._tasks.values():
            task.cancel()
