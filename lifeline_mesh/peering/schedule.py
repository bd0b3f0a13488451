"""When to sync with each peer: the scheduler's decisions, as pure functions of time.

No I/O and no clock of its own: every method takes ``now`` (the scheduler's monotonic
seconds) and randomness comes from an injected ``rand() -> [0, 1)``, so tests drive it with
a fake clock. Rules:

* a peer that appears (configured or discovered) is synced at once;
* a local change makes every healthy peer due at once; a peer in back-off keeps its
  schedule, so writing fast never hammers a dead peer;
* a change a peer announces (over the Watch call this node opened) makes that peer due at
  once, when the peer is healthy;
* a fresh call (the peer answers again, even in back-off) asks for a *catch-up*: it runs
  when no other session of this node runs, either way (at most ``CATCH_UP_WAIT_S`` after
  the call opened), one at a time; none is ever dropped (decision 0099: after a partition
  every node of each half caught up with each of its peers of the other half at once,
  every session carrying the same writes; one at a time, the first brings them and the
  later ones find the rest). A node that kept other calls open meanwhile (rows relayed to
  it may bring what the peer holds) starts it at a random time within
  ``CATCH_UP_SPREAD_S`` per node of the mesh: of the many nodes that lost their links to
  the other half at once, a few catch up first and the rows they bring are relayed to the
  others before their own catch-ups start (decision 0100);
* after a success the next sync is one period later (with jitter, so a room of nodes started
  together does not sync in lock step); a link whose changes cross both ways over open
  Watch calls (we watch the peer, it takes our rows over its call to us) needs that check
  from one end only: the end whose node id sorts first keeps the period, the other waits
  ``live_period`` (its safety net should the first stop checking; decision 0093);
* after a failure the delay doubles from ``backoff_base`` up to ``backoff_max``, each delay
  drawn in ``[(1 - backoff_jitter) * d, d]``;
* a peer is never in two sessions at once; each peer has its own schedule, so one dead or
  flapping peer never delays another.

Fewer sessions per change (issue 14's soak: a write cost a dozen sessions across three
nodes). A change seen with its lines' highest rows (``marks``) skips a peer known to hold
them already (a session with it ended holding them: the change came from that peer), and
waits ``RELAY_DELAY_S`` when it may be a relay (a session is running, or another peer
brought it) so that the session which brought it is recorded first and the two nodes
that both received it sync once, not twice. An announcement from a peer that dials us
itself waits ``ANNOUNCE_GRACE_S``: that peer's own session usually carries the change (the
writer pushes), and ours runs only when no session with it ran meanwhile. Such wake-ups are
conditional (:class:`Wake`): checked again when due, dropped when no longer needed. A
session that peer dialed to us ends its back-off here (it is up again).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lifeline_mesh.peering.table import PeerState, PeerTable, Wake

__all__ = [
    "ANNOUNCE_GRACE_S",
    "BACKOFF_BASE_S",
    "BACKOFF_JITTER",
    "BACKOFF_MAX_S",
    "CATCH_UP_SPREAD_S",
    "CATCH_UP_WAIT_S",
    "LIVE_PERIOD_S",
    "PERIODIC_SYNC_S",
    "PERIOD_JITTER",
    "RELAY_DELAY_S",
    "Planner",
    "SchedulePolicy",
    "backoff_delay",
]

PERIODIC_SYNC_S = 60.0  # a sync check costs one round trip when in sync (DESIGN §10)
LIVE_PERIOD_S = 300.0  # the check by the second end of a link watched both ways (0093)
PERIOD_JITTER = 0.1  # the period is drawn in [(1 - j) * period, period]
BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 300.0
BACKOFF_JITTER = 0.5  # "equal jitter": half the delay is random
RELAY_DELAY_S = 0.5  # a change that may be a relay waits [0.5, 1] × this (jitter: one of
# two nodes that both received a change syncs with the other; the other then need not)
ANNOUNCE_GRACE_S = 1.0  # an announcing peer that dials us has this long to bring it itself
ANNOUNCE_SLACK_S = 1.0  # a session with it that began this long before counts as its answer
DIALS_US_S = 2 * PERIODIC_SYNC_S  # it dialed us this recently: it dials us on its changes
CATCH_UP_WAIT_S = 10.0  # a catch-up waits for this node's other sessions at most this long
# A catch-up of a node with other calls open starts at a random time in [0, this × the
# nodes of the mesh] (at most CATCH_UP_WAIT_S): of the nodes that lost a link at once, a
# few catch up first and their rows reach the others over the Watch calls (decision 0100)
CATCH_UP_SPREAD_S = 0.25


@dataclass(frozen=True, slots=True)
class SchedulePolicy:
    period: float = PERIODIC_SYNC_S
    live_period: float = LIVE_PERIOD_S
    period_jitter: float = PERIOD_JITTER
    backoff_base: float = BACKOFF_BASE_S
    backoff_max: float = BACKOFF_MAX_S
    backoff_jitter: float = BACKOFF_JITTER


def backoff_delay(failures: int, policy: SchedulePolicy, rand: Callable[[], float]) -> float:
    """Delay before retrying after ``failures`` consecutive failures (``failures >= 1``)."""
    exponent = min(max(failures, 1) - 1, 62)  # cap the exponent: 2**1000 overflows a float
    ceiling = min(policy.backoff_max, policy.backoff_base * 2.0**exponent)
    return ceiling * (1.0 - policy.backoff_jitter * rand())


class Planner:
    """Applies the rules above to the rows of a :class:`PeerTable`."""

    def __init__(self, table: PeerTable, policy: SchedulePolicy, rand: Callable[[], float]) -> None:
        self.table = table
        self.policy = policy
        self._rand = rand

    def appeared(self, key: str, now: float) -> None:
        """A peer was added or re-announced itself: try it now (a node that comes back on
        the LAN is worth one attempt even while it is in back-off)."""
        peer = self.table.get(key)
        peer.next_attempt = now
        peer.wake = None

    def _wake(
        self,
        peer: PeerState,
        at: float,
        *,
        marks: dict[str, int] | None = None,
        announced: float | None = None,
        hard: bool = False,
    ) -> bool:
        """Make ``peer`` due at ``at`` (earliest wins), on the conditions given (``hard``:
        none). A running session is followed by one more when still needed."""
        if peer.in_flight:
            peer.resync = True  # the running session may have read its ranges before it
            if peer.pending is None:
                peer.pending = Wake(fallback=0.0)
            peer.pending.add(marks, announced, hard)
            return True
        if peer.wake is None:
            if peer.next_attempt <= at:
                return False  # due sooner anyway, on no condition
            peer.wake = Wake(fallback=peer.next_attempt)
        peer.wake.add(marks, announced, hard)
        peer.next_attempt = min(peer.next_attempt, at)
        return True

    def _needed(self, peer: PeerState, now: float) -> bool:
        """Is a conditional wake-up of ``peer`` still worth a session at ``now``?"""
        wake = peer.wake
        if wake is None or wake.hard or wake.fallback <= now:
            return True
        if any(peer.synced.get(line, -1) < mark for line, mark in wake.marks.items()):
            return True
        if wake.announced is None:
            return False
        touched = peer.touched_at
        return touched is None or touched < wake.announced - ANNOUNCE_SLACK_S

    def _relay(self, marks: dict[str, int]) -> bool:
        """Did a session with some peer bring these rows (every line's, at least)?"""
        peers = list(self.table)
        return all(any(p.synced.get(line, -1) >= m for p in peers) for line, m in marks.items())

    def local_change(
        self,
        now: float,
        marks: dict[str, int] | None = None,
        *,
        busy: bool = False,
        covered: frozenset[str] = frozenset(),
    ) -> list[str]:
        """Entries were appended here: healthy peers are due now. Returns their keys.
        With ``marks`` (the changed lines' highest rows), a peer known to hold them is
        skipped, and a change that may be a relay (``busy``: a session is running) waits
        ``RELAY_DELAY_S`` (jittered), then runs only if still needed. Peers in ``covered``
        watch us and take a change's rows over their Watch call: they are skipped (they
        sync on their own when a change reaches them without its rows)."""
        woken = []
        delay = 0.0
        if marks is not None and (busy or self._relay(marks)):
            delay = RELAY_DELAY_S * (1.0 - 0.5 * self._rand())
        for peer in self.table:
            if peer.failures or peer.key in covered:
                continue
            if marks is None:
                self._wake(peer, now, hard=True)
            elif peer.in_flight or any(peer.synced.get(n, -1) < m for n, m in marks.items()):
                self._wake(peer, now + delay, marks=marks)
            else:
                continue  # the change came from this peer (or it has it already)
            woken.append(peer.key)
        return woken

    def dials_us(self, peer: PeerState, now: float) -> bool:
        return peer.dialed_in_at is not None and now - peer.dialed_in_at < DIALS_US_S

    def remote_change(
        self,
        key: str,
        now: float,
        *,
        fresh: bool = False,
        at_once: bool = False,
        spread_over: int = 0,
    ) -> bool:
        """Peer ``key`` announced a change (``fresh``: its Watch call was just accepted,
        a catch-up, spread over ``spread_over`` nodes of the mesh, 0: none): it is due now
        — or, when it dials us itself, once ``ANNOUNCE_GRACE_S`` has passed with no session
        with it; ``at_once``: the peer sends its changes' rows to its watchers and so never
        dials us for one, no grace. Returns whether anything changed."""
        if key not in self.table:
            return False
        peer = self.table.get(key)
        if fresh:
            return self._catch_up(peer, now, spread_over)
        if peer.failures:
            return False
        if at_once or not self.dials_us(peer, now):
            return self._wake(peer, now, hard=True)
        return self._wake(peer, now + ANNOUNCE_GRACE_S, announced=now)

    def _catch_up(self, peer: PeerState, now: float, spread_over: int) -> bool:
        """``peer``'s Watch call was just accepted (it may have been out of reach): a
        session that runs when this node runs no other (``due``), so that the sessions
        with the peers of the other half of a healed partition run one after the other,
        the later ones carrying only what the earlier did not bring (decision 0099); it
        starts at a random time spread over ``spread_over`` nodes, so that a few of them
        catch up first and relay what they brought to the others (decision 0100)."""
        if peer.in_flight:
            return self._wake(peer, now, hard=True)
        fallback = peer.next_attempt if peer.wake is None else peer.wake.fallback
        peer.wake = Wake(fallback=fallback, hard=True, catch_up_until=now + CATCH_UP_WAIT_S)
        spread = min(CATCH_UP_WAIT_S, CATCH_UP_SPREAD_S * spread_over)
        peer.next_attempt = now + spread * self._rand()
        return True

    def took(self, key: str, line: str, span: tuple[int, int]) -> None:
        """Our rows ``span`` = (after, up to] of ``line`` are the rows just taken from
        ``key``'s Watch call: a peer known to hold every row up to ``after`` now holds
        every row up to ``up to`` (else what it holds stays unknown), so the change they
        make here wakes no session back to it."""
        if key not in self.table:
            return
        peer = self.table.get(key)
        after, upto = span
        if peer.synced.get(line, -1) >= after:
            peer.synced[line] = max(upto, peer.synced[line])

    def dialed_in(self, key: str, now: float) -> None:
        """A session that ``key`` dialed to us began."""
        peer = self.table.get(key)
        peer.dialed_in_at = peer.touched_at = now

    def synced(self, key: str, now: float, marks: dict[str, int] | None) -> bool:
        """A session with ``key`` (either way) ended well; ``marks``: the highest row of
        each line it now holds (when known). A peer in back-off is up again: its back-off
        ends and it is due now. Returns whether it was in back-off."""
        if key not in self.table:
            return False
        peer = self.table.get(key)
        peer.touched_at = now
        for line, mark in (marks or {}).items():
            peer.synced[line] = max(mark, peer.synced.get(line, mark))
        return self.up_again(key, now)

    def up_again(self, key: str, now: float) -> bool:
        """A session with ``key`` ended well: a back-off with it ends and it is due now
        (what it holds is left as it was). Returns whether it was in back-off."""
        if key not in self.table:
            return False
        peer = self.table.get(key)
        if not peer.failures or peer.in_flight:
            return False
        peer.failures = 0
        peer.last_error = None
        if peer.wake is not None and peer.wake.catch_up_until is not None:
            return True  # its fresh call asked for a catch-up: that decides when
        peer.next_attempt = now
        peer.wake = None
        return True

    def idle(self, now: float) -> None:
        """A session of this node ended: the catch-ups waiting for it are due again."""
        for peer in self.table:
            wake = peer.wake
            if wake is not None and wake.deferred and not peer.in_flight:
                peer.next_attempt = min(peer.next_attempt, now)
                wake.deferred = False

    def due(self, now: float, *, busy: bool = False) -> list[PeerState]:
        """Peers whose time has come and that are not already syncing, earliest first. A
        conditional wake-up no longer needed goes back to the peer's plain schedule. A
        catch-up waits while another session runs (``busy``: one dialed to us; or one of
        ours) until its ``catch_up_until`` (or ``idle``); one at a time."""
        ready: list[PeerState] = []
        catch_ups: list[PeerState] = []
        busy = busy or any(p.in_flight for p in self.table)
        for peer in self.table:
            if peer.in_flight or peer.next_attempt > now:
                continue
            if not self._needed(peer, now) and peer.wake is not None:
                peer.next_attempt, peer.wake = peer.wake.fallback, None
                continue
            until = None if peer.wake is None else peer.wake.catch_up_until
            (catch_ups if until is not None and until > now else ready).append(peer)
        for peer in sorted(catch_ups, key=lambda p: (p.next_attempt, p.key)):
            wake = peer.wake
            assert wake is not None and wake.catch_up_until is not None
            if busy or ready:
                peer.next_attempt = wake.catch_up_until  # or sooner: ``idle``
                wake.deferred = True
            else:
                ready.append(peer)
                busy = True
        return sorted(ready, key=lambda p: (p.next_attempt, p.key))

    def next_wakeup(self) -> float | None:
        """The earliest ``next_attempt`` among idle peers, or None when there is none."""
        times = [p.next_attempt for p in self.table if not p.in_flight]
        return min(times, default=None)

    def started(self, peer: PeerState) -> None:
        peer.in_flight = True
        peer.syncs += 1
        peer.wake = None  # this session answers what made it due

    def succeeded(
        self, peer: PeerState, now: float, wall: float, result: str, *, live: bool = False
    ) -> None:
        """A session with ``peer`` ended well; ``live``: the link is watched both ways and
        the peer checks it, so ours waits ``live_period`` (never less than ``period``)."""
        peer.in_flight = False
        peer.failures = 0
        peer.last_sync_at = wall
        peer.last_result = result
        peer.last_error = None
        peer.touched_at = now
        jitter = 1.0 - self.policy.period_jitter * self._rand()
        period = max(self.policy.period, self.policy.live_period) if live else self.policy.period
        peer.next_attempt = now + period * jitter
        pending, peer.pending = peer.pending, None
        if peer.resync:
            peer.resync = False
            if pending is None or pending.hard:
                peer.next_attempt = now
            else:  # once more right after, unless this session answered it
                peer.wake = Wake(fallback=peer.next_attempt)
                peer.wake.add(pending.marks, pending.announced, False)
                peer.next_attempt = now

    def failed(self, peer: PeerState, now: float, wall: float, error: str) -> float:
        """Record a failure; returns the back-off delay chosen."""
        peer.in_flight = False
        peer.resync = False  # the back-off decides; the next session sends everything anyway
        peer.pending = None
        peer.failures += 1
        peer.last_error = error
        peer.last_error_at = wall
        delay = backoff_delay(peer.failures, self.policy, self._rand)
        peer.next_attempt = now + delay
        return delay
