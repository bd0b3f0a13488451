"""One table between our error tree and gRPC status codes, both directions (CONVENTIONS).

The server aborts a call with ``status_for(exc)``; the client turns an ``AioRpcError`` back
into a PeerError or RemoteProtocolError with ``error_from_rpc``. Errors found inside a
running session travel as an ``Abort`` frame instead, so the peer sees our exact reason.
"""

from __future__ import annotations

import grpc

from lifeline.errors import (
    ConfigError,
    InvalidEntry,
    LifelineError,
    LocalProtocolError,
    NotFound,
    PeerError,
    RemoteProtocolError,
    StoreError,
)

__all__ = ["STATUS_TABLE", "Refused", "error_from_rpc", "status_for"]


class Refused(PeerError):
    """The peer (or this node) refused the session: line not shared, or not authorized."""


# Most specific class first: the first match wins.
STATUS_TABLE: tuple[tuple[type[LifelineError], grpc.StatusCode], ...] = (
    (Refused, grpc.StatusCode.PERMISSION_DENIED),
    (PeerError, grpc.StatusCode.UNAVAILABLE),
    (RemoteProtocolError, grpc.StatusCode.INVALID_ARGUMENT),
    (InvalidEntry, grpc.StatusCode.INVALID_ARGUMENT),
    (LocalProtocolError, grpc.StatusCode.INTERNAL),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (StoreError, grpc.StatusCode.INTERNAL),
    (ConfigError, grpc.StatusCode.FAILED_PRECONDITION),
    (LifelineError, grpc.StatusCode.UNKNOWN),
)

_REFUSED = {grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED}
_PEER = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
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


def error_from_rpc(exc: grpc.aio.AioRpcError, target: str) -> LifelineError:
    """Our error for a failed call to ``target``, naming the status and the peer's words."""
    code = exc.code()
    detail = exc.details() or "no details"
    if code in _REFUSED:
        return Refused(f"peer {target} refused the session: {detail}")
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        return RemoteProtocolError(
            f"peer {target}: a message was over a size limit ({detail}); "
            "lower max_frame_bytes or check the peer's limits"
        )
    if code in _PEER:
        hint = "is `lifeline-mesh serve` running there?" if code.name == "UNAVAILABLE" else ""
        return PeerError(f"peer {target}: {code.name.lower()}: {detail} {hint}".rstrip())
    return RemoteProtocolError(f"peer {target} failed the session ({code.name}): {detail}")
