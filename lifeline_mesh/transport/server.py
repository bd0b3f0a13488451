"""The gRPC peer: accepts sync sessions, one stream per session (grpc.aio).

Before a session it reads the Hello, checks the line is shared, asks the authorizer, then
opens the line's store *for this session* (so writes by other processes are seen) and runs
the responder. A failing session ends only itself: its reason goes to the peer and the log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import grpc

from lifeline.errors import LifelineError, PeerError, RemoteProtocolError
from lifeline.store.port import Store
from lifeline_mesh.recon.frames import EndOfTurn, Hello
from lifeline_mesh.recon.session import Role, Session, SessionLimits
from lifeline_mesh.sync.driver import SyncReport, drive
from lifeline_mesh.sync.fast import FAST, FastPaths
from lifeline_mesh.sync.port import ReconSet
from lifeline_mesh.transport.addresses import require_loopback
from lifeline_mesh.transport.announce import Announcements, WatchService
from lifeline_mesh.transport.authz import (
    Access,
    AllowAll,
    Authorizer,
    PeerIdentity,
    SessionPeer,
    identity_of,
)
from lifeline_mesh.transport.channels import METHOD, ServerChannel, grpc_options
from lifeline_mesh.transport.errors import Refused, status_for

__all__ = ["LineOpener", "SyncServer"]

log = logging.getLogger(__name__)

# (line) -> async context manager yielding the store of that line
LineOpener = Callable[[str], AbstractAsyncContextManager[Store]]
# (store, the authorized caller) -> the sets of this session
SetFactory = Callable[[Store, SessionPeer], Sequence[ReconSet]]
# (caller, line, report or None, error or None) after each admitted session
SessionHook = Callable[[PeerIdentity, str, SyncReport | None, str | None], None]


class SyncServer:
    def __init__(
        self,
        open_line: LineOpener,
        is_shared: Callable[[str], bool],
        make_sets: SetFactory,
        *,
        authorizer: Authorizer | None = None,
        credentials: grpc.ServerCredentials | None = None,
        limits: SessionLimits | None = None,
        extend: Callable[[grpc.aio.Server], None] | None = None,
        announcements: Announcements | None = None,
        on_session: SessionHook | None = None,
        fast: FastPaths = FAST,
        node_id: str | None = None,
    ) -> None:
        self._open_line = open_line
        self._fast = fast
        self._is_shared = is_shared
        self._make_sets = make_sets
        self._authorizer = authorizer or AllowAll()
        self._credentials = credentials
        self.limits = limits or SessionLimits()
        self._extend = extend  # adds other services / ports (membership) before start
        self._server: grpc.aio.Server | None = None
        # The Watch RPC, when this node announces its changes (docs/protocol.md, "Watch")
        self._announcements = announcements
        self.watch = (
            None
            if announcements is None
            else WatchService(announcements, is_shared, self._authorizer, node_id=node_id)
        )
        self.reports: list[SyncReport] = []
        self.failures: list[str] = []
        self._on_session = on_session  # told of each admitted session's caller and outcome

    async def start(self, listen: str) -> str:
        """Bind and start; returns the bound ``HOST:PORT`` (port 0 picks a free one)."""
        host, port = require_loopback(
            listen, tls=self._credentials is not None, what="listen address", listen=True
        )
        server = grpc.aio.server(options=grpc_options(self.limits.max_frame_bytes))
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
        service, method = METHOD.strip("/").split("/")
        handlers[method] = grpc.stream_stream_rpc_method_handler(self._handle)
        if self.watch is not None:
            handlers["Watch"] = self.watch.handler()
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))
        if self._extend is not None:
            self._extend(server)
        bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if self._credentials is None:
            bound = server.add_insecure_port(bind)
        else:
            bound = server.add_secure_port(bind, self._credentials)
        await server.start()
        self._server = server
        return f"[{host}]:{bound}" if ":" in host else f"{host}:{bound}"

    async def stop(self, grace: float = 5.0) -> None:
        if self._announcements is not None:
            self._announcements.close()  # open Watch calls end now, not after the grace
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None

    async def wait(self) -> None:
        if self._server is not None:
            await self._server.wait_for_termination()

    async def _handle(
        self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> None:
        channel = ServerChannel(context)
        hello = None
        try:
            hello = await channel.recv()
            if not isinstance(hello, Hello):
                raise RemoteProtocolError(
                    f"the first frame must be a hello, got {type(hello).__name__}"
                )
            peer = await self._admit(hello.line, context)
        except LifelineError as exc:
            self.failures.append(str(exc))
            log.warning("refused a session from %s: %s", context.peer(), exc)
            if isinstance(hello, Hello):
                await _drain_first_turn(channel)
            await context.abort(status_for(exc), str(exc))
            return
        await self._run(hello, channel, context, peer)

    async def _admit(self, line: str, context: grpc.aio.ServicerContext[Any, Any]) -> SessionPeer:
        """Read access is required; without write access the session only sends."""
        if not self._is_shared(line):
            raise Refused(
                f"line {line!r} is not shared on this node; its owner can run "
                f"`lifeline-mesh share {line}`"
            )
        peer = identity_of(context)
        await self._authorizer.authorize(peer, line, Access.READ)
        try:
            await self._authorizer.authorize(peer, line, Access.WRITE)
        except PeerError as exc:
            return SessionPeer(peer, can_write=False, why_not=str(exc))
        return SessionPeer(peer, can_write=True)

    async def _run(
        self,
        hello: Hello,
        channel: ServerChannel,
        context: grpc.aio.ServicerContext[Any, Any],
        peer: SessionPeer,
    ) -> None:
        driving = False
        try:
            async with self._open_line(hello.line) as store:
                sets = self._make_sets(store, peer)
                # `now` on the same clock drive() uses (monotonic), or the session
                # timeout would count from the clock's epoch.
                session = Session(
                    Role.RESPONDER,
                    hello.line,
                    [(s.name, s.codec) for s in sets],
                    time.monotonic(),
                    self.limits,
                )
                driving = True
                report = await drive(session, channel, sets, first=hello, fast=self._fast)
            self.reports.append(report)
            if self._on_session is not None:
                self._on_session(peer.identity, hello.line, report, None)
        except LifelineError as exc:
            # Once driving, the session told the peer (Abort frame); a line that could not
            # be opened (e.g. a hub's database is down) is refused with its reason here.
            # Either way the node keeps serving.
            self.failures.append(str(exc))
            log.warning("sync session from %s failed: %s", context.peer(), exc)
            if self._on_session is not None:
                self._on_session(peer.identity, hello.line, None, str(exc))
            if not driving:
                await _drain_first_turn(channel)
                await context.abort(status_for(exc), str(exc))


async def _drain_first_turn(channel: ServerChannel, limit: int = 64) -> None:
    """Read the rest of the initiator's opening turn before refusing it.

    The initiator sends hello, ranges and end-of-turn without waiting; refusing mid-write
    would surface on its side as a failed write instead of our status and reason.
    """
    try:
        for _ in range(limit):
            frame = await channel.recv()
            if frame is None or isinstance(frame, EndOfTurn):
                return
    except LifelineError:
        return
