"""Watching back: every link of the mesh carries changes both ways as rows (decision 0066).

A node that dials a peer keeps a Watch call open to it, and the peer announces its changes
over that call with their rows. Changes going the other way used to cost a sync session
each (the dialled peer had no call to the caller). Now the caller says in its Watch request
on which port it serves at the address it dials from (0 when it cannot be dialled: it
listens on loopback, as a CI runner may); the peer keeps it as a peer while its call is
open (``PeerSource.WATCHER``) and watches it back, so on a chain of ``--peer`` links, a tree
or a hub every change crosses every link as rows over a Watch call, and a relay costs no
session.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

from lifeline_mesh.node.security import peer_node_id
from lifeline_mesh.peering.service import Peering
from lifeline_mesh.peering.table import PeerAddress, PeerState
from lifeline_mesh.transport.addresses import is_loopback, split_address
from lifeline_mesh.transport.authz import PeerIdentity

__all__ = ["WatchBack"]


class WatchBack:
    """The node's side of watching back: what it tells the peers it watches, and what it
    does with the callers that watch it."""

    def __init__(self, peering: Callable[[], Peering | None]) -> None:
        self._peering = peering
        self.listening: str | None = None  # the address serve is bound to
        self._open: collections.Counter[str] = collections.Counter()  # open calls per node

    def serves_port(self, peer: PeerState) -> int:
        """The port ``peer`` can dial us back on, from where we dial it (0: it cannot)."""
        if self.listening is None:
            return 0
        host, port = split_address(self.listening)
        if is_loopback(host) and not is_loopback(peer.address.host):
            return 0
        return port

    def caller(self, caller: PeerIdentity, address: str, opened: bool) -> None:
        """A Watch call from a node that can be dialled back at ``address`` opened or
        ended: keep that node as a peer while it watches us, and watch it back."""
        node_id = peer_node_id(caller)
        peering = self._peering()
        if node_id is None or peering is None:
            return
        self._open[node_id] += 1 if opened else -1
        if opened:
            peering.scheduler.watched_by(node_id, PeerAddress.parse(address))
        elif self._open[node_id] <= 0:
            del self._open[node_id]
            peering.scheduler.unwatched(node_id)
