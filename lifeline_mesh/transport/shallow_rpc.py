"""The shallow join over gRPC (capability ``shallow``, decision 0063): the ``Shallow`` and
``Push`` calls of the Mesh service, server side and client side.

``Shallow``: a caller that may read a shared line receives its current truth in parts
(each under the frame cap), the last one carrying the head signed by this node. ``Push``:
a caller that may write sends what it wrote above the tips it took; the node admits it as
a session's items. Both calls are authorized as a session is (``Authorizer``: who may not
read hears the same refusal whether the line is shared or not). A peer from before the
capability answers UNIMPLEMENTED: :class:`NoShallow`, and the caller syncs in full.

Protobuf stays here; the node hands plain :class:`ShallowSnapshot` / :class:`PushedItems`
in and out (``node/shallow_serve.py``, ``node/shallow_join.py``). A snapshot is sent a part
at a time, each made from the node's kept snapshot as the one before it is sent: a call
stalled by its caller holds a part, not a copy (eight such calls of a line with 180 MB of
truth took a node from 178 MB to 1.74 GB). At most ``MAX_SHALLOW_CALLS`` calls run at
once, ``MAX_SHALLOW_CALLS_PER_CALLER`` from one caller (``transport/call_caps.py``); a
caller that goes away mid-call ends it quietly.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from lifeline.errors import Busy, LifelineError, PeerError, RemoteProtocolError
from lifeline_mesh.sync.driver import SyncReport
from lifeline_mesh.transport.authz import Access, Authorizer, PeerIdentity, SessionPeer, identity_of
from lifeline_mesh.transport.call_caps import (
    MAX_SHALLOW_CALLS,
    MAX_SHALLOW_CALLS_PER_CALLER,
    CallGate,
    caller_key,
)
from lifeline_mesh.transport.channels import open_channel
from lifeline_mesh.transport.errors import error_from_rpc, status_for
from lifeline_mesh.transport.refusals import QuietLog, cut, not_shared, peer_host
from lifeline_mesh.wire import sync_pb2 as pb

__all__ = [
    "MAX_SHALLOW_BYTES",
    "PUSH_METHOD",
    "SHALLOW_CAPABILITY",
    "SHALLOW_METHOD",
    "NoShallow",
    "PushedItems",
    "ShallowService",
    "ShallowSnapshot",
    "ShallowUnavailable",
    "fetch_shallow",
    "push_items",
]

log = logging.getLogger(__name__)

SHALLOW_CAPABILITY = "shallow"
SERVICE = "lifeline_mesh.v1.Mesh"
SHALLOW_METHOD = f"/{SERVICE}/Shallow"
PUSH_METHOD = f"/{SERVICE}/Push"
# The most a snapshot may weigh in all (a truth, not a history: a 1M-entry line's is a
# few MB); a peer sending more is refused, naming the cap.
MAX_SHALLOW_BYTES = 256 << 20
PART_BYTES = 1 << 20  # one part of a snapshot: under every node's frame cap
TIMEOUT_S = 120.0
# A call's caller, line and what it did (None and the reason when it was refused): the
# SyncServer's session hook, which the node's inbound log and metrics hang on
CallHook = Callable[[PeerIdentity, str, SyncReport | None, str | None], None]


class NoShallow(PeerError):
    """The peer does not serve shallow snapshots (a node from before decision 0063, or
    one that cannot serve this line shallow): the caller syncs in full."""


class ShallowUnavailable(LifelineError):
    """Raised by a node's snapshotter for a line it cannot serve shallow (a hub's, or one
    that is shallow itself): the caller hears UNIMPLEMENTED with the reason, and syncs in
    full."""


@dataclass(frozen=True, slots=True)
class ShallowSnapshot:
    attestations: tuple[bytes, ...]
    statements: tuple[bytes, ...]
    entries: tuple[bytes, ...]
    externals: tuple[tuple[bytes, str], ...]
    head: bytes
    signature: bytes
    public_key: bytes
    wire_bytes: int = 0  # bytes received (the client's count)


@dataclass(frozen=True, slots=True)
class PushedItems:
    line: str
    attestations: tuple[bytes, ...]
    entries: tuple[bytes, ...]
    externals: tuple[tuple[bytes, str], ...] = field(default=())


Snapshotter = Callable[[str, SessionPeer], Awaitable[ShallowSnapshot]]
Admitter = Callable[[SessionPeer, PushedItems], Awaitable[tuple[int, int]]]


class ShallowService:
    """The two calls on a node's sync port; ``snapshot`` and ``admit`` are the node's."""

    def __init__(
        self,
        authorizer: Authorizer,
        is_shared: Callable[[str], bool],
        snapshot: Snapshotter,
        admit: Admitter,
        on_session: CallHook | None = None,
    ) -> None:
        self._authorizer = authorizer
        self._is_shared = is_shared
        self._snapshot = snapshot
        self._admit = admit
        # told of each call as of a session (the node's inbound log and metrics): a CI
        # job's pull and push are most of what a CI runner costs its node
        self._on_session = on_session
        # told of every refusal, by what was refused (the metrics' refusals by reason)
        self.on_failure: Callable[[str, LifelineError], None] | None = None
        self.served = 0
        self.quiet_log = QuietLog(log)
        # Shallow and Push calls running now, in all and per caller
        self.calls = CallGate(
            "shallow calls",
            MAX_SHALLOW_CALLS,
            MAX_SHALLOW_CALLS_PER_CALLER,
            ("MAX_SHALLOW_CALLS", "MAX_SHALLOW_CALLS_PER_CALLER"),
        )
        self.cut_short = 0  # Shallow calls whose caller went away mid-way

    def add_to(self, server: grpc.aio.Server) -> None:
        handlers = {
            "Shallow": grpc.unary_stream_rpc_method_handler(
                self.shallow,
                request_deserializer=pb.ShallowRequest.FromString,
                response_serializer=pb.ShallowPart.SerializeToString,
            ),
            "Push": grpc.unary_unary_rpc_method_handler(
                self.push,
                request_deserializer=pb.PushRequest.FromString,
                response_serializer=pb.PushReply.SerializeToString,
            ),
        }
        # Consulted after the Sync/Watch handlers: a generic handler answers None for a
        # method it does not have, and gRPC asks the next one.
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))

    async def _caller(
        self, line: str, context: grpc.aio.ServicerContext[Any, Any], access: Access
    ) -> SessionPeer:
        peer = identity_of(context)
        await self._authorizer.authenticate(peer)
        await self._authorizer.authorize(peer, line, Access.READ)  # before: decision 0120
        if not self._is_shared(line):
            raise not_shared(line)
        if access is Access.WRITE:
            await self._authorizer.authorize(peer, line, Access.WRITE)
        return SessionPeer(peer, can_write=access is Access.WRITE)

    async def shallow(
        self, request: pb.ShallowRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        started = time.monotonic()
        peer: SessionPeer | None = None
        try:
            peer = await self._caller(request.line, context, Access.READ)
            key = caller_key(peer.identity)
            self.calls.enter(key)
        except LifelineError as exc:
            await self._refuse(context, request.line, "a shallow snapshot", exc, peer)
            return
        try:
            await self._send_snapshot(request, context, peer, started)
        finally:
            self.calls.leave(key)

    async def _send_snapshot(
        self,
        request: pb.ShallowRequest,
        context: grpc.aio.ServicerContext[Any, Any],
        peer: SessionPeer,
        started: float,
    ) -> None:
        try:
            snap = await self._snapshot(request.line, peer)
        except ShallowUnavailable as exc:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, cut(str(exc)))
            return
        except LifelineError as exc:
            await self._refuse(context, request.line, "a shallow snapshot", exc, peer)
            return
        self.served += 1
        sent = 0
        for part in _parts(snap):
            sent += part.ByteSize()
            if not await _write(context, part):
                self.cut_short += 1
                return
        report = SyncReport(request.line, "shallow", round_trips=1)
        report.entries_sent = len(snap.entries)
        report.signatures_sent = len(snap.attestations) + len(snap.statements)
        report.bytes_sent = sent
        report.bytes_received = request.ByteSize()
        self._tell(peer.identity, report, started)

    async def push(
        self, request: pb.PushRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.PushReply:
        started = time.monotonic()
        peer: SessionPeer | None = None
        try:
            peer = await self._caller(request.line, context, Access.WRITE)
            items = PushedItems(
                request.line,
                tuple(request.attestations),
                tuple(request.entries),
                tuple((e.id, e.line) for e in request.externals),
            )
            with self.calls.held(caller_key(peer.identity)):
                added, signed = await self._admit(peer, items)
        except LifelineError as exc:
            await self._refuse(context, request.line, "a push", exc, peer)
            raise AssertionError("unreachable: abort raises") from None
        reply = pb.PushReply(entries_added=added, attestations_added=signed)
        report = SyncReport(request.line, "push", entries_added=added, attestations_added=signed)
        report.entries_received = len(request.entries)
        report.signatures_received = len(request.attestations)
        report.bytes_received = request.ByteSize()
        report.bytes_sent = reply.ByteSize()
        report.round_trips = 1
        self._tell(peer.identity, report, started)
        return reply

    def _tell(self, caller: PeerIdentity, report: SyncReport, started: float) -> None:
        if self._on_session is not None:
            report.seconds = round(time.monotonic() - started, 4)
            self._on_session(caller, report.line, report, None)

    async def _refuse(
        self,
        context: grpc.aio.ServicerContext[Any, Any],
        line: str,
        what: str,
        exc: LifelineError,
        admitted: SessionPeer | None,
    ) -> None:
        caller = context.peer() or "?"
        self.quiet_log.warning(peer_host(caller), "refused %s from %s: %s", what, caller, exc)
        if self.on_failure is not None:
            self.on_failure(what, exc)
        # Told as a failed session only once the caller passed authorization and its call
        # ran, as the sync server does: a stranger's calls, or calls refused as too many at
        # once, must not fill the inbound log or the metrics.
        if admitted is not None and not isinstance(exc, Busy) and self._on_session is not None:
            self._on_session(admitted.identity, line, None, str(exc))
        await context.abort(status_for(exc), cut(str(exc)))


async def _write(context: grpc.aio.ServicerContext[Any, Any], part: pb.ShallowPart) -> bool:
    """Send one part; False when the caller went away (cancelled, or its connection lost).

    Written here rather than yielded: a failed send inside gRPC's own loop was logged as a
    12-line ExecuteBatchError traceback at ERROR for every call a caller cancelled. The call
    is then ended as aborted (its status cannot reach the caller), which gRPC ends quietly.
    """
    try:
        await context.write(part)
    except Exception:  # gRPC's internal error for a send on a call that has ended
        with contextlib.suppress(Exception):
            await context.abort(grpc.StatusCode.CANCELLED, "the caller went away")
        return False
    return True


def _parts(snap: ShallowSnapshot) -> Iterator[pb.ShallowPart]:
    """The snapshot in parts of about PART_BYTES, each made when the one before it was
    sent (a stalled caller holds one part); the last carries the signed head."""
    part = pb.ShallowPart()
    size = 0

    def room(n: int) -> pb.ShallowPart | None:
        """The part with room for ``n`` more bytes; the full one first, when it is full."""
        nonlocal part, size
        full = None
        if size + n > PART_BYTES and size:
            full, part, size = part, pb.ShallowPart(), 0
        size += n + 8
        return full

    for raw in snap.attestations:
        if full := room(len(raw)):
            yield full
        part.attestations.append(raw)
    for raw in snap.statements:
        if full := room(len(raw)):
            yield full
        part.statements.append(raw)
    for raw in snap.entries:
        if full := room(len(raw)):
            yield full
        part.entries.append(raw)
    for entry_id, line in snap.externals:
        if full := room(len(entry_id) + len(line)):
            yield full
        part.externals.append(pb.External(id=entry_id, line=line))
    if full := room(len(snap.head) + 128):
        yield full
    part.head, part.signature, part.public_key = snap.head, snap.signature, snap.public_key
    yield part


async def fetch_shallow(
    target: str,
    line: str,
    *,
    credentials: grpc.ChannelCredentials | None = None,
    options: Sequence[tuple[str, Any]] = (),
) -> ShallowSnapshot:
    """The shallow snapshot of ``line`` at ``target``, as received (nothing verified yet:
    the node checks it before storing anything). :class:`NoShallow` from an older peer."""
    atts: list[bytes] = []
    stmts: list[bytes] = []
    entries: list[bytes] = []
    externals: list[tuple[bytes, str]] = []
    head = signature = public_key = b""
    total = 0
    async with open_channel(target, credentials, options) as channel:
        call = channel.unary_stream(
            SHALLOW_METHOD,
            request_serializer=pb.ShallowRequest.SerializeToString,
            response_deserializer=pb.ShallowPart.FromString,
        )(pb.ShallowRequest(line=line), timeout=TIMEOUT_S)
        try:
            async for part in call:
                if head:
                    raise RemoteProtocolError(
                        f"peer {target} sent a part after the snapshot's head; a head ends it"
                    )
                total += part.ByteSize()
                if total > MAX_SHALLOW_BYTES:
                    raise RemoteProtocolError(
                        f"peer {target}'s shallow snapshot of {line!r} is over "
                        f"{MAX_SHALLOW_BYTES >> 20} MiB (cap MAX_SHALLOW_BYTES); sync in full"
                    )
                atts += part.attestations
                stmts += part.statements
                entries += part.entries
                externals += [(e.id, e.line) for e in part.externals]
                head, signature, public_key = part.head, part.signature, part.public_key
        except grpc.aio.AioRpcError as exc:
            if exc.code() is grpc.StatusCode.UNIMPLEMENTED:
                why = exc.details() or "a node from before capability `shallow`"
                raise NoShallow(f"peer {target} serves no shallow snapshot ({why})") from exc
            raise error_from_rpc(exc, target, started=total > 0) from exc
    if not head:
        raise RemoteProtocolError(
            f"peer {target}'s shallow snapshot of {line!r} ended without its signed head; "
            "nothing was stored — run the sync again"
        )
    return ShallowSnapshot(
        tuple(atts), tuple(stmts), tuple(entries), tuple(externals), head, signature,
        public_key, total,
    )  # fmt: skip


async def push_items(
    target: str,
    items: PushedItems,
    *,
    credentials: grpc.ChannelCredentials | None = None,
    options: Sequence[tuple[str, Any]] = (),
) -> tuple[int, int, int]:
    """Send ``items`` to ``target``; (entries added, attestations added, bytes sent)."""
    request = pb.PushRequest(
        line=items.line,
        attestations=list(items.attestations),
        entries=list(items.entries),
        externals=[pb.External(id=i, line=n) for i, n in items.externals],
    )
    async with open_channel(target, credentials, options) as channel:
        call = channel.unary_unary(
            PUSH_METHOD,
            request_serializer=pb.PushRequest.SerializeToString,
            response_deserializer=pb.PushReply.FromString,
        )
        try:
            reply = await call(request, timeout=TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            if exc.code() is grpc.StatusCode.UNIMPLEMENTED:
                raise NoShallow(f"peer {target} takes no push (capability `shallow`)") from exc
            raise error_from_rpc(exc, target) from exc
    return int(reply.entries_added), int(reply.attestations_added), request.ByteSize()
