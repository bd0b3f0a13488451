"""The Watch RPC, both ends: a node that dialed a peer hears of the peer's changes at once.

Sync sessions are opened by the dialing side, so a node that can only dial out (a CI runner
behind NAT, a laptop on hotel Wi-Fi) would learn of its peer's new entries only at its next
periodic sync. With Watch it keeps one server-streaming call open to each peer it dials;
the peer announces each change of a shared line the caller may read, and the caller runs a
sync session at once (docs/protocol.md, "Watch"). The call carries announcements only —
never entries — so it needs no more trust than a session: read access, checked per line at
every announcement (an unshared line or a revoked caller hears nothing more).

A heartbeat (an empty announcement) every ``WATCH_HEARTBEAT_S`` keeps NAT mappings open
and lets the caller notice a dead peer (no message for ``WATCH_IDLE_S``) and dial again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import grpc

from lifeline.errors import LifelineError, PeerError, Refused
from lifeline_mesh.transport.authz import Access, Authorizer, PeerIdentity, identity_of
from lifeline_mesh.transport.channels import open_channel
from lifeline_mesh.transport.errors import error_from_rpc, status_for
from lifeline_mesh.wire import sync_pb2 as pb

__all__ = [
    "WATCH_HEARTBEAT_S",
    "WATCH_IDLE_S",
    "WATCH_METHOD",
    "Announcements",
    "LineChange",
    "WatchService",
    "watch_lines",
]

log = logging.getLogger(__name__)

WATCH_METHOD = "/lifeline_mesh.v1.Mesh/Watch"
WATCH_HEARTBEAT_S = 20.0  # below common NAT idle timeouts (30 s for some UDP/TCP tables)
WATCH_IDLE_S = 3 * WATCH_HEARTBEAT_S


@dataclass(frozen=True, slots=True)
class LineChange:
    """An announcement: these lines changed (``initial``: the call was just accepted;
    ``node_id``: on the initial one, the announcing node's id when it has one)."""

    lines: tuple[str, ...]
    initial: bool = False
    node_id: str | None = None


class Subscription(Protocol):
    async def next(self, timeout: float | None = None) -> set[str] | None: ...


class Announcements(Protocol):
    """Where the server learns of its lines' changes (``peering.changes.ChangeFeed``)."""

    def shared_lines(self) -> Sequence[str]: ...

    def subscribe(self) -> AbstractContextManager[Subscription]: ...

    def close(self) -> None:
        """End every subscription (the server is stopping)."""


class WatchService:
    """The server end: one async generator per Watch call."""

    def __init__(
        self,
        announcements: Announcements,
        is_shared: Callable[[str], bool],
        authorizer: Authorizer,
        heartbeat: float = WATCH_HEARTBEAT_S,
        node_id: str | None = None,
    ) -> None:
        self._announcements = announcements
        self._node_id = node_id
        self._is_shared = is_shared
        self._authorizer = authorizer
        self._heartbeat = heartbeat
        self.calls = 0  # calls accepted so far (tests, status)

    def handler(self) -> grpc.RpcMethodHandler[Any, Any]:
        return grpc.unary_stream_rpc_method_handler(
            self.watch,
            request_deserializer=pb.WatchRequest.FromString,
            response_serializer=pb.LineChange.SerializeToString,
        )

    async def watch(
        self, request: pb.WatchRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[pb.LineChange]:
        peer = identity_of(context)
        wanted = frozenset(request.lines)
        with self._announcements.subscribe() as sub:
            try:
                first = await self._readable(peer, wanted, self._announcements.shared_lines())
                if wanted and not first:
                    raise Refused(
                        f"none of the lines {sorted(wanted)} is shared here and readable by "
                        "the caller; nothing to announce"
                    )
            except LifelineError as exc:
                log.info("refused a watch from %s: %s", context.peer(), exc)
                await context.abort(status_for(exc), str(exc))
                return
            self.calls += 1
            yield pb.LineChange(lines=sorted(first), initial=True, node_id=self._node_id or "")
            while (changed := await sub.next(self._heartbeat)) is not None:
                lines = await self._readable(peer, wanted, changed) if changed else []
                if lines or not changed:  # an announcement, or a heartbeat
                    yield pb.LineChange(lines=sorted(lines))

    async def _readable(
        self, peer: PeerIdentity, wanted: frozenset[str], lines: Iterable[str]
    ) -> list[str]:
        """The lines among ``lines`` that are shared now and that the caller may read."""
        out = []
        for line in lines:
            if (wanted and line not in wanted) or not self._is_shared(line):
                continue
            try:
                await self._authorizer.authorize(peer, line, Access.READ)
            except PeerError:
                continue  # not for this caller (or no longer): it hears nothing of it
            out.append(line)
        return out


async def watch_lines(
    target: str,
    lines: Sequence[str],
    *,
    credentials: grpc.ChannelCredentials | None = None,
    options: Sequence[tuple[str, Any]] = (),
    idle: float = WATCH_IDLE_S,
) -> AsyncIterator[LineChange]:
    """Watch ``lines`` (empty: every shared line we may read) at ``target`` until the call
    ends; yields each announcement (heartbeats are not yielded). Raises our errors: a
    PeerError when the peer is unreachable, silent for ``idle`` seconds, or too old to
    announce (UNIMPLEMENTED)."""
    async with open_channel(target, credentials, options) as channel:
        call = channel.unary_stream(
            WATCH_METHOD,
            request_serializer=pb.WatchRequest.SerializeToString,
            response_deserializer=pb.LineChange.FromString,
        )(pb.WatchRequest(lines=list(lines)))
        try:
            while True:
                async with asyncio.timeout(idle):
                    msg = await call.read()
                if msg is grpc.aio.EOF:
                    return  # the peer is stopping: the caller dials again later
                if msg.lines or msg.initial:
                    yield LineChange(tuple(msg.lines), msg.initial, msg.node_id or None)
        except grpc.aio.AioRpcError as exc:
            raise error_from_rpc(exc, target) from exc
        except TimeoutError:
            raise PeerError(f"peer {target} sent nothing on the watch for {idle:.0f}s") from None
        finally:
            call.cancel()
