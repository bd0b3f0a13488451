"""The gRPC peer: accepts sync sessions, one stream per session (grpc.aio).

Before a session it reads the Hello (within ``HELLO_TIMEOUT_S``; at most
``MAX_WAITING_HELLOS`` streams wait for theirs at once), asks the authorizer whether the
caller may read at all, then checks the line is shared — so a caller that may not read
hears the same refusal whether the line exists or not — then counts the session against
``MAX_SESSIONS`` and ``MAX_SESSIONS_PER_CALLER`` (``transport/call_caps.py``), opens the
line's store *for this session* (so writes by other processes are seen) and runs the
responder. A failing session ends only itself: its reason goes to the peer and, bounded,
to the server's failures and the log (``transport/refusals.py``; docs/security.md,
"Unauthenticated network peer" and "What an admitted caller can hold").
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import grpc

from lifeline.errors import Busy, LifelineError, PeerError, RemoteProtocolError
from lifeline_mesh.recon.frames import EndOfTurn, Hello
from lifeline_mesh.recon.session import Role, Session, SessionLimits
from lifeline_mesh.sync.driver import IDLE_TIMEOUT, SyncReport, drive
from lifeline_mesh.sync.fast import FAST, FastPaths
from lifeline_mesh.sync.outcome import refusal_warnings
from lifeline_mesh.sync.port import ReconSet, running
from lifeline_mesh.transport.addresses import check_bindable, require_loopback
from lifeline_mesh.transport.announce import Announcements, WatchService
from lifeline_mesh.transport.authz import (
    Access,
    AllowAll,
    Authorizer,
    OwnUserOnly,
    PeerIdentity,
    SessionPeer,
    identity_of,
)
from lifeline_mesh.transport.call_caps import (
    MAX_SESSIONS_PER_CALLER,
    CallGate,
    caller_key,
    connection_options,
    sessions_for_this_process,
)
from lifeline_mesh.transport.channels import (
    HANDSHAKE_TIMEOUT_S,
    METHOD,
    ServerChannel,
    flow_options,
    grpc_options,
    server_ping_options,
)
from lifeline_mesh.transport.errors import BUSY, status_for
from lifeline_mesh.transport.refusals import (
    FailureRing,
    QuietLog,
    cut,
    not_shared,
    peer_host,
)

__all__ = [
    "HELLO_TIMEOUT_S",
    "MAX_WAITING_HELLOS",
    "MAX_WAITING_HELLOS_PER_CALLER",
    "LineSessionSets",
    "SessionOpener",
    "SyncServer",
]

log = logging.getLogger(__name__)

# A stream must open with its hello as a session goes on: within the idle timeout.
HELLO_TIMEOUT_S = IDLE_TIMEOUT
# Streams waiting for their hello at once; more are refused at once (each costs the server
# its stream state until the hello or the timeout).
MAX_WAITING_HELLOS = 256
# ... and from one caller (its certificate): a revoked node or a reader, whose streams are
# refused only once their hello arrives, held all 256 and every member's sync got Busy.
MAX_WAITING_HELLOS_PER_CALLER = 8


class LineSessionSets(Protocol):
    """One session on a line, as the node opened it: the sets it reconciles."""

    @property
    def sets(self) -> Sequence[ReconSet]: ...


# (line, the authorized caller) -> async context manager: the session's sets while it runs
SessionOpener = Callable[[str, SessionPeer], AbstractAsyncContextManager[LineSessionSets]]
# (caller, line, report or None, error or None) after each admitted session
SessionHook = Callable[[PeerIdentity, str, SyncReport | None, str | None], None]


class SyncServer:
    def __init__(
        self,
        open_session: SessionOpener,
        is_shared: Callable[[str], bool],
        *,
        authorizer: Authorizer | None = None,
        credentials: grpc.ServerCredentials | None = None,
        limits: SessionLimits | None = None,
        extend: Callable[[grpc.aio.Server], None] | None = None,
        side: Callable[[], Awaitable[grpc.aio.Server | None]] | None = None,
        announcements: Announcements | None = None,
        on_session: SessionHook | None = None,
        fast: FastPaths = FAST,
        node_id: str | None = None,
    ) -> None:
        self._open_session = open_session
        self._fast = fast
        self._is_shared = is_shared
        self._authorizer = authorizer or AllowAll()
        self._credentials = credentials
        self.limits = limits or SessionLimits()
        self._extend = extend  # adds other services / ports (membership) before start
        self._server: grpc.aio.Server | None = None
        # A server of its own started with this one (the join port), stopped with it
        self._side = side
        self._side_server: grpc.aio.Server | None = None
        # The Watch RPC, when this node announces its changes (docs/protocol.md, "Watch")
        self._announcements = announcements
        self.watch = (
            None
            if announcements is None
            else WatchService(announcements, is_shared, self._authorizer, node_id=node_id)
        )
        self.reports: list[SyncReport] = []
        # The last reasons of refused or failed sessions, cut; ``failures.total`` counts all.
        self.failures = FailureRing()
        # Told of each (what, error): the node's metrics count refusals by reason.
        self.on_failure: Callable[[str, LifelineError], None] | None = None
        self.quiet_log = QuietLog(log)
        self.hello_timeout = HELLO_TIMEOUT_S
        self.max_waiting_hellos = MAX_WAITING_HELLOS
        self.max_waiting_hellos_per_caller = MAX_WAITING_HELLOS_PER_CALLER
        self.waiting_hellos = 0
        self._waiting_by_caller: dict[str, int] = {}
        # Admitted sessions running now, in all and per caller (each holds its line open)
        self.sessions = CallGate(
            "sessions",
            sessions_for_this_process(),
            MAX_SESSIONS_PER_CALLER,
            ("MAX_SESSIONS", "MAX_SESSIONS_PER_CALLER"),
        )
        self._on_session = on_session  # told of each admitted session's caller and outcome

    async def start(self, listen: str) -> str:
        """Bind and start; returns the bound ``HOST:PORT`` (port 0 picks a free one)."""
        host, port = require_loopback(
            listen, tls=self._credentials is not None, what="listen address", listen=True
        )
        check_bindable(host, port, what="sync port")
        options = [
            *grpc_options(self.limits.max_frame_bytes),
            ("grpc.server_handshake_timeout_ms", int(HANDSHAKE_TIMEOUT_S * 1000)),
            *server_ping_options(),  # the callers' keepalive pings (decision 0085)
            *flow_options(),  # fixed windows, no bandwidth probes (decision 0101)
            ("grpc.so_reuseport", 0),  # a port one node serves is not shared with another
            *connection_options(),  # decision 0134
        ]
        server = grpc.aio.server(options=options)
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
        if isinstance(self._authorizer, OwnUserOnly):  # its callers' connections end here
            self._authorizer.serving(host, bound)
        if self._side is not None:
            try:
                self._side_server = await self._side()
            except BaseException:
                await self.stop(0)  # the join port failed: nothing is left half-started
                raise
        return f"[{host}]:{bound}" if ":" in host else f"{host}:{bound}"

    async def stop(self, grace: float = 5.0) -> None:
        if self._announcements is not None:
            self._announcements.close()  # open Watch calls end now, not after the grace
        if self._side_server is not None:
            await self._side_server.stop(grace)
            self._side_server = None
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
        key = caller_key(identity_of(context))
        mine = self._waiting_by_caller.get(key, 0)
        if self.waiting_hellos >= self.max_waiting_hellos:
            busy = Busy(
                f"{BUSY}{self.waiting_hellos} sessions are waiting for their hello (cap "
                "MAX_WAITING_HELLOS); try again in a moment"
            )
            await self._refuse(context, None, busy)
            return
        if mine >= self.max_waiting_hellos_per_caller:
            busy = Busy(
                f"{BUSY}{mine} sessions of this caller are waiting for their hello (cap "
                "MAX_WAITING_HELLOS_PER_CALLER); try again in a moment"
            )
            await self._refuse(context, None, busy)
            return
        # Counted until admitted or refused: the hello, and a refusal's drain, each bounded
        self.waiting_hellos += 1
        self._waiting_by_caller[key] = mine + 1
        hello = None
        try:
            hello = await self._hello(channel)
            peer = await self._admit(hello.line, context)
            self.sessions.enter(key)  # counted from here until the session ends
        except LifelineError as exc:
            await self._refuse(context, channel if isinstance(hello, Hello) else None, exc)
            return
        finally:
            self.waiting_hellos -= 1
            left = self._waiting_by_caller.pop(key) - 1
            if left:
                self._waiting_by_caller[key] = left
        channel.recheck = functools.partial(
            self._authorizer.authorize, peer.identity, hello.line, Access.READ
        )
        try:
            await self._run(hello, channel, context, peer)
        finally:
            self.sessions.leave(key)

    async def _hello(self, channel: ServerChannel) -> Hello:
        """The stream's first frame, a hello, within ``hello_timeout``."""
        try:
            async with asyncio.timeout(self.hello_timeout):
                hello = await channel.recv()
        except TimeoutError:
            raise RemoteProtocolError(
                f"no hello within {self.hello_timeout:g}s of the stream's start (cap "
                "HELLO_TIMEOUT_S); a session opens with its hello"
            ) from None
        if not isinstance(hello, Hello):
            raise RemoteProtocolError(
                f"the first frame must be a hello, got {type(hello).__name__}"
            )
        return hello

    async def _refuse(
        self,
        context: grpc.aio.ServicerContext[Any, Any],
        drain: ServerChannel | None,
        exc: LifelineError,
    ) -> None:
        """End a stream refused before its session: the reason, bounded, to the failures,
        the log and the caller — after reading its opening turn (``drain``), for no longer
        than ``hello_timeout``."""
        self._failed(context, "refused a session", exc)
        if drain is not None:
            await self._drain(drain)
        await context.abort(status_for(exc), cut(str(exc)))

    async def _drain(self, channel: ServerChannel) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.hello_timeout):
                await _drain_first_turn(channel)

    def _failed(
        self, context: grpc.aio.ServicerContext[Any, Any], what: str, exc: LifelineError
    ) -> None:
        self.failures.append(str(exc))
        if self.on_failure is not None:
            self.on_failure(what, exc)
        peer = context.peer() or "?"
        self.quiet_log.warning(peer_host(peer), "%s from %s: %s", what, peer, exc)

    async def _admit(self, line: str, context: grpc.aio.ServicerContext[Any, Any]) -> SessionPeer:
        """Read access is required; without write access the session only sends. Who may
        not read hears the same whether ``line`` is shared or not."""
        peer = identity_of(context)
        await self._authorizer.authenticate(peer)
        # A caller whose certificate names its lines is refused the others whether they
        # are shared or not (decision 0120); for the rest, reading is the role's.
        await self._authorizer.authorize(peer, line, Access.READ)
        if not self._is_shared(line):
            raise not_shared(line)
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
            async with self._open_session(hello.line, peer) as opened:
                sets = opened.sets
                # `now` on the same clock drive() uses (monotonic), or the session
                # timeout would count from the clock's epoch.
                session = Session(
                    Role.RESPONDER,
                    hello.line,
                    [(s.name, s.codec) for s in sets],
                    time.monotonic(),
                    self.limits,
                    runs=running(sets),
                )
                driving = True
                report = await drive(session, channel, sets, first=hello, fast=self._fast)
            self.reports.append(report)
            # items refused alone either way, the rest stored (decisions 0111, 0112)
            who = context.peer() or "?"
            for way, warning in refusal_warnings(report, who).items():
                self.quiet_log.warning(f"{peer_host(who)} {way}", "%s", warning)
            if self._on_session is not None:
                self._on_session(peer.identity, hello.line, report, None)
        except LifelineError as exc:
            # Once driving, the session told the peer (Abort frame); a line that could not
            # be opened (e.g. a hub's database is down) is refused with its reason here.
            # Either way the node keeps serving.
            self._failed(context, "failed a session", exc)
            if self._on_session is not None:
                self._on_session(peer.identity, hello.line, None, str(exc))
            if not driving:
                await self._drain(channel)
                await context.abort(status_for(exc), cut(str(exc)))


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
