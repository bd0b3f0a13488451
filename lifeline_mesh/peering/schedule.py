"""When to sync with each peer: the scheduler's decisions, as pure functions of time.

No I/O and no clock of its own: every method takes ``now`` (the scheduler's monotonic
seconds) and randomness comes from an injected ``rand() -> [0, 1)``, so tests drive it with
a fake clock. Rules:

* a peer that appears (configured or discovered) is synced at once;
* a local change makes every healthy peer due at once; a peer in back-off keeps its
  schedule, so writing fast never hammers a dead peer;
* a change a peer announces (over the Watch call this node opened) makes that peer due at
  once; a fresh call does so even in back-off (the peer answers again), later
  announcements only when the peer is healthy;
* after a success the next sync is one period later (with jitter, so a room of nodes started
  together does not sync in lock step);
* after a failure the delay doubles from ``backoff_base`` up to ``backoff_max``, each delay
  drawn in ``[(1 - backoff_jitter) * d, d]``;
* a peer is never in two sessions at once; each peer has its own schedule, so one dead or
  flapping peer never delays another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lifeline_mesh.peering.table import PeerState, PeerTable

__all__ = [
    "BACKOFF_BASE_S",
    "BACKOFF_JITTER",
    "BACKOFF_MAX_S",
    "PERIODIC_SYNC_S",
    "PERIOD_JITTER",
    "Planner",
    "SchedulePolicy",
    "backoff_delay",
]

PERIODIC_SYNC_S = 60.0  # a sync check costs one round trip when in sync (DESIGN §10)
PERIOD_JITTER = 0.1  # the period is drawn in [(1 - j) * period, period]
BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 300.0
BACKOFF_JITTER = 0.5  # "equal jitter": half the delay is random


@dataclass(frozen=True, slots=True)
class SchedulePolicy:
    period: float = PERIODIC_SYNC_S
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
        self.table.get(key).next_attempt = now

    def local_change(self, now: float) -> list[str]:
        """Entries were appended here: healthy peers are due now. Returns their keys."""
        woken = []
        for peer in self.table:
            if peer.failures:
                continue
            if peer.in_flight:
                # The running session may have listed its ids before this append.
                peer.resync = True
            elif peer.next_attempt > now:
                peer.next_attempt = now
            woken.append(peer.key)
        return woken

    def remote_change(self, key: str, now: float, *, fresh: bool = False) -> bool:
        """Peer ``key`` announced a change (``fresh``: its Watch call was just accepted):
        it is due now. Returns whether anything changed."""
        if key not in self.table:
            return False
        peer = self.table.get(key)
        if peer.failures and not fresh:
            return False
        if peer.in_flight:
            peer.resync = True  # the running session may have read its ranges before it
        elif peer.next_attempt > now:
            peer.next_attempt = now
        else:
            return False
        return True

    def due(self, now: float) -> list[PeerState]:
        """Peers whose time has come and that are not already syncing, earliest first."""
        ready = [p for p in self.table if not p.in_flight and p.next_attempt <= now]
        return sorted(ready, key=lambda p: (p.next_attempt, p.key))

    def next_wakeup(self) -> float | None:
        """The earliest ``next_attempt`` among idle peers, or None when there is none."""
        times = [p.next_attempt for p in self.table if not p.in_flight]
        return min(times, default=None)

    def started(self, peer: PeerState) -> None:
        peer.in_flight = True

    def succeeded(self, peer: PeerState, now: float, wall: float, result: str) -> None:
        peer.in_flight = False
        peer.failures = 0
        peer.last_sync_at = wall
        peer.last_result = result
        peer.last_error = None
        if peer.resync:
            peer.resync = False
            peer.next_attempt = now
        else:
            jitter = 1.0 - self.policy.period_jitter * self._rand()
            peer.next_attempt = now + self.policy.period * jitter

    def failed(self, peer: PeerState, now: float, wall: float, error: str) -> float:
        """Record a failure; returns the back-off delay chosen."""
        peer.in_flight = False
        peer.resync = False  # the back-off decides; the next session sends everything anyway
        peer.failures += 1
        peer.last_error = error
        peer.last_error_at = wall
        delay = backoff_delay(peer.failures, self.policy, self._rand)
        peer.next_attempt = now + delay
        return delay
