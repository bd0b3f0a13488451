"""PeerWatches: one Watch call kept open to every peer this node syncs with.

Sessions are opened by the side that dials, so a node reachable only one way (a CI runner
behind NAT that dialed the office node) would hear of the office node's new entries only
at its next periodic sync. Over the Watch call the peer announces each change of a shared
line, and the scheduler syncs with that peer at once (``SyncScheduler.remote_change``);
our own changes already reach it at once (the line watcher makes every healthy peer due).
A call that fails or ends is dialled again with back-off (``WATCH_BACKOFF``); the periodic
sync stays as the safety net, and is all a first-wave peer (no Watch) gets.

It knows nothing of the wire: the node passes ``watch_one(peer)``, an async iterator of
what it heard (:class:`Heard`: the call opened, a change, a change it must sync for now).
Every task lives in the caller's TaskGroup and follows the peer table: a peer that leaves
the table is no longer watched.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
import time
from collections.abc import AsyncIterator, Callable

from lifeline_mesh.peering.schedule import SchedulePolicy, backoff_delay
from lifeline_mesh.peering.scheduler import SyncScheduler, describe_failure
from lifeline_mesh.peering.table import PeerAddress, PeerState

__all__ = ["LINKED_S", "WATCH_BACKOFF", "Heard", "PeerWatches", "WatchOne"]

log = logging.getLogger(__name__)


class Heard(enum.Enum):
    """What one message of a Watch call means for the scheduler."""

    OPENED = "opened"  # the call was just accepted: sync now (even in back-off)
    CHANGED = "changed"  # a change we lack: sync (after the grace when the peer dials us)
    # A change of a peer that sends rows to its watchers and so never dials us for it,
    # whose rows we could not take (or it could not send): sync now.
    UNTAKEN = "untaken"


# What one peer's call says, message by message (the first is OPENED).
WatchOne = Callable[[PeerState], AsyncIterator[Heard]]
# Dial again quickly (a restarted peer is back within seconds), and at least every 5 s: a
# partition that ends is noticed within that (a fresh call syncs at once, whatever the
# session back-off), and with a bounded fan-out (``fanout.py``) a node dials few peers.
WATCH_BACKOFF = SchedulePolicy(backoff_base=0.5, backoff_max=5.0, backoff_jitter=0.5)
# A call open this long is a link that stayed up through what another call's reopening
# ends (a partition, a peer's restart): rows relayed over it may bring what that peer
# holds, so the catch-up with it need not run at once (decision 0100)
LINKED_S = 10.0


class PeerWatches:
    """Keeps ``watch_one`` running for each peer of the scheduler's table."""

    def __init__(
        self,
        scheduler: SyncScheduler,
        watch_one: WatchOne,
        *,
        policy: SchedulePolicy = WATCH_BACKOFF,
        rand: Callable[[], float] = random.random,
        on_live: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.scheduler = scheduler
        self._watch_one = watch_one
        self._policy = policy
        self._rand = rand
        self._tg: asyncio.TaskGroup | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self.live: set[str] = set()  # keys of peers whose call is open now
        self._opened_at: dict[str, float] = {}  # of those, when each call opened
        self._clock = clock
        self._pokes: dict[str, asyncio.Event] = {}  # ends a back-off wait early
        self._on_live = on_live  # told when a call opens or ends (the peer table shows it)

    def start(self, tg: asyncio.TaskGroup) -> None:
        self._tg = tg
        self.refresh()

    def refresh(self) -> None:
        """Follow the peer table: watch new peers, stop watching peers that left it."""
        if self._tg is None:
            return
        keys = {peer.key for peer in self.scheduler.table}
        for key in keys - self._tasks.keys():
            self._tasks[key] = self._tg.create_task(self._run(key), name=f"watch {key}")
        for key in self._tasks.keys() - keys:
            self._tasks.pop(key).cancel()
            self._pokes.pop(key, None)
            self.live.discard(key)
            self._opened_at.pop(key, None)

    def linked(self, besides: str) -> bool:
        """Whether a call to a peer other than ``besides`` has been open ``LINKED_S``."""
        since = self._clock() - LINKED_S
        return any(at <= since for key, at in self._opened_at.items() if key != besides)

    def poke(self, key: str) -> None:
        """``key`` is up again (it dialed us): a call in back-off is dialled at once."""
        event = self._pokes.get(key)
        if event is not None and key not in self.live:
            event.set()

    async def _run(self, key: str) -> None:
        failures = 0
        poke = self._pokes.setdefault(key, asyncio.Event())
        while key in self.scheduler.table:
            poke.clear()
            peer = self.scheduler.table.get(key)
            dialed = peer.address
            try:
                failures = await self._watch(peer, dialed, failures)
            except Exception as exc:  # a peer's failure never leaves its task
                failures += 1
                self._failed(peer, failures, exc)
                self.scheduler.unreachable(key, dialed)
            self._opened_at.pop(key, None)
            if key in self.live:
                self.live.discard(key)
                self._live_changed()
            try:
                async with asyncio.timeout(backoff_delay(failures, self._policy, self._rand)):
                    await poke.wait()
                failures = 0  # poked: the peer is up again
            except TimeoutError:
                pass

    async def _watch(self, peer: PeerState, dialed: PeerAddress, failures: int) -> int:
        """One Watch call to ``peer`` at ``dialed`` until it ends; returns the failures to
        back off for. A call answered by another node than the peer's (its address was
        dropped from the row: ``PeerTable.answered``) is closed at once."""
        self.scheduler.dialing[peer.key] = dialed
        calls = self._watch_one(peer)
        try:
            async for heard in calls:
                table = self.scheduler.table
                if peer.key not in table or table.get(peer.key) is not peer:
                    return failures  # the row went: the loop ends
                if table.serving.get(dialed, peer.node_id) != peer.node_id:
                    return 0  # another node answered there: dial the row's next address
                if heard is Heard.OPENED:
                    self._opened(peer, failures)
                    failures = 0
                self.scheduler.remote_change(
                    peer.key, fresh=heard is Heard.OPENED, at_once=heard is Heard.UNTAKEN
                )
        finally:
            if self.scheduler.dialing.get(peer.key) == dialed:
                del self.scheduler.dialing[peer.key]
            close = getattr(calls, "aclose", None)
            if close is not None:
                await close()
        return max(failures, 1)  # the peer ended the call: it is stopping

    def _live_changed(self) -> None:
        if self._on_live is not None:
            self._on_live()

    def _opened(self, peer: PeerState, failures: int) -> None:
        self.live.add(peer.key)
        self._opened_at[peer.key] = self._clock()
        self._live_changed()
        level = logging.INFO if failures else logging.DEBUG
        log.log(level, "watching %s for changes", peer.address)

    def _failed(self, peer: PeerState, failures: int, exc: Exception) -> None:
        error = describe_failure(exc, 0.0)
        if failures == 1:
            log.info("cannot watch %s for changes (periodic sync only): %s", peer.address, error)
        else:
            log.debug("watch of %s failed again (%d): %s", peer.address, failures, error)
