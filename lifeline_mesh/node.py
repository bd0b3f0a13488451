"""The node's composition root: wires lines, reconciled sets, server and client together.

Only this module knows every part. Stores are opened per session, so entries written by
other processes (``lifeline log``) are always seen; the config is re-read per session, so
``share``/``unshare`` take effect on a running server.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import grpc

from lifeline.lines import line_path, validate_line_name
from lifeline.store.port import Store
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.config import NodeConfig
from lifeline_mesh.identity import NodeIdentity, key_path
from lifeline_mesh.membership import RevocationList
from lifeline_mesh.peering import Peering, PeeringOptions
from lifeline_mesh.peers import PeerState
from lifeline_mesh.recon.session import SessionLimits
from lifeline_mesh.state import NodeState, local_mesh_id, recorded_node_state
from lifeline_mesh.sync.driver import SyncReport
from lifeline_mesh.sync.entry_set import EntrySet
from lifeline_mesh.sync.port import ReconSet
from lifeline_mesh.transport.addresses import split_address
from lifeline_mesh.transport.authz import Authorizer
from lifeline_mesh.transport.client import sync_line
from lifeline_mesh.transport.errors import Refused
from lifeline_mesh.transport.server import SyncServer

__all__ = ["Node"]


class Node:
    def __init__(
        self,
        root: Path,
        *,
        limits: SessionLimits | None = None,
        authorizer: Authorizer | None = None,
        server_credentials: grpc.ServerCredentials | None = None,
        channel_credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        self.root = root
        self.limits = limits or SessionLimits()
        self._authorizer = authorizer
        self._server_credentials = server_credentials
        self._channel_credentials = channel_credentials

    def config(self) -> NodeConfig:
        return NodeConfig.load(self.root)

    def is_shared(self, line: str) -> bool:
        return line in self.config().shared_lines

    @asynccontextmanager
    async def open_line(self, line: str) -> AsyncIterator[Store]:
        path = line_path(self.root, validate_line_name(line))
        path.parent.mkdir(parents=True, exist_ok=True)
        store = await SqliteStore.open(path)
        try:
            yield store
        finally:
            await store.close()

    @staticmethod
    def make_sets(store: Store) -> Sequence[ReconSet]:
        # The attestations set (notary) is appended here once it exists.
        return [EntrySet(store)]

    def server(self) -> SyncServer:
        return SyncServer(
            self.open_line,
            self.is_shared,
            self.make_sets,
            authorizer=self._authorizer,
            credentials=self._server_credentials,
            limits=self.limits,
        )

    async def serve(
        self,
        listen: str,
        stop: asyncio.Event,
        ready: Callable[[str], None] | None = None,
        peering: PeeringOptions | None = None,
    ) -> SyncServer:
        """Serve until ``stop`` is set, then stop gracefully. With ``peering``, also keep
        in sync with static and discovered peers on its own (DESIGN §8)."""
        server = self.server()
        address = await server.start(listen)
        try:
            with recorded_node_state(self.root, self._state(address, peering)):
                if ready is not None:
                    ready(address)
                if peering is None:
                    await stop.wait()
                else:
                    await self.peering(peering, address).run_until(stop)
        finally:
            await server.stop()
        return server

    def _node_id(self) -> str | None:
        path = key_path(self.root)
        return NodeIdentity.load(path).node_id if path.exists() else None

    def _state(self, address: str, peering: PeeringOptions | None) -> NodeState:
        mesh_id = local_mesh_id(self.root)
        discovery = peering is not None and peering.discovery and mesh_id is not None
        return NodeState(
            pid=os.getpid(),
            listen=address,
            started_at=time.time(),
            node_id=self._node_id(),
            mesh_id=mesh_id,
            discovery=discovery,
            interfaces=list(peering.interfaces) if peering and discovery else [],
            lines=self.config().shared_lines,
        )

    def peering(self, options: PeeringOptions, address: str) -> Peering:
        """Static peers, LAN discovery, the line watcher and the scheduler of this node."""
        root = self.root

        def shared_line_files() -> list[Path]:
            return [line_path(root, name) for name in self.config().shared_lines]

        def not_revoked(node_id: str) -> bool:
            return RevocationList.load(root).revoked_at(node_id) is None

        return Peering(
            root,
            options,
            self.sync_peer,
            node_id=self._node_id() or "",
            mesh_id=local_mesh_id(root),
            port=split_address(address)[1],
            line_files=shared_line_files,
            allow=not_revoked,
        )

    async def sync_peer(self, peer: PeerState) -> str:
        """One scheduled sync with ``peer``: every shared line; a one-line summary."""
        lines = self.config().shared_lines
        if not lines:
            return "nothing to sync: no line is shared (`lifeline-mesh share LINE`)"
        reports = await self.sync(str(peer.address), lines)
        return "; ".join(
            f"{r.line}: sent {r.entries_sent}, received {r.entries_received} "
            f"({r.entries_added} new)"
            for r in reports
        )

    async def sync(self, peer: str, lines: Sequence[str]) -> list[SyncReport]:
        """One session per line with ``peer``; every line must be shared here."""
        reports = []
        for line in lines:
            if not self.is_shared(line):
                raise Refused(
                    f"line {line!r} is not shared on this node, so it is never sent or "
                    f"accepted; run `lifeline-mesh share {line}` first"
                )
            async with self.open_line(line) as store:
                reports.append(
                    await sync_line(
                        peer,
                        line,
                        self.make_sets(store),
                        credentials=self._channel_credentials,
                        limits=self.limits,
                    )
                )
        return reports
