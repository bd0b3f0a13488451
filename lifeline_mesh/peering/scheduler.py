"""SyncScheduler: runs sync sessions with peers when the :class:`Planner` says so.

A thin asyncio loop around the pure planner (``schedule.py``). It knows nothing of the wire
protocol: the node hands it ``sync_one(peer) -> awaitable result``. Sessions run as tasks of
the caller's TaskGroup, at most ``max_sessions`` at a time (a semaphore), each under its own
timeout, and every failure stays with its peer: it is recorded, backed off and logged once,
never raised into the group. Cancelling :meth:`run` (or the group) stops everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

from lifeline.errors import LifelineError
from lifeline_mesh.discovery.advert import PeerFound
from lifeline_mesh.peering.schedule import Planner, SchedulePolicy
from lifeline_mesh.peering.table import PeerAddress, PeerState, PeerTable

__all__ = [
    "MAX_CONCURRENT_SESSIONS",
    "SESSION_TIMEOUT_S",
    "SyncOne",
    "SyncScheduler",
    "describe_failure",
]

log = logging.getLogger(__name__)

MAX_CONCURRENT_SESSIONS = 4  # a node on a busy LAN must not open a session to every peer at once
SESSION_TIMEOUT_S = 300.0  # a stuck session frees its slot after this long
# The result is shown in `peers` (str()); a ``peer_node_id: str`` attribute, when present,
# tells the table who a static peer is, so its LAN advert merges into the same row.
SyncOne = Callable[[PeerState], Awaitable[object]]


def describe_failure(exc: BaseException, timeout: float) -> str:
    """One line for ``lifeline-mesh peers``: our errors say it all; others get their type."""
    if isinstance(exc, TimeoutError):
        return f"no result within {timeout:g}s; the session was abandoned"
    if isinstance(exc, LifelineError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


class SyncScheduler:
    """Owns the peer table and decides, per peer, when ``sync_one`` runs."""

    def __init__(
        self,
        sync_one: SyncOne,
        *,
        table: PeerTable | None = None,
        policy: SchedulePolicy | None = None,
        max_sessions: int = MAX_CONCURRENT_SESSIONS,
        session_timeout: float = SESSION_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        rand: Callable[[], float] = random.random,
        on_update: Callable[[list[dict[str, Any]]], None] | None = None,
    ) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
        self.table = table if table is not None else PeerTable()
        self.planner = Planner(self.table, policy or SchedulePolicy(), rand)
        self._sync_one = sync_one
        self._sem = asyncio.Semaphore(max_sessions)
        self._timeout = session_timeout
        self._clock = clock
        self._wall = wall
        self._on_update = on_update
        self._wake = asyncio.Event()
        self.inbound = 0  # sessions dialed to us, running now
        self.on_back: Callable[[str], None] | None = None  # a peer in back-off is up again
        # The node ids of the peers whose Watch calls take our changes' rows (decision 0046)
        self.covered: Callable[[], set[str]] | None = None
        # The keys of the peers whose changes reach us over our open Watch calls to them
        self.watched: Callable[[], set[str]] | None = None
        self.own_id: str | None = None  # this node's id: which end checks a live link
        # How many nodes this node knows in its mesh (heard on the LAN, or its peers), and
        # whether a call to another peer stayed open (``PeerWatches.linked``): then the
        # catch-up of a reopened call is spread over that many nodes (decision 0100)
        self.nodes: Callable[[], int] | None = None
        self.linked: Callable[[str], bool] | None = None
        self.dialing: dict[str, PeerAddress] = {}  # the address each Watch call dialed

    # -- inputs (call from the event loop) ---------------------------------------------

    def add_static(self, address: PeerAddress) -> PeerState:
        peer = self.table.add_static(address)
        self.planner.appeared(peer.key, self._clock())
        self._changed()
        return peer

    def peer_found(self, event: PeerFound) -> PeerState | None:
        """A LAN advert: its row is tried now (None: another node answered at every
        address it names, so there is nothing to try)."""
        addresses = tuple(PeerAddress(a, event.port) for a in event.addresses)
        peer = self.table.discovered(event.node_id, addresses)
        if peer is None:
            log.debug("advert of %s ignored: other nodes serve at %s", event.node_id, addresses)
            return None
        self.planner.appeared(peer.key, self._clock())
        self._changed()
        return peer

    def peer_lost(self, node_id: str) -> None:
        self.table.lost(node_id)
        self._changed()

    def watched_by(self, node_id: str, address: PeerAddress) -> None:
        """A node watching us serves at ``address``: keep it as a peer and watch it back
        (decision 0066). No session now: the Watch calls' first messages start one."""
        peer = self.table.watched_by(node_id, address)
        if peer is not None:
            peer.next_attempt = self._clock() + self.planner.policy.period
            log.info("watching %s back (it watches us)", address)
            self._changed()

    def unwatched(self, node_id: str) -> None:
        """That node's Watch call ended: a row kept only for it goes."""
        if self.table.unwatched(node_id):
            self._changed()

    def local_change(self, marks: dict[str, int] | None = None) -> None:
        """New entries here (from the line watcher; ``marks``: each changed line's highest
        row): healthy peers that may lack them sync now (``Planner.local_change``), but
        not those that take the rows over their Watch calls."""
        busy = self.inbound > 0 or any(p.in_flight for p in self.table)
        covered = self._covered_keys()
        if self.planner.local_change(self._clock(), marks, busy=busy, covered=covered):
            self._changed()

    def _covered_keys(self) -> frozenset[str]:
        """The peers that take our changes' rows over their Watch calls (by node id)."""
        if self.covered is None:
            return frozenset()
        nodes = self.covered()
        return frozenset(p.key for p in self.table if p.node_id is not None and p.node_id in nodes)

    def _checked_by_peer(self) -> frozenset[str]:
        """The peers on links watched both ways (their changes reach us over our open Watch
        call to them, ours over theirs to us) whose node id sorts before ours: each such
        link is checked every period by that end alone, and by ours every ``live_period``
        (decision 0093)."""
        own = self.own_id
        if self.watched is None or own is None:
            return frozenset()
        first = frozenset(p.key for p in self.table if p.node_id is not None and p.node_id < own)
        return self._covered_keys() & frozenset(self.watched()) & first

    def _by_node(self, node_id: str | None) -> str | None:
        if node_id is None:
            return None
        return next((p.key for p in self.table if p.node_id == node_id), None)

    def learned(self, key: str, node_id: str) -> None:
        """Peer ``key`` told us its node id (its Watch call's first message, over a channel
        pinned to the certificate served at its address)."""
        if key not in self.table:
            return
        peer = self.table.get(key)
        address = self.dialing.get(key, peer.address)
        if not self.table.answered(peer, node_id, address):
            log.info(
                "%s serves node %s, not %s: not dialled for it again",
                address,
                node_id,
                peer.node_id,
            )
            self._changed()

    def unreachable(self, key: str, dialed: PeerAddress) -> None:
        """A session or Watch call dialed to peer ``key`` at ``dialed`` failed: a
        discovered peer with other candidate addresses is tried at the next one."""
        if key in self.table and self.table.unreachable(self.table.get(key), dialed):
            log.debug("%s unreachable at %s: trying %s", key, dialed, self.table.get(key).address)
            self._changed()

    def inbound_started(self, node_id: str | None) -> None:
        """A session dialed to us began (``node_id``: the caller's, when known)."""
        self.inbound += 1
        key = self._by_node(node_id)
        if key is not None:
            self.planner.dialed_in(key, self._clock())

    def inbound_ended(
        self, node_id: str | None, marks: dict[str, int] | None, *, ok: bool = False
    ) -> None:
        """A session dialed to us ended; ``marks`` when it ended well and what the peer
        holds is known (see ``synced``). ``ok`` without marks (other rows were written
        while it ran): the peer is up all the same, so a back-off with it ends now."""
        self.inbound = max(0, self.inbound - 1)
        self.planner.idle(self._clock())  # a catch-up waiting for it may run (0099)
        self._wake.set()
        key = self._by_node(node_id)
        if key is not None and marks is not None:
            self.synced(key, marks)
        elif key is not None and ok and self.planner.up_again(key, self._clock()):
            self._back(key)

    def heard_from(self, key: str) -> None:
        """Rows from peer ``key``'s Watch call were just taken: it is up, so a back-off
        with it ends now and it is due (a node that only dials out has no other way to
        learn that a peer it failed to reach during a partition is back)."""
        if self.planner.up_again(key, self._clock()):
            self._back(key, "its Watch call brought rows")

    def _back(self, key: str, why: str = "it dialed us") -> None:
        log.info("%s is up again (%s)", self.table.get(key).address, why)
        if self.on_back is not None:
            self.on_back(key)
        self._changed()

    def synced(self, key: str, marks: dict[str, int]) -> None:
        """A session with ``key`` ended well; it holds each line up to ``marks``. A peer in
        back-off is up again: sync with it now and watch it again at once."""
        if self.planner.synced(key, self._clock(), marks):
            self._back(key)
        else:
            self._wake.set()

    def took(self, key: str, line: str, span: tuple[int, int]) -> None:
        """Rows ``span`` (after, up to] of ``line`` were taken from ``key``'s Watch call."""
        self.planner.took(key, line, span)

    def remote_change(self, key: str, *, fresh: bool = False, at_once: bool = False) -> None:
        """Peer ``key`` announced a change over its Watch call: sync with it now (see
        ``Planner.remote_change``)."""
        spread = 0  # a node that no other call reaches catches up at once
        if fresh and self.nodes is not None and self.linked is not None and self.linked(key):
            spread = self.nodes()
        now = self._clock()
        if self.planner.remote_change(key, now, fresh=fresh, at_once=at_once, spread_over=spread):
            self._changed()

    def rows(self) -> list[dict[str, Any]]:
        return self.table.to_json(mono_now=self._clock(), wall_now=self._wall())

    def _changed(self) -> None:
        self._wake.set()
        if self._on_update is not None:
            try:
                self._on_update(self.rows())
            except OSError as exc:  # a full disk must not stop syncing
                log.warning("cannot record the peer table: %s", exc)

    # -- the loop ------------------------------------------------------------------

    async def run(self, tg: asyncio.TaskGroup) -> None:
        """Start due sessions in ``tg`` and sleep until the next one; runs until cancelled."""
        while True:
            started = False
            for peer in self.planner.due(self._clock(), busy=self.inbound > 0):
                self.planner.started(peer)
                tg.create_task(self._session(peer), name=f"sync {peer.key}")
                started = True
            if started:
                self._changed()
            self._wake.clear()
            wake_at = self.planner.next_wakeup()
            delay = None if wake_at is None else max(0.0, wake_at - self._clock())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()

    async def _session(self, peer: PeerState) -> None:
        dialed = peer.address
        try:
            async with self._sem:
                dialed = peer.address  # what ``sync_one`` dials
                async with asyncio.timeout(self._timeout):
                    result = await self._sync_one(peer)
        except Exception as exc:  # a peer's failure never leaves its session
            error = describe_failure(exc, self._timeout)
            delay = self.planner.failed(peer, self._clock(), self._wall(), error)
            if peer.failures == 1:
                log.warning("sync with %s failed: %s", peer.address, peer.last_error)
            else:
                log.debug("sync with %s failed again (%d): %s", peer.address, peer.failures, exc)
            log.debug("next attempt with %s in %.1fs", peer.address, delay)
            if self.watched is None or peer.key not in self.watched():
                self.unreachable(peer.key, dialed)  # (an open Watch call says it is there)
        else:
            if peer.failures:
                log.warning("sync with %s works again", peer.address)
            live = peer.key in self._checked_by_peer()
            self.planner.succeeded(peer, self._clock(), self._wall(), str(result), live=live)
            node_id = getattr(result, "peer_node_id", None)
            if isinstance(node_id, str) and node_id != peer.node_id:
                self.table.learned(peer, node_id)
        self.planner.idle(self._clock())
        self._changed()
