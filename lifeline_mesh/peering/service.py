"""Peering: keep a serving node in touch with its peers, given a way to sync with one.

The always-on half of ``lifeline-mesh serve`` (DESIGN §8), as one unit the node's
composition root starts: static peers from the config and ``--peer``, LAN discovery on the
named interfaces, the line watcher (its changes also go to the peers that watch us, through
the node's change feed), the sync scheduler, and a Watch call to every peer
(``peer_watch.py``), with the peer table written to ``peers.json`` as it changes. It does
not know the wire protocol: the node passes ``sync_one`` and ``watch_one``. Every task it
starts lives in the caller's TaskGroup; cancelling that group stops them all and withdraws
the LAN advert.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lifeline.errors import ConfigError
from lifeline_mesh.discovery.advert import PeerEvent, PeerFound, PeerLost, check_interfaces
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.registry import member_ids
from lifeline_mesh.peering.arguments import add_peering_arguments
from lifeline_mesh.peering.changes import CHANGE_POLL_S, ChangeFeed, LineWatcher
from lifeline_mesh.peering.fanout import FANOUT_OFFSETS, LanView
from lifeline_mesh.peering.schedule import SchedulePolicy
from lifeline_mesh.peering.scheduler import (
    MAX_CONCURRENT_SESSIONS,
    SESSION_TIMEOUT_S,
    SyncOne,
    SyncScheduler,
)
from lifeline_mesh.peering.table import PeerAddress, save_peers_file
from lifeline_mesh.peering.watches import PeerWatches, WatchOne

if TYPE_CHECKING:  # imported once serve listens, and only with discovery on
    from lifeline_mesh.discovery.zeroconf import ZeroconfDiscovery

__all__ = ["Peering", "PeeringOptions", "add_peering_arguments", "peering_options"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class PeeringOptions:
    """What ``serve`` was asked to do about peers (see :func:`peering_options`)."""

    static_peers: list[PeerAddress] = field(default_factory=list)
    discovery: bool = True
    interfaces: list[str] = field(default_factory=list)
    policy: SchedulePolicy = field(default_factory=SchedulePolicy)
    max_sessions: int = MAX_CONCURRENT_SESSIONS
    session_timeout: float = SESSION_TIMEOUT_S
    watch_interval: float = CHANGE_POLL_S
    fanout_offsets: tuple[int, ...] = FANOUT_OFFSETS


def peering_options(
    args: argparse.Namespace, config: NodeConfig, *, listen_host: str
) -> PeeringOptions:
    """Merge the command line with the config; errors name the bad value."""
    peers: list[PeerAddress] = []
    for text in [*config.peers, *getattr(args, "peer", [])]:
        address = PeerAddress.parse(text)
        if address not in peers:
            peers.append(address)
    discovery = not getattr(args, "no_discovery", False)
    interfaces: list[str] = list(getattr(args, "interface", []))
    if discovery and not interfaces:
        if listen_host in ("", "0.0.0.0", "::"):
            raise ConfigError(
                f"serve listens on every interface ({listen_host or '*'}); name the one to "
                "announce on with --interface ADDR (repeat it for more), or pass --no-discovery"
            )
        interfaces = ["127.0.0.1" if listen_host == "localhost" else listen_host]
    if discovery:
        interfaces = check_interfaces(interfaces)
    return PeeringOptions(static_peers=peers, discovery=discovery, interfaces=interfaces)


PEERS_FILE_EVERY_S = 2.0  # `peers` shows times at most this stale while sessions run
_TIMES = frozenset({"last_sync_at", "next_attempt_at", "last_result", "syncing", "syncs"})


def _nothing() -> None:
    pass


class _Stopped(Exception):
    """Raised inside the peering task group to end it: the group then cancels every task."""


class Peering:
    """Scheduler + discovery + watcher for one node. Call :meth:`start` inside a TaskGroup."""

    def __init__(
        self,
        home: NodeHome,
        options: PeeringOptions,
        sync_one: SyncOne,
        *,
        node_id: str,
        mesh_id: str | None,
        port: int,
        line_files: Sequence[Path] | Callable[[], Sequence[Path]],
        allow: Callable[[str], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
        watch_one: WatchOne | None = None,
        feed: ChangeFeed | None = None,
    ) -> None:
        self.home = home
        self.options = options
        self.node_id = node_id
        self.mesh_id = mesh_id
        self.port = port
        self.line_files = line_files  # or a callable: the shared lines may change
        self.allow = allow  # e.g. "not revoked": a discovered node we must never dial
        self.scheduler = SyncScheduler(
            sync_one,
            policy=options.policy,
            max_sessions=options.max_sessions,
            session_timeout=options.session_timeout,
            clock=clock,
            on_update=self._persist,
        )
        self.discovery: ZeroconfDiscovery | None = None
        self.feed = feed  # our line changes, announced to the peers that watch us
        self.watches = (
            None
            if watch_one is None
            else PeerWatches(self.scheduler, watch_one, on_live=self._persist_now)
        )
        if self.watches is not None:
            self.scheduler.on_back = self.watches.poke
            self.scheduler.watched = lambda w=self.watches: w.live
            self.scheduler.own_id = node_id
            self.scheduler.linked = self.watches.linked
        # Nodes heard on the LAN; the few kept as peers (bounded fan-out, decision 0067)
        self.lan = LanView(node_id, options.fanout_offsets)
        self.scheduler.nodes = lambda: max(len(self.lan.heard), len(self.scheduler.table)) + 1
        self._watcher: LineWatcher | None = None
        self._written: list[dict[str, Any]] | None = None  # the table last written
        self._written_at = 0.0
        self._flush: asyncio.TimerHandle | None = None
        self._unrecorded = False  # the last write of the table failed (said once)

    def _persist(self, rows: list[dict[str, Any]]) -> None:
        """Write the table when a row changed in what it says (a peer, an error, a watch);
        times and results alone are written at most every ``PEERS_FILE_EVERY_S``."""
        if self.watches is not None:
            self.watches.refresh()
            for row in rows:
                row["watching"] = row["key"] in self.watches.live
        # A peer's first sync is news (``peers`` shows it at once); later times are not.
        shape = [
            {k: v for k, v in row.items() if k not in _TIMES}
            | {"synced": row.get("last_sync_at") is not None}
            for row in rows
        ]
        now = time.monotonic()
        if shape == self._written and now - self._written_at < PEERS_FILE_EVERY_S:
            if self._flush is None:
                loop = asyncio.get_running_loop()
                self._flush = loop.call_later(PEERS_FILE_EVERY_S, self._persist_later)
            return
        self._written, self._written_at = shape, now
        try:
            save_peers_file(self.home, rows, pid=os.getpid(), wall_now=time.time())
        except OSError as exc:  # a full disk must not stop syncing, nor flood the log
            if not self._unrecorded:
                log.warning(
                    "cannot record the peer table in %s (%s); syncing goes on — free space "
                    "or make the folder writable (said once until it is recorded again)",
                    self.home.peers_path,
                    exc.strerror or exc,
                )
            self._unrecorded = True
            return
        if self._unrecorded:
            log.warning("the peer table is recorded again in %s", self.home.peers_path)
            self._unrecorded = False

    def _persist_later(self) -> None:
        self._flush = None
        self._written = None  # the times have moved on: write them
        self._persist_now()

    def _persist_now(self) -> None:
        try:
            self._persist(self.scheduler.rows())
        except OSError as exc:  # a full disk must not stop watching
            log.warning("cannot record the peer table: %s", exc)

    def _lines_changed(self, watcher: LineWatcher, paths: list[Path]) -> None:
        """The line watcher saw new rows: peers that may lack them sync; watchers hear."""
        marks = {p.stem: m for p in paths if (m := watcher.marks.get(p)) is not None}
        self.scheduler.local_change(marks if len(marks) == len(paths) else None)
        if self.feed is not None:
            rows = {p: (watcher.previous.get(p), watcher.marks.get(p)) for p in paths}
            self.feed.publish_paths(paths, rows)

    def _signed_late(self, paths: list[Path]) -> None:
        """Author signatures came here for entries held before them: the peers those
        entries went to may lack them too. The rows' marks say nothing of
        signatures, so every peer is due (a session that finds nothing costs one round
        trip) and the watchers hear of it without rows, and sync. They used to wait for
        the next periodic check, one hop at a time."""
        self.scheduler.local_change(None)
        if self.feed is not None:
            self.feed.publish_paths(paths)

    def took_rows(self, key: str, line: str, span: tuple[int, int] | None) -> None:
        """Rows announced by peer ``key`` were just stored here, at rows ``span`` of
        ``line`` when known: announce them to our watchers now, not at the next poll, and
        count them as held by ``key`` (no session back to it for them)."""
        if span is not None:
            self.scheduler.took(key, line, span)
        self.scheduler.heard_from(key)
        if self._watcher is not None:
            self._watcher.poke()

    async def start(self, tg: asyncio.TaskGroup) -> None:
        """Announce (when enabled), then start every loop as a task of ``tg``."""
        for address in self.options.static_peers:
            self.scheduler.add_static(address)
        if not self.scheduler.table:
            self._persist([])  # `peers` then shows that this node runs with no peer yet
        # Static peers first: the mDNS probe below takes about two seconds.
        tg.create_task(self.scheduler.run(tg), name="scheduler")
        watcher = self._watcher = LineWatcher(self.line_files, interval=self.options.watch_interval)
        tg.create_task(
            watcher.run(
                _nothing, lambda paths: self._lines_changed(watcher, paths), self._signed_late
            ),
            name="line watcher",
        )
        if self.watches is not None:
            self.watches.start(tg)
        if self.options.discovery and self.mesh_id:
            from lifeline_mesh.discovery.zeroconf import ZeroconfDiscovery

            self.discovery = ZeroconfDiscovery(
                node_id=self.node_id,
                mesh_id=self.mesh_id,
                port=self.port,
                interfaces=self.options.interfaces,
                allow=self.allow,
                known=self._known,
            )
            await self.discovery.start()
            tg.create_task(self._discover(self.discovery), name="discovery")
        elif self.options.discovery:
            # Adverts carry the mesh id; without one there is no mesh to find peers of.
            log.warning(
                "LAN discovery is off: this node is in no mesh (create or join one); "
                "syncing with static peers only"
            )

    def _known(self, node_id: str) -> bool:
        """Whether discovery looks up ``node_id``'s advert: a member this node knows (a
        member it does not know yet dials it, and is looked up once a session brought
        the members list that names it; decision 0121), not revoked."""
        members = member_ids(self.home)
        if members is not None and node_id not in members:
            return False
        return node_id != self.node_id and (self.allow is None or self.allow(node_id))

    async def run_until(self, stop: asyncio.Event) -> None:
        """Run everything in a task group of its own until ``stop`` is set, then cancel it
        all (sessions, watcher, advert). A failure to start is raised as itself."""
        try:
            async with asyncio.TaskGroup() as tg:
                await self.start(tg)
                await stop.wait()
                raise _Stopped
        except BaseExceptionGroup as group:
            _, rest = group.split(_Stopped)
            if rest is None:
                return
            if len(rest.exceptions) == 1 and isinstance(rest.exceptions[0], Exception):
                raise rest.exceptions[0] from None
            raise rest from None
        finally:
            if self._flush is not None:  # stopped: no write after this
                self._flush.cancel()
                self._flush = None

    async def _discover(self, discovery: ZeroconfDiscovery) -> None:
        """Feed LAN events to the scheduler; withdraw the advert when cancelled."""
        try:
            async with asyncio.TaskGroup() as inner:
                inner.create_task(discovery.run())
                while True:
                    self._on_event(await discovery.events.get())
        finally:
            # Shielded: a second cancellation must not skip the goodbye packets.
            await asyncio.shield(discovery.stop())

    def _on_event(self, event: PeerEvent) -> None:
        """A LAN event: the nodes kept as peers follow the bounded fan-out (``fanout.py``)."""
        if isinstance(event, PeerFound):
            log.info("discovered %s at %s", event.node_id, ", ".join(event.addresses))
            add, drop = self.lan.found(event)
        elif isinstance(event, PeerLost):
            log.info("%s left the LAN", event.node_id)
            add, drop = self.lan.lost(event.node_id)
        else:
            return
        for node_id in drop:
            self.scheduler.peer_lost(node_id)
        for found in add:
            self.scheduler.peer_found(found)
        if add or drop:
            log.debug(
                "LAN peers kept: %d of %d heard (+%d, -%d)",
                len(self.lan.kept),
                len(self.lan.heard),
                len(add),
                len(drop),
            )
