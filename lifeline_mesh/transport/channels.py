"""How a node dials (:func:`open_channel`, the one gRPC channel set-up), and the frame
channels of a sync session over a grpc.aio stream, carrying raw serialized frames.

Every outgoing call — a sync session, a Watch, whoami, a membership pull, a join — opens
its channel here: TLS when it has credentials, plain text only to a loopback address.
The Sync method is registered without (de)serializers so that garbage bytes reach our
decoder (and become a clear RemoteProtocolError) instead of failing inside grpc, and so
that the byte counts are exactly the frames' payload.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc

from lifeline.errors import PeerError, PermissionDenied, RemoteProtocolError
from lifeline_mesh.recon.frames import Abort, Frame, abort_error
from lifeline_mesh.transport.addresses import require_loopback
from lifeline_mesh.transport.errors import CONNECT_TIMEOUT_S, error_from_rpc
from lifeline_mesh.transport.loopback_peer import listener_uids
from lifeline_mesh.wire.codec import decode_bytes, encode_bytes

__all__ = [
    "CONNECT_TIMEOUT_S",
    "FRAME_HEADROOM",
    "HANDSHAKE_TIMEOUT_S",
    "KEEPALIVE_S",
    "KEEPALIVE_TIMEOUT_S",
    "METHOD",
    "SERVER_MIN_PING_MS",
    "STREAM_WINDOW_BYTES",
    "ClientChannel",
    "ServerChannel",
    "flow_options",
    "grpc_options",
    "liveness_options",
    "open_channel",
    "refuse_other_users_server",
    "server_ping_options",
    "sized",
]

METHOD = "/lifeline_mesh.v1.Mesh/Sync"
# A connection to any of our servers must finish its TLS handshake within this (gRPC's
# default is 120 s): a caller that stalls it holds a socket, no more, and not for long.
HANDSHAKE_TIMEOUT_S = 10.0

# Link liveness (decision 0085). A call whose link went dead without a FIN (a partition, a
# laptop's Wi-Fi gone) is noticed by an HTTP/2 ping every KEEPALIVE_S that is not answered
# within KEEPALIVE_TIMEOUT_S (so within 15 s of the last packet), not after TCP's
# retransmission back-off (~13 s after a 20 s cut) or the Watch call's 60 s of silence.
# Our servers accept a ping a second (``server_ping_options``), gRPC's floor for a client's
# keepalive, a tenth of our interval. A peer from before decision 0085 keeps gRPC's default
# policy (no ping within 5 minutes of another, 2 strikes) and may end a quiet Watch call
# with GOAWAY "too_many_pings" now and then: the call is redialled.
KEEPALIVE_S = 10.0
KEEPALIVE_TIMEOUT_S = 5.0
# One connection attempt may take CONNECT_TIMEOUT_S (errors.py: the error for a handshake
# that got no answer in that time names it).
SERVER_MIN_PING_MS = 1000  # the shortest gap between a caller's pings a server accepts
# Flow control (decision 0101). By default gRPC sizes its HTTP/2 windows by probing each
# link's bandwidth-delay product: data that arrives is answered with window updates and a
# PING, whose ack the sender answers in turn. A Watch call carries an announcement every
# few tenths of a second, so nearly every one drew that exchange and its TCP ACKs: a fifth
# of the bytes a node received for a write at 30 nodes. Both ends instead offer fixed
# windows of this size on every stream: two frames at the default cap, ~20 MB/s on a
# 100 ms link (5 times what a session admits a second here), and a bound on what a member
# can have queued on a stream ahead of what its handler has read. Not smaller: a sender
# whose frame is over the cap learns RESOURCE_EXHAUSTED only when it could push the frame
# before the refusal reached it (up to about the cap plus a window; past that its stream
# is reset, INTERNAL), and with 1 MiB a frame of 2 MiB to the default cap was already past.
STREAM_WINDOW_BYTES = 2 << 20
FRAME_HEADROOM = 4096  # a message may exceed the frame cap by this (protobuf framing only)


def liveness_options() -> list[tuple[str, Any]]:
    """The client side of link liveness, for every channel :func:`open_channel` opens."""
    return [
        ("grpc.keepalive_time_ms", int(KEEPALIVE_S * 1000)),
        ("grpc.keepalive_timeout_ms", int(KEEPALIVE_TIMEOUT_S * 1000)),
        # Pings only while a call is open (a channel lives for its calls anyway), and with
        # no limit on pings between our own data frames: a Watch caller sends none after
        # its request, and gRPC's default (2) would stop the pings on exactly that call.
        ("grpc.keepalive_permit_without_calls", 0),
        ("grpc.http2.max_pings_without_data", 0),
        # gRPC names the shortest connection attempt "min_reconnect_backoff" (its
        # MIN_CONNECT_TIMEOUT); a channel's own redials stay within our Watch back-off.
        ("grpc.min_reconnect_backoff_ms", int(CONNECT_TIMEOUT_S * 1000)),
        ("grpc.initial_reconnect_backoff_ms", 1000),
        ("grpc.max_reconnect_backoff_ms", int(CONNECT_TIMEOUT_S * 1000)),
    ]


def flow_options() -> list[tuple[str, Any]]:
    """Fixed stream windows instead of bandwidth probing, on every channel and server."""
    return [("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", STREAM_WINDOW_BYTES)]


def server_ping_options() -> list[tuple[str, Any]]:
    """The server side: accept the callers' keepalive pings instead of ending their calls
    with GOAWAY "too_many_pings" (gRPC's default expects at most one every 5 minutes
    while the server sends no data, and a Watch call is quiet for 20 s at a time)."""
    return [
        ("grpc.http2.min_ping_interval_without_data_ms", SERVER_MIN_PING_MS),
        ("grpc.keepalive_permit_without_calls", 1),  # a ping racing a call's end is fine
    ]


_SIZES = ("grpc.max_receive_message_length", "grpc.max_send_message_length")


def grpc_options(max_frame_bytes: int) -> list[tuple[str, Any]]:
    # Explicit on both ends (DESIGN §5): a frame above the cap is refused by grpc itself.
    return sized((), max_frame_bytes + FRAME_HEADROOM)


def sized(options: Sequence[tuple[str, Any]], limit: int) -> list[tuple[str, Any]]:
    """``options`` with the largest message sent and received set to ``limit`` bytes
    (whatever sizes they named)."""
    return [*((name, limit) for name in _SIZES), *(o for o in options if o[0] not in _SIZES)]


def open_channel(
    target: str,
    credentials: grpc.ChannelCredentials | None,
    options: Sequence[tuple[str, Any]] = (),
) -> grpc.aio.Channel:
    """A channel to ``target`` (``HOST:PORT``): TLS with ``credentials``; without them
    plain text, refused (ConfigError) unless ``target`` is a loopback address. Every
    channel notices a dead link and fails a stalled connection attempt within seconds
    (:func:`liveness_options`) and keeps fixed windows (:func:`flow_options`); ``options``
    of the same name win."""
    host, port = require_loopback(target, tls=credentials is not None, what="peer address")
    if credentials is None:
        refuse_other_users_server(target, host, port)
    names = {name for name, _ in options}
    defaults = [*liveness_options(), *flow_options()]
    merged = [*options, *(o for o in defaults if o[0] not in names)]
    if credentials is None:
        return grpc.aio.insecure_channel(target, options=merged)
    return grpc.aio.secure_channel(target, credentials, options=merged)


def refuse_other_users_server(target: str, host: str, port: int) -> None:
    """Without TLS a node dials loopback only, where any user of the machine may listen: a
    port served by another user is refused before anything is sent to it (decision 0146),
    as the channel opens. Where the socket tables cannot be read (not Linux), nothing is
    checked."""
    if not hasattr(os, "geteuid"):
        return
    owners = listener_uids(host, port)
    others = sorted(uid for uid in owners or () if uid not in (os.geteuid(), 0))
    if others:
        raise PermissionDenied(
            f"{target} is served by another user of this machine (uid {others[0]}): "
            "without TLS (--insecure) a node syncs only with its own user's nodes; dial the "
            "port your own node serves, or use mutual TLS"
        )


# How often a session's caller is authorized again as its frames arrive (at most): a
# certificate that expires or a node revoked mid-session is refused at its next frame.
RECHECK_S = 1.0


class ServerChannel:
    def __init__(self, context: grpc.aio.ServicerContext[bytes, bytes]) -> None:
        self._context = context
        self.bytes_sent = 0
        self.bytes_received = 0
        # Set once the session is admitted: authorizes its caller again, raising Refused
        # (NotAuthenticated, PermissionDenied) when it no longer may (decision 0131).
        self.recheck: Callable[[], Awaitable[None]] | None = None
        self._checked = time.monotonic()

    async def send(self, frame: Frame) -> None:
        data = encode_bytes(frame)
        self.bytes_sent += len(data)
        await self._context.write(data)

    async def recv(self) -> Frame | None:
        data = await self._context.read()
        if data is grpc.aio.EOF:
            return None
        self.bytes_received += len(data)
        if self.recheck is not None and time.monotonic() - self._checked >= RECHECK_S:
            await self.recheck()  # before the frame is parsed or taken
            self._checked = time.monotonic()
        return decode_bytes(data)


class ClientChannel:
    def __init__(
        self,
        call: grpc.aio.StreamStreamCall[bytes, bytes],
        target: str,
        max_bytes: int | None = None,
    ) -> None:
        self._call = call
        self._target = target
        # On a channel shared with other calls (a larger receive limit than a frame's),
        # the frame cap is ours to enforce.
        self._max_bytes = max_bytes
        self.bytes_sent = 0
        self.bytes_received = 0

    async def send(self, frame: Frame) -> None:
        await self.send_raw(encode_bytes(frame))

    async def send_raw(self, data: bytes) -> None:
        self.bytes_sent += len(data)
        try:
            await self._call.write(data)
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError) as exc:
            # A write after the peer ended the call fails with a generic error; the peer's
            # real reason is an Abort frame already received, or the call's final status.
            await self._raise_reason()
            raise PeerError(f"peer {self._target} ended the call early ({exc})") from exc

    async def _raise_reason(self) -> None:
        try:
            while (data := await self._call.read()) is not grpc.aio.EOF:
                frame = decode_bytes(data)
                if isinstance(frame, Abort):
                    raise abort_error(frame)
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
            pass
        await self._raise_status()

    async def recv(self) -> Frame | None:
        try:
            data = await self._call.read()
        except grpc.aio.AioRpcError as exc:
            raise error_from_rpc(exc, self._target, started=self.bytes_received > 0) from exc
        if data is grpc.aio.EOF:
            await self._raise_status()
            return None
        if self._max_bytes is not None and len(data) > self._max_bytes:
            self._call.cancel()
            raise RemoteProtocolError(
                f"peer {self._target} sent a frame of {len(data)} bytes, above the "
                f"{self._max_bytes}-byte limit: the session was ended"
            )
        self.bytes_received += len(data)
        return decode_bytes(data)

    async def _raise_status(self) -> None:
        code = await self._call.code()
        if code is not grpc.StatusCode.OK:
            details = await self._call.details()
            raise error_from_rpc(
                grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details),
                self._target,
                started=self.bytes_received > 0,
            )

    async def close(self) -> None:
        """Half-close our side and wait for the peer to end the call."""
        try:
            await self._call.done_writing()
            while await self._call.read() is not grpc.aio.EOF:
                pass
        except grpc.aio.AioRpcError as exc:
            raise error_from_rpc(exc, self._target, started=self.bytes_received > 0) from exc
