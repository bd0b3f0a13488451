"""A link this node dialed stays checked while it lasts (decision 0138).

The membership lists (who is a member, who is revoked) were asked of a peer only before a
session this node started. Since rows travel over Watch calls (decision 0046), a steady
mesh starts a session on a link every few minutes (``LIVE_PERIOD_S``): a member went on
sending its writes to a node the CA had revoked for that long, over the Watch call that
node held on it, because it had not heard of the revocation yet (measured: still after
75 s). And the certificate the dialed node served with was checked once, in the TLS
handshake of a connection that may last for days.

While a Watch call to a peer is open, :class:`LinkGuard` asks the peer for its lists
every ``LISTS_EVERY_S`` on the same channel (a digest when nothing changed: one small
call), then checks the node serving at the address against what is known now, from any
peer: revoked, or its certificate expired, and the link is cut: the channel is closed
(the Watch call and every session on it end), and the next dial is refused by the pin
(:class:`~lifeline_mesh.node.security.PeerPins`), or by the TLS handshake.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable

import grpc

from lifeline.errors import LifelineError, PermissionDenied
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership import RevocationList
from lifeline_mesh.node.security import PeerPins
from lifeline_mesh.transport.pool import ChannelPool

__all__ = ["LISTS_EVERY_S", "LinkGuard"]

LISTS_EVERY_S = 10.0  # a revocation reaches a linked member within about this long

_log = logging.getLogger("lifeline_mesh.node")


class LinkGuard:
    """Checks the link to ``address`` from :meth:`start` until :meth:`stop`, or until the
    node serving there may no longer be talked to: then the link is cut and
    :attr:`reason` says why (:meth:`raise_if_cut`)."""

    def __init__(
        self,
        home: NodeHome,
        pins: PeerPins,
        channels: ChannelPool,
        address: str,
        pull: Callable[[grpc.aio.Channel], Awaitable[object]],
        *,
        every: float = LISTS_EVERY_S,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.home, self.pins, self.channels, self.address = home, pins, channels, address
        self._pull, self._every, self._clock = pull, every, clock
        self.reason: str | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self, channel: grpc.aio.Channel) -> None:
        self._task = asyncio.create_task(self._run(channel), name=f"link {self.address}")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def raise_if_cut(self, cause: BaseException | None = None) -> None:
        if self.reason is not None:
            raise PermissionDenied(self.reason) from cause

    async def _run(self, channel: grpc.aio.Channel) -> None:
        while self.reason is None:
            await asyncio.sleep(self._every)
            # what another link told meanwhile first: a peer that stalls its answer does
            # not hold off the check of itself
            self.reason = self.refused()
            if self.reason is not None:
                break
            try:
                await self._pull(channel)
            except (LifelineError, OSError) as exc:  # a slow or busy peer: next time
                _log.debug("asking %s for the membership lists failed: %s", self.address, exc)
            except Exception:  # never the end of the guard: said, and asked again next time
                _log.warning(
                    "asking %s for the membership lists failed", self.address, exc_info=True
                )
            self.reason = self.refused()
        _log.warning("cut the link to %s: %s", self.address, self.reason)
        self.pins.forget(self.address)  # the next dial asks who serves there again
        await self.channels.cut(self.address)

    def refused(self) -> str | None:
        """Why the node pinned at the address may no longer be talked to, or None."""
        node_id = self.pins.known.get(self.address)
        if node_id is None:
            return None  # not pinned yet: the next dial checks it
        revoked = RevocationList.current(self.home).revoked_at(node_id)
        if revoked is not None:
            return (
                f"{self.address} is served by node {node_id}, revoked at {revoked}: nothing "
                "more is sent to it; drop the address from `serve --peer` and the node's config"
            )
        served = self.pins.served.get(node_id)
        expires = served.expires if served is not None else None
        if expires is not None and self._clock() >= expires:
            return (
                f"node {node_id} at {self.address} served with a certificate that expired at "
                f"{expires.isoformat(timespec='seconds').replace('+00:00', 'Z')}; it must "
                "renew it (`lifeline-mesh join` again) before it is synced with"
            )
        return None
