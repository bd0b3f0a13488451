"""What a node tells whoever watches it (``serve --metrics-listen``: node/metrics.py).

The node calls an observer at the points it counts — an inbound session ended, an outbound
one ended, a scheduled sync of a peer, a refused call — without knowing what is done with
them; the metrics module, which reads the node back to build its gauges, implements it.
Kept apart so that the node and its metrics do not import each other (decision 0075).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from lifeline.errors import LifelineError
from lifeline_mesh.peering.table import PeerState
from lifeline_mesh.sync.driver import SyncReport
from lifeline_mesh.transport.authz import PeerIdentity

__all__ = ["NodeObserver", "OnSession", "SyncPeer"]

# One scheduled sync of every shared line with a peer: a summary of what it did.
SyncPeer = Callable[[PeerState], Awaitable[str]]
# An inbound session ended: the caller, the line, its report (None: failed), the error.
OnSession = Callable[[PeerIdentity, str, SyncReport | None, str | None], None]


class NodeObserver(Protocol):
    def inbound(self, record: OnSession) -> OnSession:
        """``record`` (the inbound log), and each inbound session observed."""
        ...

    def session(self, peer: str, line: str, direction: str, report: SyncReport | None) -> None:
        """A session ended (``report`` None: it failed)."""
        ...

    def timed(self, sync_peer: SyncPeer) -> SyncPeer:
        """``sync_peer``, observed each time it runs."""
        ...

    def refused(self, what: str, exc: LifelineError) -> None:
        """A call refused before any session began."""
        ...
