"""One table between our error tree and gRPC status codes, both directions (CONVENTIONS).

Every service of a node (sync sessions, Watch, Membership) aborts a refused call with
``status_for(exc)``, and every client (a session, a watch, whoami, a membership pull, a
join) turns an ``AioRpcError`` back into our error with ``error_from_rpc``: refused (not
authenticated, not allowed, no trust between the two certificates) is told apart from
unreachable. Errors found inside a running session travel as an ``Abort`` frame instead, so
the peer sees our exact reason.
"""

from __future__ import annotations

import grpc

from lifeline.errors import (
    Busy,
    ConfigError,
    InvalidEntry,
    LifelineError,
    LocalProtocolError,
    NotAuthenticated,
    NotFound,
    PeerError,
    PermissionDenied,
    Refused,
    RemoteProtocolError,
    StoreError,
)

__all__ = [
    "BUSY",
    "CONNECT_TIMEOUT_S",
    "STATUS_TABLE",
    "Refused",
    "error_from_rpc",
    "not_lifeline_mesh",
    "status_for",
]

# One connection attempt (TCP connect and TLS handshake) may take this long, not gRPC's
# 20 s: through a partition a SYN is retried after 1, 3, 7, 15 s, so a 20 s attempt that
# started before the links came back sits out up to 8 s of a healed link. A short attempt
# fails instead, and the caller dials again (the Watch calls within ``WATCH_BACKOFF``).
# Set on every channel by channels.py (``liveness_options``); here, as the error for a
# handshake that got no answer in that time names it.
CONNECT_TIMEOUT_S = 3.0

# How a Busy refusal's details begin (RESOURCE_EXHAUSTED is gRPC's own word for a message
# over a size cap too): ``busy: …``.
BUSY = "busy: "


# Most specific class first: the first match wins.
STATUS_TABLE: tuple[tuple[type[LifelineError], grpc.StatusCode], ...] = (
    (NotAuthenticated, grpc.StatusCode.UNAUTHENTICATED),
    (Refused, grpc.StatusCode.PERMISSION_DENIED),
    (Busy, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (PeerError, grpc.StatusCode.UNAVAILABLE),
    (RemoteProtocolError, grpc.StatusCode.INVALID_ARGUMENT),
    (InvalidEntry, grpc.StatusCode.INVALID_ARGUMENT),
    (LocalProtocolError, grpc.StatusCode.INTERNAL),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (StoreError, grpc.StatusCode.INTERNAL),
    (ConfigError, grpc.StatusCode.FAILED_PRECONDITION),
    (LifelineError, grpc.StatusCode.UNKNOWN),
)

_HANDSHAKE = ("handshake", "ssl", "certificate", "tls", "alert", "socket closed", "verification")
# What gRPC says when no TCP connection came up (the attempt's deadline passed, or nothing
# listens): the peer is unreachable, whatever the "handshaker" in the words suggests.
_NO_CONNECTION = ("tcp handshaker shutdown", "failed to connect to remote host")
# What gRPC says when the TCP connection came up but the TLS handshake had no answer before
# the attempt's deadline (a stopped or overloaded `serve`, a port that accepts and never
# writes): this end closed it. A peer that distrusts us says so at once instead, closing
# the socket ("Socket closed") or with a TLS alert (SSL_ERROR_SSL: …).
_NO_ANSWER = ("endpoint closing", "handshake timed out")
_PEER = {
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.UNIMPLEMENTED,
}


def status_for(exc: LifelineError) -> grpc.StatusCode:
    for cls, code in STATUS_TABLE:
        if isinstance(exc, cls):
            return code
    return grpc.StatusCode.UNKNOWN


# What gRPC says when the port answers, but not in HTTP/2 or TLS as a node would (e.g. an
# HTTP/1 server, or a plain-text server where TLS was expected).
_NOT_OURS = ("wrong_version_number", "failed parsing http/2", "expected settings frame")
# What gRPC's client says of a write the peer's end had already closed, before the peer's
# own status arrived: that status (a refusal, say) is lost with it.
_LOST_WRITE = "Internal error from Core"
# A session cut after it began: the peer went away, not a refusal.
_CUT = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN}


def not_lifeline_mesh(detail: str, target: str) -> PeerError | None:
    """A PeerError saying the port at ``target`` does not speak lifeline-mesh, when
    gRPC's ``detail`` says so; None otherwise."""
    if not any(marker in detail.lower() for marker in _NOT_OURS):
        return None
    return PeerError(
        f"{target} answers, but not as a lifeline-mesh node ({detail[:160]}); is that the "
        "right port? `lifeline-mesh status` on that machine shows where its node listens"
    )


def error_from_rpc(
    exc: grpc.aio.AioRpcError, target: str, *, started: bool = False
) -> LifelineError:
    """Our error for a failed call to ``target``, naming the status and the peer's words;
    ``started``: frames had arrived, so a lost connection is no refusal."""
    code = exc.code()
    detail = exc.details() or "no details"
    if started and code in _CUT:
        return PeerError(
            f"the connection to {target} was lost mid-session ({code.name.lower()}: "
            f"{detail[:160]}); what arrived was stored whole — run the sync again"
        )
    if code is grpc.StatusCode.INTERNAL and detail == _LOST_WRITE:
        return PeerError(
            f"peer {target} ended the call before it read what we sent, and its reason was "
            "lost on the way (it may be busy, restarting or refusing this node; its log says "
            "which); try again in a moment"
        )
    if code is grpc.StatusCode.UNAVAILABLE and (wrong := not_lifeline_mesh(detail, target)):
        return wrong
    if code is grpc.StatusCode.UNAUTHENTICATED:
        return NotAuthenticated(f"peer {target} refused us as not authenticated: {detail}")
    if code is grpc.StatusCode.PERMISSION_DENIED:
        return PermissionDenied(f"peer {target} refused us: {detail}")
    if code is grpc.StatusCode.UNAVAILABLE and any(n in detail.lower() for n in _NO_ANSWER):
        return _not_answering(target, detail)
    if (
        code is grpc.StatusCode.UNAVAILABLE
        and any(h in detail.lower() for h in _HANDSHAKE)
        and not any(n in detail.lower() for n in _NO_CONNECTION)
    ):
        # A node at its connection cap closes the socket as one that distrusts us does
        # (decision 0134): gRPC's words are the same, so both are named.
        full = (
            "; or it holds all the connections it takes (a flood from elsewhere): then "
            "try again in a minute"
            if "socket closed" in detail.lower()
            else ""
        )
        return NotAuthenticated(
            f"refused: {target} and this node do not trust each other (TLS handshake failed: "
            f"{_reason(detail)}) — not a member of this mesh, a certificate of another mesh, "
            f"or a revoked node; check `lifeline-mesh members` on both sides{full}"
        )
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED and detail.startswith(BUSY):
        return Busy(f"peer {target} is {detail}")
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        return RemoteProtocolError(
            f"peer {target}: a message was over a size limit ({detail}); "
            "lower max_frame_bytes or check the peer's limits"
        )
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return PeerError(f"peer {target} timed out ({detail}); is it overloaded or far away?")
    if code is grpc.StatusCode.UNAVAILABLE:
        return PeerError(
            f"peer {target} is unreachable (unavailable: {detail}); "
            "is `lifeline-mesh serve` running there?"
        )
    if code in _PEER:
        return PeerError(f"peer {target}: {code.name.lower()}: {detail}")
    return RemoteProtocolError(f"peer {target} failed the call ({code.name}): {detail}")


def _not_answering(target: str, detail: str) -> PeerError:
    return PeerError(
        f"peer {target} is not answering: it took the connection, but its TLS handshake did "
        f"not complete in {CONNECT_TIMEOUT_S:g} s ({_reason(detail)}); is `lifeline-mesh "
        "serve` running there (not stopped), and is it overloaded? Is that the right port?"
    )


def _reason(detail: str) -> str:
    """The informative tail of gRPC's handshake error (e.g. CERTIFICATE_VERIFY_FAILED ...)."""
    for marker in ("SSL_ERROR_SSL: ", "Tls handshake failed "):
        if marker in detail:
            tail = detail.split(marker, 1)[1]
            return tail.split(":", 2)[-1].strip(" :OK") if "error:" in tail else tail.strip()
    return detail.strip()
