"""The Watch call a node makes to a peer it follows (DESIGN §8; decisions 0046, 0083),
with the guard that keeps that link checked while it lasts (decision 0138)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from typing import TYPE_CHECKING

from lifeline.errors import LifelineError, NotAuthenticated
from lifeline_mesh.node.link_guard import LinkGuard
from lifeline_mesh.peering.table import PeerState
from lifeline_mesh.peering.watches import Heard
from lifeline_mesh.transport.announce import watch_lines

if TYPE_CHECKING:
    from lifeline_mesh.node.root import Node

__all__ = ["watch_peer"]


async def watch_peer(node: Node, peer: PeerState) -> AsyncIterator[Heard]:
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
