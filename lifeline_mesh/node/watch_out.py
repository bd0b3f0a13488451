"""The Watch call a node makes to a peer it follows (DESIGN §8; decisions 0046, 0083),
with the guard that keeps that link checked while it lasts (decision 0138)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import Protocol

import grpc

from lifeline.errors import LifelineError, NotAuthenticated
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.node.link_guard import LinkGuard
from lifeline_mesh.node.security import PeerPins, TransportSecurity
from lifeline_mesh.node.watch_back import WatchBack
from lifeline_mesh.peering.changes import ChangeFeed
from lifeline_mesh.peering.scheduler import SyncScheduler
from lifeline_mesh.peering.table import PeerState
from lifeline_mesh.peering.watches import Heard
from lifeline_mesh.transport.announce import ChangeItems, watch_lines
from lifeline_mesh.transport.pool import ChannelPool

__all__ = ["WatchingNode", "watch_peer"]


class WatchingNode(Protocol):
    """What of a node (``lifeline_mesh.node.root.Node``) its Watch calls use."""

    home: NodeHome
    pins: PeerPins
    channels: ChannelPool
    security: TransportSecurity
    watch_back: WatchBack
    changes: ChangeFeed

    @property
    def scheduler(self) -> SyncScheduler | None: ...
    def config(self) -> NodeConfig: ...
    def dial(self, peer: str) -> AbstractAsyncContextManager[grpc.aio.Channel]: ...
    async def pull_lists(self, peer: str, channel: grpc.aio.Channel | None = None) -> None: ...
    def node_at(self, peer: PeerState) -> str: ...
    async def take_rows(self, peer: PeerState, rows: ChangeItems) -> bool: ...


async def watch_peer(node: WatchingNode, peer: PeerState) -> AsyncIterator[Heard]:
    """The Watch call to ``peer``: OPENED when it is accepted, then, for each change of
    a line shared here too whose rows were not taken, a change to sync for (DESIGN §8:
    a node that only dials out stays live; decision 0046: rows taken need no session).
    When it ends, the peers watching us are asked for every tree's rows again: one
    of them may have reached us only over this call (decision 0083)."""
    sends_rows = opened = False
    address = str(peer.address)
    guard = LinkGuard(
        node.home, node.pins, node.channels, address, partial(node.pull_lists, address)
    )
    try:
        async with node.dial(address) as channel:
            if not node.security.insecure:
                guard.start(channel)  # revoked or expired meanwhile: cut (decision 0138)
            async for change in watch_lines(
                address,
                [],  # every line the peer shares with us; ours are checked per announcement
                items=True,
                serves_port=node.watch_back.serves_port(peer),
                channel=channel,
            ):
                if change.initial and change.node_id and node.scheduler is not None:
                    node.scheduler.learned(peer.key, change.node_id)
                if change.initial:
                    sends_rows, opened = change.sends_rows, True
                    yield Heard.OPENED
                    continue
                if change.prune or change.graft:
                    node.changes.pruned(node.node_at(peer), change.prune, change.graft)
                lines = set(change.lines) & set(node.config().shared_lines)
                rows = change.items
                if rows is not None and rows.line in lines and await node.take_rows(peer, rows):
                    lines.discard(rows.line)
                if lines:
                    # A peer that sends rows never dials us for its change: sync now.
                    yield Heard.UNTAKEN if sends_rows else Heard.CHANGED
    except NotAuthenticated:  # another node may serve there now: ask again
        node.pins.forget(address)
        raise
    except LifelineError as exc:
        guard.raise_if_cut(exc)  # the guard cut it: say why
        raise
    else:
        guard.raise_if_cut()  # ended as the peer stops a call: the guard cut it
    finally:
        guard.stop()
        if opened:
            node.changes.graft()
