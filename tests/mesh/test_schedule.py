"""The pure scheduling rules and the peer table, driven by a fake clock and fake randomness."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from lifeline.errors import ConfigError
from lifeline_mesh.peering.schedule import (
    ANNOUNCE_GRACE_S,
    RELAY_DELAY_S,
    Planner,
    SchedulePolicy,
    backoff_delay,
)
from lifeline_mesh.peering.scheduler import SyncScheduler
from lifeline_mesh.peering.table import PeerAddress, PeerSource, PeerState, PeerTable

POLICY = SchedulePolicy(
    period=60, period_jitter=0.1, backoff_base=1, backoff_max=300, backoff_jitter=0.5
)
NODE_A = "aaaa-aaaa-aaaa-aaaa-00"


def _planner(rand: float = 0.5) -> Planner:
    return Planner(PeerTable(), POLICY, lambda: rand)


# -- addresses and the table ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "host", "port", "shown"),
    [
        ("10.0.0.2:7411", "10.0.0.2", 7411, "10.0.0.2:7411"),
        (" laptop.local:1 ", "laptop.local", 1, "laptop.local:1"),
        ("[::1]:7411", "::1", 7411, "[::1]:7411"),
    ],
)
def test_peer_address_parse(text: str, host: str, port: int, shown: str) -> None:
    addr = PeerAddress.parse(text)
    assert (addr.host, addr.port, str(addr)) == (host, port, shown)


@pytest.mark.parametrize("bad", ["10.0.0.2", "10.0.0.2:", ":7411", "h:0", "h:70000", "::1:7411"])
def test_peer_address_rejects_with_the_value(bad: str) -> None:
    with pytest.raises(ConfigError, match="is not HOST:PORT"):
        PeerAddress.parse(bad)


def test_discovered_static_peer_stays_one_row_and_survives_loss() -> None:
    table = PeerTable()
    static = table.add_static(PeerAddress("10.0.0.2", 7411))
    row = table.discovered(NODE_A, (PeerAddress("10.0.0.2", 7411),))
    assert row is static and len(table) == 1
    assert row.sources == {PeerSource.STATIC, PeerSource.DISCOVERED}
    assert row.node_id == NODE_A
    assert table.lost(NODE_A) == [] and row.sources == {PeerSource.STATIC}


def test_static_peer_learning_its_node_id_absorbs_the_discovered_row() -> None:
    table = PeerTable()
    static = table.add_static(PeerAddress("laptop.local", 7411))
    table.discovered(NODE_A, (PeerAddress("10.0.0.7", 7411),))
    assert len(table) == 2
    table.learned(static, NODE_A)
    assert list(table) == [static] and static.node_id == NODE_A
    assert static.sources == {PeerSource.STATIC, PeerSource.DISCOVERED}
    assert table.discovered(NODE_A, (PeerAddress("10.0.0.7", 7411),)) is static


def test_discovered_peer_moves_address_and_goes_away() -> None:
    table = PeerTable()
    first = table.discovered(NODE_A, (PeerAddress("10.0.0.3", 7000),))
    moved = table.discovered(NODE_A, (PeerAddress("10.0.0.4", 7000),))
    assert moved is first and str(moved.address) == "10.0.0.4:7000"
    assert table.lost(NODE_A) == [f"node:{NODE_A}"] and len(table) == 0


# -- backoff -------------------------------------------------------------------------


@given(failures=st.integers(1, 2000), r=st.floats(0, 1, exclude_max=True))
def test_backoff_grows_within_jitter_bounds(failures: int, r: float) -> None:
    ceiling = min(300.0, 2.0 ** (min(failures, 60) - 1))
    delay = backoff_delay(failures, POLICY, lambda: r)
    assert ceiling * 0.5 <= delay <= ceiling


def test_backoff_doubles_until_the_cap() -> None:
    ceilings = [backoff_delay(n, POLICY, lambda: 0.0) for n in range(1, 12)]
    assert ceilings == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]


def test_failed_peer_is_retried_later_each_time_then_recovers() -> None:
    planner = _planner(rand=0.0)  # no jitter: exact delays
    peer = planner.table.add_static(PeerAddress("10.0.0.9", 1))
    now = 0.0
    delays = []
    for _ in range(5):
        assert planner.due(now) == [peer]
        planner.started(peer)
        assert planner.due(now) == []  # never two sessions with one peer
        delays.append(planner.failed(peer, now, 1000.0, "refused"))
        assert planner.due(now + delays[-1] - 0.01) == []
        now += delays[-1]
    assert delays == [1, 2, 4, 8, 16] and peer.failures == 5
    planner.started(peer)
    planner.succeeded(peer, now, 2000.0, "ok")
    assert (peer.failures, peer.last_error, peer.last_sync_at) == (0, None, 2000.0)
    assert peer.next_attempt == now + 60


def test_jitter_spreads_periodic_syncs() -> None:
    rng = random.Random(7)
    planner = Planner(PeerTable(), POLICY, rng.random)
    times = set()
    for n in range(20):
        peer = planner.table.add_static(PeerAddress("10.0.0.1", 1000 + n))
        planner.started(peer)
        planner.succeeded(peer, 0.0, 0.0, "ok")
        assert 54.0 <= peer.next_attempt <= 60.0
        times.add(peer.next_attempt)
    assert len(times) == 20


# -- triggers ------------------------------------------------------------------------


def test_appearing_and_local_changes_make_healthy_peers_due() -> None:
    planner = _planner()
    healthy = planner.table.add_static(PeerAddress("10.0.0.1", 1))
    dead = planner.table.add_static(PeerAddress("10.0.0.2", 1))
    for peer in (healthy, dead):
        planner.appeared(peer.key, 0.0)
        planner.started(peer)
    planner.succeeded(healthy, 0.0, 0.0, "ok")
    planner.failed(dead, 0.0, 0.0, "refused")
    assert planner.due(0.1) == []
    assert planner.local_change(0.2) == [healthy.key]
    assert planner.due(0.2) == [healthy]  # the dead peer keeps its back-off
    planner.appeared(dead.key, 0.3)  # ...unless it announces itself again
    assert planner.due(0.3) == [healthy, dead]


def test_a_change_a_peer_announces_makes_that_peer_due() -> None:
    planner = _planner()
    healthy = planner.table.add_static(PeerAddress("10.0.0.1", 1))
    failing = planner.table.add_static(PeerAddress("10.0.0.2", 1))
    for peer in (healthy, failing):
        planner.started(peer)
    planner.succeeded(healthy, 0.0, 0.0, "ok")
    planner.failed(failing, 0.0, 0.0, "refused")
    assert planner.remote_change(healthy.key, 0.1) and planner.due(0.1) == [healthy]
    assert not planner.remote_change(failing.key, 0.1)  # its back-off holds...
    assert planner.remote_change(failing.key, 0.1, fresh=True)  # ...until it answers again
    # a catch-up: after the session with the healthy peer, not beside it (decision 0099)
    assert planner.due(0.1) == [healthy]
    assert not planner.remote_change("static:10.9.9.9:1", 0.1)  # a peer no longer listed
    planner.started(healthy)
    planner.succeeded(healthy, 1.0, 0.0, "ok")
    planner.idle(1.0)
    assert planner.due(1.0) == [failing]
    planner.started(failing)
    planner.succeeded(failing, 1.5, 0.0, "ok")
    planner.started(healthy)
    assert planner.remote_change(healthy.key, 2.0)  # mid-session: once more right after
    planner.succeeded(healthy, 3.0, 0.0, "ok")
    assert healthy in planner.due(3.0) and healthy.next_attempt == 3.0


def test_change_during_a_session_syncs_again_right_after() -> None:
    planner = _planner()
    peer = planner.table.add_static(PeerAddress("10.0.0.1", 1))
    planner.started(peer)
    planner.local_change(5.0)
    planner.succeeded(peer, 6.0, 0.0, "ok")
    assert planner.due(6.0) == [peer]


def test_dead_peer_does_not_delay_the_others() -> None:
    planner = _planner(rand=0.0)
    dead = planner.table.add_static(PeerAddress("10.0.0.66", 1))
    good = planner.table.add_static(PeerAddress("10.0.0.1", 1))
    now, good_syncs = 0.0, []
    for _ in range(200):
        for peer in planner.due(now):
            planner.started(peer)
            if peer is dead:
                planner.failed(peer, now, now, "timeout")
            else:
                planner.succeeded(peer, now, now, "ok")
                good_syncs.append(now)
        wake = planner.next_wakeup()
        assert wake is not None
        now = wake
    # The healthy peer ran exactly every period, whatever the dead one did.
    gaps = {b - a for a, b in itertools.pairwise(good_syncs)}
    assert len(good_syncs) > 10 and gaps == {60.0}
    assert good.failures == 0 and dead.failures > 10


# -- a random life of a peer table -----------------------------------------------------


class PlannerMachine(RuleBasedStateMachine):
    """Whatever happens, in any order: no peer is in two sessions, back-off stays in its
    bounds, and a local change never leaves a healthy idle peer waiting."""

    def __init__(self) -> None:
        super().__init__()
        self.rng = random.Random(0)
        self.planner = Planner(PeerTable(), POLICY, self.rng.random)
        self.now = 0.0

    @rule(port=st.integers(1, 4))
    def add_peer(self, port: int) -> None:
        peer = self.planner.table.add_static(PeerAddress("10.0.0.1", port))
        self.planner.appeared(peer.key, self.now)

    @rule(seconds=st.floats(0, 400))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    @rule()
    def start_due(self) -> None:
        for peer in self.planner.due(self.now):
            assert not peer.in_flight
            self.planner.started(peer)

    @rule(ok=st.booleans(), pick=st.integers(0, 3))
    def finish_one(self, ok: bool, pick: int) -> None:
        running = [p for p in self.planner.table if p.in_flight]
        if not running:
            return
        peer = running[pick % len(running)]
        if ok:
            self.planner.succeeded(peer, self.now, self.now, "ok")
            assert peer.failures == 0
        else:
            delay = self.planner.failed(peer, self.now, self.now, "down")
            ceiling = min(POLICY.backoff_max, POLICY.backoff_base * 2 ** (peer.failures - 1))
            assert ceiling * (1 - POLICY.backoff_jitter) <= delay <= ceiling

    @rule()
    def local_change(self) -> None:
        self.planner.local_change(self.now)
        for peer in self.planner.table:
            if peer.failures == 0 and not peer.in_flight:
                assert peer.next_attempt <= self.now

    @invariant()
    def due_peers_are_idle(self) -> None:
        assert all(not p.in_flight for p in self.planner.due(self.now))
        wake = self.planner.next_wakeup()
        idle = [p for p in self.planner.table if not p.in_flight]
        assert (wake is None) == (not idle)


TestPlannerMachine = PlannerMachine.TestCase


# -- fewer sessions per change (issue 14's soak) ------------------------------------


def _two_synced(planner: Planner) -> tuple[PeerState, PeerState]:
    a = planner.table.add_static(PeerAddress("10.0.0.1", 1))
    c = planner.table.add_static(PeerAddress("10.0.0.3", 1))
    for peer in (a, c):
        planner.started(peer)
        planner.succeeded(peer, 0.0, 0.0, "ok")
    return a, c


def test_a_change_a_peer_brought_is_not_sent_back_and_its_relay_waits() -> None:
    planner = _planner(rand=0.0)  # the longest relay delay
    a, c = _two_synced(planner)
    planner.synced(a.key, 10.0, {"ledger": 42})  # a session with a left us at row 42
    # Our watcher sees rows up to 42: a brought them; c may lack them, a relay.
    assert planner.local_change(10.1, {"ledger": 42}) == [c.key]
    assert planner.due(10.1) == []
    assert planner.due(10.1 + RELAY_DELAY_S) == [c]
    assert a.next_attempt == 60.0  # a keeps its periodic schedule


def test_a_relay_the_other_side_already_made_is_dropped() -> None:
    planner = _planner(rand=0.0)
    a, c = _two_synced(planner)
    planner.synced(a.key, 10.0, {"ledger": 42})
    planner.local_change(10.1, {"ledger": 42})
    planner.synced(c.key, 10.3, {"ledger": 42})  # c dialed us first and now holds row 42
    assert planner.due(11.0) == []
    assert c.wake is None and c.next_attempt == 60.0  # back to its periodic sync


def test_a_write_here_goes_to_every_healthy_peer_at_once() -> None:
    planner = _planner()
    a, c = _two_synced(planner)
    planner.synced(a.key, 10.0, {"ledger": 42})
    assert planner.local_change(20.0, {"ledger": 43}) == [a.key, c.key]
    assert planner.due(20.0) == [a, c]


def test_a_peer_that_takes_our_rows_over_its_watch_is_not_dialed_for_a_change() -> None:
    planner = _planner()
    a, c = _two_synced(planner)
    # c's Watch call takes our changes' rows (decision 0046); a's does not
    assert planner.local_change(20.0, {"ledger": 43}, covered=frozenset({c.key})) == [a.key]
    assert planner.local_change(21.0, None, covered=frozenset({c.key})) == [a.key]
    assert planner.due(21.0) == [a]
    assert c.wake is None and c.next_attempt > 21.0  # its periodic sync stays


async def test_the_scheduler_covers_the_peers_whose_node_ids_take_rows() -> None:
    scheduler = SyncScheduler(_never_called, clock=lambda: 10.0)
    a = scheduler.add_static(PeerAddress("10.0.0.1", 1))
    c = scheduler.add_static(PeerAddress("10.0.0.3", 1))
    scheduler.learned(c.key, "node-c")
    scheduler.covered = lambda: {"node-c", "node-elsewhere"}
    for peer in (a, c):
        scheduler.planner.started(peer)
        scheduler.planner.succeeded(peer, 0.0, 0.0, "ok")
    scheduler.local_change({"ledger": 43})
    assert scheduler.planner.due(10.0) == [a]


async def _never_called(peer: PeerState) -> object:
    raise AssertionError("no session in this test")


def test_an_announcement_from_a_peer_that_dials_us_waits_for_its_own_session() -> None:
    planner = _planner()
    a, c = _two_synced(planner)
    planner.dialed_in(a.key, 5.0)  # a dials us: it pushes its own changes
    assert planner.remote_change(a.key, 10.0)
    assert planner.due(10.0) == []
    planner.dialed_in(a.key, 10.05)  # ...and so it does
    assert planner.due(10.0 + ANNOUNCE_GRACE_S) == []
    # Another announcement, and this time a's session does not come: we dial.
    assert planner.remote_change(a.key, 30.0)
    assert planner.due(30.0 + ANNOUNCE_GRACE_S) == [a]
    # c never dialed us (a runner's office node, say): its announcements are answered at once.
    assert planner.remote_change(c.key, 30.0) and c in planner.due(30.0)
    # a sends its changes' rows to us and so never dials us for one: a change whose rows we
    # could not take is synced for at once, no grace.
    assert planner.remote_change(a.key, 40.0, at_once=True)
    assert a in planner.due(40.0)


def test_a_peer_in_back_off_that_dials_us_is_up_again() -> None:
    planner = _planner()
    peer = planner.table.add_static(PeerAddress("10.0.0.1", 1))
    for _ in range(4):
        planner.started(peer)
        planner.failed(peer, 0.0, 0.0, "connection refused")
    assert peer.next_attempt >= 4.0 and planner.local_change(1.0, {"ledger": 5}) == []
    assert planner.synced(peer.key, 1.0, {"ledger": 5})  # its session to us went through
    assert peer.failures == 0 and planner.due(1.0) == [peer]
    assert planner.local_change(2.0, {"ledger": 6}) == [peer.key]  # writes reach it again


def test_a_session_it_dialed_ends_a_back_off_even_when_what_it_holds_is_unknown() -> None:
    """A restarted node dials its peers at once; under steady writes its sessions rarely
    know what the peer holds (other rows were written meanwhile). The peer is up all the
    same: the back-off ends, and what it holds and when it was last touched stay as they
    were (an announcement is not taken as answered by such a session)."""
    now = [0.0]

    async def never(peer: PeerState) -> None:
        raise AssertionError("no session runs in this test")

    scheduler = SyncScheduler(never, clock=lambda: now[0])
    back: list[str] = []
    scheduler.on_back = back.append
    peer = scheduler.add_static(PeerAddress("10.0.0.1", 1))
    scheduler.table.learned(peer, "node-x")
    for _ in range(4):
        scheduler.planner.started(peer)
        scheduler.planner.failed(peer, 0.0, 0.0, "connection refused")
    now[0] = 3.0
    scheduler.inbound_started("node-x")
    scheduler.inbound_ended("node-x", None)  # it failed: nothing is known
    assert peer.failures == 4 and back == []
    scheduler.inbound_started("node-x")
    now[0] = 3.5
    scheduler.inbound_ended("node-x", None, ok=True)
    assert peer.failures == 0 and back == [peer.key] and scheduler.planner.due(3.5) == [peer]
    assert peer.synced == {} and peer.touched_at == 3.0  # set when it dialed, not now
    assert scheduler.inbound == 0


def test_rows_taken_from_a_peer_in_back_off_end_the_back_off() -> None:
    """A runner that only dials out failed to reach the hub during a partition; once the
    links are back, the hub's rows over the runner's Watch call show it is up: the runner
    syncs now (its own writes travel only in its sessions) instead of at the end of a
    back-off that had grown during the cut."""
    now = [0.0]

    async def never(peer: PeerState) -> None:
        raise AssertionError("no session runs in this test")

    # no jitter: the back-off is its ceiling, 32 s (drawn in 16-32 s, it may end before 20 s)
    scheduler = SyncScheduler(never, clock=lambda: now[0], rand=lambda: 0.0)
    back: list[str] = []
    scheduler.on_back = back.append
    peer = scheduler.add_static(PeerAddress("10.0.0.1", 1))
    for _ in range(6):
        scheduler.planner.started(peer)
        scheduler.planner.failed(peer, 0.0, 0.0, "deadline exceeded")
    assert scheduler.planner.due(20.0) == []  # backing off for 32 s
    now[0] = 20.0
    scheduler.heard_from(peer.key)
    assert peer.failures == 0 and back == [peer.key] and scheduler.planner.due(20.0) == [peer]
    scheduler.heard_from(peer.key)  # not in back-off: nothing more
    assert back == [peer.key]


def test_a_change_during_a_session_that_carried_it_costs_no_second_session() -> None:
    planner = _planner()
    peer = planner.table.add_static(PeerAddress("10.0.0.1", 1))
    planner.started(peer)
    planner.local_change(5.0, {"ledger": 7})  # seen mid-session: maybe after its ranges
    planner.synced(peer.key, 6.0, {"ledger": 7})  # it did carry row 7
    planner.succeeded(peer, 6.0, 0.0, "ok")
    assert planner.due(6.0) == []
    planner.started(peer)
    planner.local_change(7.0, {"ledger": 9})
    planner.synced(peer.key, 8.0, {"ledger": 8})  # row 9 came after its ranges
    planner.succeeded(peer, 8.0, 0.0, "ok")
    assert planner.due(8.0) == [peer]
