"""The node's composition root: wires lines, reconciled sets, security, server and client.

Only this module knows every part. Stores are opened per session, so entries written by
other processes (``lifeline log``) are always seen; the config is re-read per session, so
``share``/``unshare`` take effect on a running server. A session reconciles the line's
attestations and statements first, then its entries, so received entries are checked
against the author signatures already admitted; a session that admitted new entries ends
with one signed state statement (DESIGN §6, decision 0015), a no-op session signs nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from lifeline.errors import LifelineError, NotAuthenticated
from lifeline.ledger import utc_now
from lifeline.store.grouped import grouped
from lifeline.store.port import Store
from lifeline_mesh.helpers import pool as offload
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.inbound import InboundLog
from lifeline_mesh.home.mesh_state import holds_ca_key
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.home.state import recorded_node_state, serving_state
from lifeline_mesh.membership import RevocationList
from lifeline_mesh.membership.ca import local_mesh_id
from lifeline_mesh.membership.client import pull_membership
from lifeline_mesh.membership.join_port import start_join_server
from lifeline_mesh.membership.service import add_membership
from lifeline_mesh.node.backfill import deepen
from lifeline_mesh.node.line_session import LineSession, SessionParts
from lifeline_mesh.node.lines import node_lines
from lifeline_mesh.node.live_rows import LiveRows, Taken
from lifeline_mesh.node.membership_server import MembershipServer, serve_membership
from lifeline_mesh.node.observer import NodeObserver
from lifeline_mesh.node.security import PeerPins, TransportSecurity, peer_node_id, shared_options
from lifeline_mesh.node.shallow_serve import shallow_service
from lifeline_mesh.node.watch_back import WatchBack
from lifeline_mesh.node.watch_out import watch_peer
from lifeline_mesh.node.witness_pace import Deferred, WitnessPace, witness_share
from lifeline_mesh.notary.sign import sign_state
from lifeline_mesh.peering.changes import ChangeFeed
from lifeline_mesh.peering.scheduler import SyncScheduler
from lifeline_mesh.peering.service import Peering, PeeringOptions
from lifeline_mesh.peering.table import PeerState
from lifeline_mesh.peering.watches import Heard
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.recon.session import SessionLimits
from lifeline_mesh.sync.driver import Progress, SyncReport
from lifeline_mesh.sync.fast import FastPaths
from lifeline_mesh.sync.outcome import reported_if_refused, scheduled_summary
from lifeline_mesh.transport.addresses import split_address
from lifeline_mesh.transport.announce import ChangeItems, WatchService
from lifeline_mesh.transport.authz import MeshRole, SessionPeer
from lifeline_mesh.transport.client import PeerOpenings, sync_line
from lifeline_mesh.transport.pool import ChannelPool
from lifeline_mesh.transport.server import SyncServer
from lifeline_mesh.transport.shallow_rpc import CallHook

if TYPE_CHECKING:  # a hub's (--store): imported when used, `serve` of line files never does
    from lifeline_mesh.sync.pg_snapshots import PgSnapshots
    from lifeline_mesh.sync.snapshot_cache import SnapshotCache

__all__ = ["NODE_LIMITS", "MembershipServer", "Node", "serve_membership"]

log = logging.getLogger(__name__)

# A node's sessions move large batches: up to 6,400 items per fetch, in frames of up to
# 8 MiB (the protocol's: 256 and 1 MiB; a peer's smaller frame limit wins). Each batch is
# one transaction writing every index page its random ids touch: larger batches write each
# page once for more rows (bench/history/figures-behind-the-code.md).
NODE_LIMITS = SessionLimits(fetch_chunk=6400, max_frame_bytes=8 << 20)


class Node:
    def __init__(
        self,
        home: NodeHome,
        *,
        insecure: bool = False,
        limits: SessionLimits | None = None,
        clock: Callable[[], str] = utc_now,
        fast: FastPaths | None = None,
    ) -> None:
        self.home = home
        # The lines, of the kind the home holds (line files, or a hub's database): chosen once
        self.lines = node_lines(home)
        self.limits = limits or NODE_LIMITS
        # Helper processes, read-ahead, pipelined admission; `--no-fast-paths` (sync/fast.py)
        self.fast = fast if fast is not None else FastPaths.from_env()
        self.security = TransportSecurity.for_home(home, insecure=insecure)
        self.clock = clock
        self.identity = NodeIdentity.maybe_of(home)
        self.join_address: str | None = None
        self._join_listen: str | None = None
        self._peering: Peering | None = None
        self.parts = SessionParts(
            signers=lambda local, caller: self.security.signers(home, local, caller),
            security=self.security,
            identity=self.identity,
            clock=clock,
            scheduler=lambda: self._peering.scheduler if self._peering else None,
            witness_later=Deferred(self._witness).later,
            pace=WitnessPace(share=self._witness_share),
            may_send=lambda node_id: self.pins.may_send(node_id, self.security.authorizer),
            line_refused=lambda node_id, line: self.pins.line_refused(node_id, line),
        )
        # Rows read to announce and rows taken from the peers we watch (decision 0046)
        self.rows = LiveRows(
            home,
            lines=self.lines,
            session=self.session,
            max_item_bytes=self.limits.max_item_bytes,
            node_id=self.identity.node_id if self.identity else None,
        )
        # Changes of our shared lines, announced (with their rows) to the peers watching us
        self.changes = self._feed()
        self._watch: WatchService | None = None  # the server's, once it is made
        self._on_session: CallHook | None = None  # told of each inbound session and call
        self.outbound = {"syncs": 0, "failed": 0}  # scheduled syncs this node started
        # The node found serving at each static peer address (its certificate), pinned in
        # the channels we dial there: what we send goes to that node or nowhere.
        self.pins = PeerPins(home)
        self.channels = ChannelPool()  # the calls to one peer share a connection (0096)
        self.refused_rows: set[tuple[str, str, str]] = set()  # members rows logged once
        # each peer's last members and revocation lists (their digest): a peer whose lists
        # did not change answers a session's pull with none
        self.lists_seen: dict[str, bytes] = {}
        self.metrics: NodeObserver | None = None  # serve --metrics-listen (node/metrics.py)
        self.watch_back = WatchBack(lambda: self._peering)  # links watched both ways
        self.openings = PeerOpenings()  # what each peer's hello said it reads

    @property
    def snapshots(self) -> SnapshotCache | PgSnapshots:
        """The lines' snapshots, kept between sessions (node/lines.py)."""
        return self.lines.snapshots

    @property
    def hub(self) -> bool:
        """Whether the lines are a hub's database (held by the home, not asked of a store)."""
        return self.home.lines.url is not None

    def config(self) -> NodeConfig:
        return NodeConfig.current(self.home)

    def is_shared(self, line: str) -> bool:
        return line in self.config().shared_lines

    @asynccontextmanager
    async def open_line(self, line: str) -> AsyncIterator[Store]:
        """The store of ``line`` as the node's sessions see it (made when new), outside any
        session: nothing is signed for what is written through it."""
        async with self.lines.open(line) as opened:
            yield opened.store

    @asynccontextmanager
    async def session(
        self,
        line: str,
        peer: SessionPeer | None = None,
        source: str | None = None,
        *,
        live: bool = False,
        bulk: bool = False,
    ) -> AsyncIterator[LineSession]:
        """One session on ``line``: dialed to us by ``peer``, or ours with ``source`` (the
        node we dial; ``live``: rows taken over its Watch call; ``bulk``: a large pull under
        `serve`, a shallow line deepened, its writes grouped as `sync`'s). It ends itself
        (node/line_session.py)."""
        # `sync`'s own pull (sync/fast.py), or a deepening under `serve` (decision 0082)
        bulk = (self.fast.grouped or (bulk and self.fast.any)) and peer is None
        async with self.lines.open(line) as opened, grouped(opened.store, bulk):
            codec = EntryCodec(self.home.limits())
            current = LineSession(self.parts, opened, codec, peer, source, live=live)
            await current.begin()
            ok = False
            try:
                yield current
                ok = True
            finally:
                await current.end(ok=ok)

    def _witness_share(self) -> float:
        """The chance this node witnesses an interval's rows: 1 unless it hears more than
        ``WITNESSES`` nodes on the LAN (decision 0095)."""
        heard = len(self._peering.lan.heard) if self._peering is not None else 0
        return witness_share(heard + 1)

    async def _witness(self, line: str) -> None:
        """Sign ``line``'s state now, a deferred statement coming due (rows taken over Watch
        calls meanwhile are witnessed by that one statement: node/witness_pace.py)."""
        self.parts.pace.due(line)
        identity = self.identity
        if identity is None:
            return
        try:
            async with self.lines.open(line) as opened:
                signers = self.parts.signers(identity.node_id, None)
                notary = opened.notary(signers, self.parts.clock, None)
                await sign_state(notary, identity, line, self.parts.clock)
        except LifelineError as exc:  # the next taken rows or session signs instead
            log.warning("line %s: no state statement signed: %s", line, exc)

    async def connect(self) -> None:
        """Reach the lines' store now (a hub's database unreachable: one line, before listening)."""
        await self.lines.connect()

    async def close(self) -> None:
        await self.lines.close()

    def _extend(self, server: grpc.aio.Server) -> None:
        if not self.security.insecure:  # membership on the sync port
            add_membership(server, self.home)
        # the Shallow and Push calls (decision 0063), logged and counted as sessions are
        shallow = shallow_service(self, self._on_session)
        shallow.on_failure = None if self.metrics is None else self.metrics.refused
        shallow.add_to(server)

    async def _join_port(self) -> grpc.aio.Server | None:
        """A join port, a server of its own, where the CA key lives."""
        listen = self._join_listen
        if self.security.insecure or not listen or not holds_ca_key(self.home):
            return None
        server, port = await start_join_server(self.home, listen)
        self.join_address = f"{listen.rpartition(':')[0]}:{port}"
        return server

    def _feed(self) -> ChangeFeed:
        # A hub's lines are announced without rows: its peers sync for them.
        rows = self.rows.read if self.lines.announces_rows else None
        return ChangeFeed(lambda: self.config().shared_lines, rows)

    def server(self, join_listen: str | None = None) -> SyncServer:
        self._join_listen = join_listen
        self.changes = self._feed()  # a fresh feed: stopping a server closes its feed
        inbound = InboundLog(self.home)
        hook = m.inbound(inbound.record) if (m := self.metrics) else inbound.record
        self._on_session = hook  # the sessions', and the shallow calls' (_extend)
        server = SyncServer(
            self.session,
            self.is_shared,
            authorizer=self.security.authorizer,
            credentials=self.security.server_credentials,
            limits=self.limits,
            extend=self._extend,
            side=self._join_port,
            announcements=self.changes,
            on_session=hook,
            fast=self.fast,
            node_id=self.identity.node_id if self.identity else None,
        )
        self._watch = server.watch
        if server.watch is not None:
            server.watch.on_watcher = self.watch_back.caller
            server.watch.caller_id = peer_node_id
        server.on_failure = None if self.metrics is None else self.metrics.refused
        return server

    def _row_takers(self) -> set[str]:
        """The node ids of the peers whose Watch calls take our changes' rows."""
        if self._watch is None:
            return set()
        return {n for p in self._watch.item_callers if (n := peer_node_id(p)) is not None}

    async def serve(
        self,
        listen: str,
        stop: asyncio.Event,
        ready: Callable[[str], None] | None = None,
        *,
        join_listen: str | None = None,
        peering: PeeringOptions | None = None,
    ) -> SyncServer:
        """Serve until ``stop`` is set, then stop gracefully. With ``peering``, also keep
        in sync with static and discovered peers on its own (DESIGN §8)."""
        server = self.server(join_listen)
        address = await server.start(listen)
        self.watch_back.listening = address
        keeper = None if peering is None else self.peering(peering, address)
        try:
            state = serving_state(
                address,
                self.identity.node_id if self.identity else None,
                self.config().shared_lines,
                mesh_id=local_mesh_id(self.home),
                discovery=peering is not None and peering.discovery,
                interfaces=peering.interfaces if peering else (),
                join=self.join_address,
            )
            with recorded_node_state(self.home, state):
                local = None if keeper is None else keeper.scheduler.local_change
                async with (
                    self.lines.writes_of_others(self.changes, local),
                    self.lines.keep_read_models(lambda: self.config().shared_lines),  # 0103
                ):
                    if ready is not None:
                        ready(address)
                    if self.fast.helpers:  # ready before the first large batch arrives
                        offload.warm_up()
                    async with asyncio.TaskGroup() as tasks:
                        deepening = tasks.create_task(deepen(self))  # shallow lines, decision 0082
                        if keeper is None:
                            await stop.wait()
                        else:
                            await keeper.run_until(stop)
                        deepening.cancel()
        finally:
            await server.stop()
        return server

    def peering(self, options: PeeringOptions, address: str) -> Peering:
        """Static peers, LAN discovery, the line watcher and the scheduler of this node."""
        home = self.home

        def shared_line_files() -> list[Path]:
            return [home.line_path(name) for name in self.config().shared_lines]

        def not_revoked(node_id: str) -> bool:
            return RevocationList.current(home).revoked_at(node_id) is None

        self._peering = Peering(
            home,
            options,
            self.sync_peer if self.metrics is None else self.metrics.timed(self.sync_peer),
            node_id=self.identity.node_id if self.identity else "",
            mesh_id=local_mesh_id(home),
            port=split_address(address)[1],
            line_files=shared_line_files,
            allow=not_revoked,
            watch_one=self.watch_peer,
            # A reader sends nothing in its sessions: announcing its changes would only
            # start sessions that carry nothing, so its watchers hear heartbeats only.
            feed=None if self.security.role is MeshRole.READER else self.changes,
        )
        self._peering.scheduler.covered = self._row_takers
        return self._peering

    @property
    def scheduler(self) -> SyncScheduler | None:
        """The scheduler of the peering made by :meth:`peering` (under `serve`), or None."""
        return self._peering.scheduler if self._peering is not None else None

    def watch_peer(self, peer: PeerState) -> AsyncIterator[Heard]:
        """The Watch call to ``peer`` (node/watch_out.py)."""
        return watch_peer(self, peer)

    def node_at(self, peer: PeerState) -> str:
        """The node serving at ``peer``'s address as our sessions found it (its
        certificate), else the address."""
        address = str(peer.address)
        return self.pins.known.get(address, address)

    async def take_rows(self, peer: PeerState, rows: ChangeItems) -> bool:
        """Admit the rows ``peer`` announced (``LiveRows.take``), when it is a lab node or
        the node our sessions found serving at its address, not revoked. False: sync with
        ``peer`` instead. Rows of a tree held already reached us first from another peer:
        ``peer`` is asked to leave us out of that tree (decision 0083)."""
        source = self.node_at(peer)
        taken = await self.rows.take(source, rows) if self._may_take_from(peer) else None
        if not taken:
            return False
        if taken is Taken.HELD and rows.tree:
            self.changes.prune(source, rows.tree)
        if self._peering is not None:
            self._peering.took_rows(peer.key, rows.line, self.rows.taken_span(rows))
        return True

    def _may_take_from(self, peer: PeerState) -> bool:
        """Rows are taken from a lab node (no TLS), or from the node our sessions found
        serving at the peer's address (its certificate), while it is not revoked."""
        if self.security.insecure:
            return True
        address = str(peer.address)  # a reader's rows are not taken (its syncs send none)
        node_id = self.pins.known.get(address)
        return self.pins.trusted(address) and self.parts.may_send(node_id) is None

    async def sync_peer(self, peer: PeerState) -> str:
        """One scheduled sync with ``peer``: every shared line; a one-line summary."""
        lines = self.config().shared_lines
        if not lines:
            return "nothing to sync: no line is shared (`lifeline-mesh share LINE`)"
        self.outbound["syncs"] += 1
        held: dict[str, int | None] = {}
        try:
            reports = await self.sync(str(peer.address), lines, held, go_on=True)
            summary = scheduled_summary(reports, str(peer.address))  # raises: no line synced
        except BaseException:
            self.outbound["failed"] += 1
            raise
        if self._peering is not None:
            marks = {line: mark for line, mark in held.items() if mark is not None}
            self._peering.scheduler.synced(peer.key, marks)
        return summary

    async def sync(
        self,
        peer: str,
        lines: Sequence[str],
        held: dict[str, int | None] | None = None,
        progress: Progress | None = None,
        *,
        bulk: bool = False,
        go_on: bool = False,
    ) -> list[SyncReport]:
        """One session per line with ``peer`` (each shared here); ``held`` gets each line's
        highest row the peer holds after it (or None); ``progress``: see ``drive``; ``bulk``: a
        large pull, grouped under `serve` too; ``go_on``: a refused line is an ``error`` report."""
        self.config().require_shared(lines)
        # Learn the members and revocations the peer knows (signers we must accept): at first
        # contact on a channel of its own, so a port that is not a node's is named as such
        # (pinning would see a failed TLS handshake only); then on the pinned channel.
        ask = not self.security.insecure
        if ask and peer not in self.pins.known:
            await self.pull_lists(peer)
            ask = False
        reports: list[SyncReport] = []
        try:
            async with self.dial(peer) as channel:
                if ask:
                    await self.pull_lists(peer, channel)
                    await self.pins.pin(peer)  # what it sent may revoke the node serving there
                for line in lines:
                    source = self.pins.known.get(peer, peer)
                    with reported_if_refused(reports, line, "initiator", go_on=go_on):
                        async with self.session(line, None, source, bulk=bulk) as ours:
                            report = await sync_line(
                                peer,
                                line,
                                ours.sets,
                                limits=self.limits,
                                fast=self.fast,
                                openings=self.openings,
                                channel=channel,
                                progress=progress,
                            )
                            reports.append(report)
                            if self.metrics is not None:
                                self.metrics.session(peer, line, "out", report)
                        if held is not None:
                            held[line] = ours.held
        except NotAuthenticated:  # another node may serve there now: ask again next time
            self.pins.forget(peer)
            raise
        return reports

    async def pull_lists(self, peer: str, channel: grpc.aio.Channel | None = None) -> None:
        await pull_membership(
            self.home, peer, logged=self.refused_rows, seen=self.lists_seen, channel=channel
        )

    @asynccontextmanager
    async def dial(self, peer: str) -> AsyncIterator[grpc.aio.Channel]:
        """The channel the calls to ``peer`` share (decision 0096): its Watch call, each
        session and the membership pull before it. Pinned to the node serving at ``peer``
        (refused while that node is revoked), except in a lab mesh without TLS."""
        options = self.security.channel_options
        if not self.security.insecure:
            options = await self.pins.pin(peer)
        sized = shared_options(options, self.limits.max_frame_bytes)
        async with self.channels.lease(peer, self.security.channel_credentials, sized) as ch:
            yield ch
