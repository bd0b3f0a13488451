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
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from lifeline.errors import LifelineError, PeerError, StoreError
from lifeline.ledger import utc_now
from lifeline.lines import validate_line_name
from lifeline.store.pg_dsn import is_pg_store
from lifeline.store.port import Store
from lifeline.store.tiers import require_tables
from lifeline_mesh.helpers import pool as offload
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.inbound import InboundLog
from lifeline_mesh.home.mesh_state import CA_KEY, state_of
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.home.state import local_mesh_id, recorded_node_state, serving_state
from lifeline_mesh.membership import RevocationList
from lifeline_mesh.membership.client import pull_membership
from lifeline_mesh.membership.join_port import start_join_server
from lifeline_mesh.membership.service import add_membership
from lifeline_mesh.node.live_rows import LiveRows, line_mark
from lifeline_mesh.node.membership_server import MembershipServer, serve_membership
from lifeline_mesh.node.security import PeerPins, TransportSecurity, peer_node_id
from lifeline_mesh.node.wal import trim_wal
from lifeline_mesh.node.watch_back import WatchBack
from lifeline_mesh.notary.port import Notary
from lifeline_mesh.notary.schema import NOTARY_COMPONENT
from lifeline_mesh.notary.sign import attest_state
from lifeline_mesh.notary.storage import NotaryStore
from lifeline_mesh.peering.changes import ChangeFeed
from lifeline_mesh.peering.service import Peering, PeeringOptions
from lifeline_mesh.peering.table import PeerState
from lifeline_mesh.peering.watches import Heard
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.recon.session import SessionLimits
from lifeline_mesh.sync.attestation_set import AttestationSet
from lifeline_mesh.sync.driver import SyncReport
from lifeline_mesh.sync.entry_set import EntrySet
from lifeline_mesh.sync.fast import FastPaths
from lifeline_mesh.sync.guards import NotarizedEntrySet, ReceiveOnly, SendNothing
from lifeline_mesh.sync.port import ReconSet
from lifeline_mesh.sync.snapshot_cache import SnapshotCache
from lifeline_mesh.transport.addresses import split_address
from lifeline_mesh.transport.announce import ChangeItems, WatchService, watch_lines
from lifeline_mesh.transport.authz import MeshRole, SessionPeer
from lifeline_mesh.transport.client import sync_line
from lifeline_mesh.transport.errors import Refused
from lifeline_mesh.transport.server import SyncServer

if TYPE_CHECKING:  # a hub's (--store): imported when used, `serve` of line files never does
    from lifeline.store.postgres import PgDatabase, PgStore
    from lifeline_mesh.node.metrics import NodeMetrics
    from lifeline_mesh.sync.pg_snapshots import PgSnapshots

__all__ = ["NODE_LIMITS", "MembershipServer", "Node", "serve_membership"]

log = logging.getLogger(__name__)

# A node's sessions move large batches: up to 6,400 items per fetch, in frames of up to
# 8 MiB (the protocol's: 256 and 1 MiB; a peer's smaller frame limit wins). Each batch is
# one transaction writing every index page its random ids touch: larger batches write each
# page once for more rows (docs/benchmarks.md, "Figures behind the code").
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
        store_url: str | None = None,
    ) -> None:
        self.home = home
        # Lines in a PostgreSQL database (a hub), not the line files in .lifeline/ (docs/hub.md)
        self.store_url = store_url
        self._db: PgDatabase | None = None
        self.limits = limits or NODE_LIMITS
        # Helper processes, read-ahead, pipelined admission; `--no-fast-paths` (sync/fast.py)
        self.fast = fast if fast is not None else FastPaths.from_env()
        self.security = TransportSecurity.for_home(home, insecure=insecure)
        self.clock = clock
        self.identity = NodeIdentity.maybe_of(home)
        self.join_address: str | None = None
        self._join_listen: str | None = None
        # Each open session's entry set: what it admitted decides its state statement.
        self._admitting: weakref.WeakKeyDictionary[Store, NotarizedEntrySet] = (
            weakref.WeakKeyDictionary()
        )
        # Rows read to announce and rows taken from the peers we watch (decision 0046)
        self.rows = LiveRows(
            home,
            open_line=self.open_line,
            make_sets=lambda store, source: self.make_sets(store, None, source),
            max_item_bytes=self.limits.max_item_bytes,
        )
        # Changes of our shared lines, announced (with their rows) to the peers watching us
        self.changes = self._feed()
        self._watch: WatchService | None = None  # the server's, once it is made
        self.outbound = {"syncs": 0, "failed": 0}  # scheduled syncs this node started
        # The last snapshot of each set of each line, brought up to date per session.
        self.snapshots = SnapshotCache(directory=home.snapshots_dir)
        # Who dialed each served session; what each of ours left the peer holding (``synced``)
        self._callers: weakref.WeakKeyDictionary[Store, str | None] = weakref.WeakKeyDictionary()
        self._held: weakref.WeakKeyDictionary[Store, int | None] = weakref.WeakKeyDictionary()
        self._peering: Peering | None = None
        self._pg_snapshots: PgSnapshots | None = None  # a hub's: up to date by bucket sums
        # The node found serving at each static peer address (its certificate), pinned in
        # the channels we dial there: what we send goes to that node or nowhere.
        self.pins = PeerPins(home)
        self.refused_rows: set[tuple[str, str, str]] = set()  # members rows logged once
        self.metrics: NodeMetrics | None = None  # serve --metrics-listen (node/metrics.py)
        self.watch_back = WatchBack(lambda: self._peering)  # links watched both ways

    @property
    def pg_snapshots(self) -> PgSnapshots:
        if self._pg_snapshots is None:
            from lifeline_mesh.sync.pg_snapshots import PgSnapshots

            self._pg_snapshots = PgSnapshots()
        return self._pg_snapshots

    def config(self) -> NodeConfig:
        return NodeConfig.current(self.home)

    def is_shared(self, line: str) -> bool:
        return line in self.config().shared_lines

    @asynccontextmanager
    async def open_line(self, line: str) -> AsyncIterator[Store]:
        if self.store_url is not None:
            async with self._open_pg_line(validate_line_name(line)) as pg:
                yield pg
            return
        async with self.home.open_line(validate_line_name(line), create=True) as store:
            start = await line_mark(store)
            ok = False
            try:
                yield store
                ok = True
            finally:
                entries = self._admitting.get(store)
                await self._witness_state(store, line)
                await trim_wal(store)
                await self._session_ended(store, line, start if ok else None, entries)

    async def _session_ended(
        self, store: Store, line: str, start: int | None, entries: NotarizedEntrySet | None
    ) -> None:
        """Tell the scheduler what the peer now holds: every row up to the line's highest,
        when nothing but this session's admissions was written meanwhile (else unknown)."""
        held = None
        if start is not None and entries is not None and self.security.role is not MeshRole.READER:
            end = await line_mark(store)
            if end is not None and end - start == entries.admitted:
                held = end
        if store not in self._callers:
            self._held[store] = held  # our own session: sync() reads it
            return
        self._inbound_ended(store, None if held is None else {line: held}, ok=start is not None)

    def _inbound_ended(self, store: Store, marks: dict[str, int] | None, *, ok: bool) -> None:
        caller = self._callers.pop(store, None)
        if self._peering is not None:
            self._peering.scheduler.inbound_ended(caller, marks, ok=ok)

    async def database(self) -> PgDatabase:
        """The hub's database (connected, its schema brought up to date, on first use)."""
        if self.store_url is None:
            raise StoreError("this node keeps its lines in .lifeline/, not in a database")
        if self._db is None:
            from lifeline.store.postgres import PgDatabase
            from lifeline_mesh.notary.pg_schema import PG_NOTARY

            self._db = await PgDatabase.connect(self.store_url, migrations=PG_NOTARY)
        return self._db

    async def close(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None

    @asynccontextmanager
    async def _open_pg_line(self, line: str) -> AsyncIterator[PgStore]:
        from lifeline.store.postgres import DATABASE_ERRORS, session_failure

        db = await self.database()
        store = await db.line(line)
        ok = False
        try:
            yield store
            entries = self._admitting.get(store)
            if entries is not None:  # a large load: VACUUM ANALYZE, in the background
                db.maintenance.admitted(store.line_id, entries.admitted)
            await self._witness_state(store, line)
            ok = True
        except DATABASE_ERRORS as exc:  # the session fails with the reason; serving goes on
            raise session_failure(line, exc) from exc
        finally:
            if store in self._callers:  # a session dialed to us: what it left is not known
                self._inbound_ended(store, None, ok=ok)

    async def _witness_state(
        self, store: Store, line: str, entries: NotarizedEntrySet | None = None
    ) -> list[bytes]:
        """One state statement after a session that admitted new entries (none otherwise):
        in its closing round (given ``entries``, decision 0059), else as it ends."""
        entries = self._admitting.pop(store, None) if entries is None else entries
        if entries is None or not entries.admitted or self.identity is None:
            return []
        if self.security.ephemeral:
            # A runner's statements would outlive it for nothing (the node it syncs with
            # witnesses what it wrote) and would grow the line by one per job.
            return []
        try:
            return [a.item for a in await attest_state(store, self.identity, line, self.clock)]
        except LifelineError as exc:  # the entries are stored; the next session signs
            log.warning("line %s: no state statement signed: %s", line, exc)
            return []

    def make_sets(
        self, store: Store, peer: SessionPeer | None = None, source: str | None = None
    ) -> Sequence[ReconSet]:
        """The sets of one session: attestations, statements (a first-wave peer never opens
        it), then entries. ``source``: the node we dialed (a caller: its certificate's)."""
        caller = peer_node_id(peer.identity) if peer is not None else None
        source = caller if peer is not None else source
        local = self.identity.node_id if self.identity else None
        signers = self.security.signers(self.home, local, caller)
        codec = EntryCodec(self.home.limits())
        notary: Notary
        if is_pg_store(store):  # a hub's line: the notary's PostgreSQL twin
            from lifeline_mesh.notary.pg_storage import PgNotaryStore

            notary = PgNotaryStore(store, signers=signers, clock=self.clock, source=source)
            entries = NotarizedEntrySet(EntrySet(store, codec, self.pg_snapshots), notary)
            cache = None  # the notary's sets: snapshots from the stored tokens
        else:
            # A line synced without its notary would take entries unchecked and never pass
            # on their signatures: a store without the notary's tables is refused, loudly.
            line = require_tables(store, NOTARY_COMPONENT, "a node syncing a line")
            notary = NotaryStore(line, signers=signers, clock=self.clock, source=source)
            entries = NotarizedEntrySet(EntrySet(line, codec, self.snapshots), notary)
            cache = self.snapshots
        self._admitting[store] = entries
        entries.on_close = lambda line: self._witness_state(store, line, entries)
        if peer is not None:  # a session dialed to us
            self._callers[store] = caller
            if self._peering is not None:
                self._peering.scheduler.inbound_started(caller)
        sets: list[ReconSet] = [
            AttestationSet(notary, cache),
            AttestationSet(notary.statements(), cache),
            entries,
        ]
        if peer is not None and not peer.can_write:
            sets = [ReceiveOnly(s, peer.why_not) for s in sets]
        return sets

    def _extend(self, server: grpc.aio.Server) -> None:
        if not self.security.insecure:  # membership on the sync port
            add_membership(server, self.home)

    async def _join_port(self) -> grpc.aio.Server | None:
        """A join port, a server of its own, where the CA key lives."""
        listen = self._join_listen
        if self.security.insecure or not listen or state_of(self.home).read(CA_KEY) is None:
            return None
        server, port = await start_join_server(self.home, listen)
        self.join_address = f"{listen.rpartition(':')[0]}:{port}"
        return server

    def _feed(self) -> ChangeFeed:
        # A hub's lines are announced without rows: its peers sync for them.
        rows = self.rows.read if self.store_url is None else None
        return ChangeFeed(lambda: self.config().shared_lines, rows)

    def server(self, join_listen: str | None = None) -> SyncServer:
        self._join_listen = join_listen
        # A fresh feed per server: stopping a server closes its feed for good.
        self.changes = self._feed()
        inbound = InboundLog(self.home)
        server = SyncServer(
            self.open_line,
            self.is_shared,
            self.make_sets,
            authorizer=self.security.authorizer,
            credentials=self.security.server_credentials,
            limits=self.limits,
            extend=self._extend,
            side=self._join_port,
            announcements=self.changes,
            on_session=m.inbound(inbound.record) if (m := self.metrics) else inbound.record,
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
                self.home,
                address,
                self.identity.node_id if self.identity else None,
                self.config().shared_lines,
                discovery=peering is not None and peering.discovery,
                interfaces=peering.interfaces if peering else (),
            )
            with recorded_node_state(self.home, state):
                async with AsyncExitStack() as feeds:
                    if self.store_url is not None:  # a hub: writes of every hub process
                        from lifeline_mesh.node.hub_feed import hub_feed

                        local = None if keeper is None else keeper.scheduler.local_change
                        dsn = (await self.database()).plain_dsn
                        await feeds.enter_async_context(hub_feed(dsn, self.changes, local))
                    if ready is not None:
                        ready(address)
                    if self.fast.helpers:  # ready before the first large batch arrives
                        offload.warm_up()
                    if keeper is None:
                        await stop.wait()
                    else:
                        await keeper.run_until(stop)
        finally:
            await server.stop()
        return server

    def peering(self, options: PeeringOptions, address: str) -> Peering:
        """Static peers, LAN discovery, the line watcher and the scheduler of this node."""
        home = self.home

        def shared_line_files() -> list[Path]:
            return [home.line_path(name) for name in self.config().shared_lines]

        def not_revoked(node_id: str) -> bool:
            return RevocationList.load(home).revoked_at(node_id) is None

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

    async def watch_peer(self, peer: PeerState) -> AsyncIterator[Heard]:
        """The Watch call to ``peer``: OPENED when it is accepted, then, for each change of
        a line shared here too whose rows were not taken, a change to sync for (DESIGN §8:
        a node that only dials out stays live; decision 0046: rows taken need no session)."""
        sends_rows = False
        async for change in watch_lines(
            str(peer.address),
            [],  # every line the peer shares with us; ours are checked per announcement
            credentials=self.security.channel_credentials,
            options=self.security.channel_options,
            items=True,
            serves_port=self.watch_back.serves_port(peer),
        ):
            if change.initial and change.node_id and self._peering is not None:
                self._peering.scheduler.learned(peer.key, change.node_id)
            if change.initial:
                sends_rows = change.sends_rows
                yield Heard.OPENED
                continue
            lines = set(change.lines) & set(self.config().shared_lines)
            rows = change.items
            if rows is not None and rows.line in lines and await self.take_rows(peer, rows):
                lines.discard(rows.line)
            if lines:
                # A peer that sends rows never dials us for its change: sync now.
                yield Heard.UNTAKEN if sends_rows else Heard.CHANGED

    async def take_rows(self, peer: PeerState, rows: ChangeItems) -> bool:
        """Admit the rows ``peer`` announced (``LiveRows.take``), when it is a lab node or
        the node our sessions found serving at its address, not revoked. False: sync with
        ``peer`` instead."""
        address = str(peer.address)
        source = self.pins.known.get(address, address)
        if not (self._may_take_from(peer) and await self.rows.take(source, rows)):
            return False
        if self._peering is not None:
            self._peering.took_rows(peer.key, rows.line, self.rows.taken_span(rows))
        return True

    def _may_take_from(self, peer: PeerState) -> bool:
        """Rows are taken from a lab node (no TLS), or from the node our sessions found
        serving at the peer's address (its certificate), while it is not revoked."""
        if self.security.insecure:
            return True
        return self.pins.trusted(str(peer.address))

    async def sync_peer(self, peer: PeerState) -> str:
        """One scheduled sync with ``peer``: every shared line; a one-line summary."""
        lines = self.config().shared_lines
        if not lines:
            return "nothing to sync: no line is shared (`lifeline-mesh share LINE`)"
        self.outbound["syncs"] += 1
        held: dict[str, int | None] = {}
        try:
            reports = await self.sync(str(peer.address), lines, held)
        except BaseException:
            self.outbound["failed"] += 1
            raise
        if self._peering is not None:
            marks = {line: mark for line, mark in held.items() if mark is not None}
            self._peering.scheduler.synced(peer.key, marks)
        return "; ".join(
            f"{r.line}: sent {r.entries_sent}, received {r.entries_received} "
            f"({r.entries_added} new), {r.bytes_sent}/{r.bytes_received} bytes out/in"
            for r in reports
        )

    async def sync(
        self, peer: str, lines: Sequence[str], held: dict[str, int | None] | None = None
    ) -> list[SyncReport]:
        """One session per line with ``peer``; every line must be shared here. ``held``
        gets, per line, the highest row the peer is known to hold after it (or None)."""
        for line in lines:
            if not self.is_shared(line):
                raise Refused(
                    f"line {line!r} is not shared on this node, so it is never sent or "
                    f"accepted; run `lifeline-mesh share {line}` first"
                )
        options = self.security.channel_options
        if not self.security.insecure:
            # Learn the members and revocations the peer knows: signers we must accept.
            await pull_membership(self.home, peer, logged=self.refused_rows)
            options = await self.pins.pin(peer)
        reports = []
        for line in lines:
            async with self.open_line(line) as store:
                sets = self.make_sets(store, None, self.pins.known.get(peer, peer))
                if self.security.role is MeshRole.READER:
                    sets = [SendNothing(s) for s in sets]
                try:
                    report = await sync_line(
                        peer,
                        line,
                        sets,
                        credentials=self.security.channel_credentials,
                        limits=self.limits,
                        extra_options=options,
                        fast=self.fast,
                    )
                except PeerError:
                    self.pins.forget(peer)
                    raise
                reports.append(report)
                if self.metrics is not None:
                    self.metrics.session(peer, line, "out", report)
            if held is not None:
                held[line] = self._held.pop(store, None)
        return reports
