"""The authorization hook the server asks before a session (DESIGN §7).

The server builds a :class:`PeerIdentity` from the gRPC auth context (with mutual TLS the
membership layer reads the node id from the verified certificate) and asks the injected
:class:`Authorizer` for read and write access to the line. Until membership lands, the
default allows everyone: the transport then only listens on loopback.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["Access", "AllowAll", "Authorizer", "PeerIdentity", "SessionPeer"]


class Access(enum.Enum):
    READ = "read"  # receive the line's entries from us
    WRITE = "write"  # send us entries of the line


@dataclass(frozen=True, slots=True)
class PeerIdentity:
    """Who is calling: the transport address and the auth context properties."""

    address: str
    auth_context: dict[str, tuple[bytes, ...]] = field(default_factory=dict)

    @property
    def authenticated(self) -> bool:
        return bool(
            self.auth_context.get("x509_common_name")
            or self.auth_context.get("x509_subject_alternative_name")
        )


@dataclass(frozen=True, slots=True)
class SessionPeer:
    """The caller of one session, once authorized: who, and whether it may send us items."""

    identity: PeerIdentity
    can_write: bool = True
    why_not: str = ""  # the authorizer's reason when can_write is False


class Authorizer(Protocol):
    async def authorize(self, peer: PeerIdentity, line: str, access: Access) -> None:
        """Return to allow; raise :class:`~lifeline_mesh.transport.errors.Refused` to deny."""
        ...


class AllowAll:
    """Allows every peer: only acceptable on loopback without TLS."""

    async def authorize(self, peer: PeerIdentity, line: str, access: Access) -> None:
        return None
