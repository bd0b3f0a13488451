"""Bounded fan-out on a LAN: which of the discovered nodes this node keeps in touch with.

On a LAN every node discovers every other. Keeping a Watch call and a sync schedule with
each would cost every node N - 1 calls, and every write N - 1 deliveries per node — N² in
all (decision 0067). Instead, as gossip overlays do, each node places every node it knows
(itself included) on a ring ordered by ``sha256(node id)`` and keeps the nodes at ring
distances ``±1, ±4, ±11`` (:data:`FANOUT_OFFSETS`): at most six peers whatever N, chosen the
same way by both ends of each link (``b = a + k`` exactly when ``a = b - k``), so every link
is watched both ways and a change crosses it as rows over a Watch call. The ``±1`` links
alone make a ring, so the overlay is connected whenever the nodes agree on who is on the
LAN; the longer links keep its diameter small (3 hops at 30 nodes, 4 at 50). A change
reaches every node by relay: each node announces to its watchers the rows it took from
another (``LineWatcher.poke``), so a write costs each node O(1) work, not O(N).

Pure: no I/O, no clock. :class:`LanView` is what the node heard on the LAN; it says which
discovered nodes to add to the peer table and which to drop from it after each event.
Static peers are never subject to it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from lifeline_mesh.discovery.advert import PeerFound

__all__ = ["FANOUT_OFFSETS", "LanView", "neighbours"]

FANOUT_OFFSETS = (1, 4, 11)  # ring distances kept, each both ways: at most 6 peers


def _position(node_id: str) -> bytes:
    return hashlib.sha256(node_id.encode()).digest()


def neighbours(
    own: str, others: Iterable[str], offsets: tuple[int, ...] = FANOUT_OFFSETS
) -> set[str]:
    """The nodes ``own`` keeps among ``others``: those at ``±offsets`` on the ring of all of
    them (every one of them while they are few)."""
    ring = sorted({own, *others}, key=lambda n: (_position(n), n))
    size = len(ring)
    if size - 1 <= 2 * len(offsets):  # few enough to keep them all
        return set(ring) - {own}
    at = ring.index(own)
    chosen = {ring[(at + step * k) % size] for k in offsets for step in (1, -1)}
    chosen.discard(own)
    return chosen


@dataclass
class LanView:
    """The nodes heard on the LAN, and the subset kept as peers."""

    own: str
    offsets: tuple[int, ...] = FANOUT_OFFSETS
    heard: dict[str, PeerFound] = field(default_factory=dict)
    kept: set[str] = field(default_factory=set)

    def found(self, event: PeerFound) -> tuple[list[PeerFound], list[str]]:
        """A node announced itself: (nodes to add or re-announce, nodes to drop)."""
        self.heard[event.node_id] = event
        add, drop = self._reselect()
        if event.node_id in self.kept and event not in add:
            add.append(event)  # kept already: it announced itself again, try it now
        return add, drop

    def lost(self, node_id: str) -> tuple[list[PeerFound], list[str]]:
        """A node left the LAN: (nodes now kept in its place, nodes to drop)."""
        self.heard.pop(node_id, None)
        add, drop = self._reselect()
        if node_id not in drop:
            drop.append(node_id)
        return add, drop

    def _reselect(self) -> tuple[list[PeerFound], list[str]]:
        wanted = neighbours(self.own, self.heard, self.offsets) if self.heard else set()
        add = [self.heard[n] for n in sorted(wanted - self.kept)]
        drop = sorted(self.kept - wanted)
        self.kept = wanted
        return add, drop
