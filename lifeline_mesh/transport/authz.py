"""Who is calling, and the one authorization hook every service asks (DESIGN §7).

Each service (sync sessions, Watch, Membership) builds a :class:`PeerIdentity` from the
gRPC auth context with :func:`identity_of` and asks the node's :class:`Authorizer` for an
:class:`Access` to a line. With mutual TLS that is membership's authorizer, which reads the
caller's node id and :class:`MeshRole` from the certificate TLS verified
(``membership/authz.py``); a node without TLS credentials uses :class:`AllowAll` and may
listen and dial only on loopback (``transport/addresses.py``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc

from lifeline.errors import ConfigError

__all__ = [
    "ROLE_ACCESS",
    "Access",
    "AllowAll",
    "Authorizer",
    "MeshRole",
    "PeerIdentity",
    "SessionPeer",
    "identity_of",
]


class Access(enum.Enum):
    READ = "read"  # receive the line's entries from us
    WRITE = "write"  # send us entries of the line


class MeshRole(enum.StrEnum):
    """A node's role in its mesh, named in its certificate and the members list."""

    MEMBER = "member"  # reads and writes shared lines
    READER = "reader"  # only receives

    @classmethod
    def parse(cls, text: str, *, what: str = "role") -> MeshRole:
        try:
            return cls(text)
        except ValueError:
            names = ", ".join(r.value for r in cls)
            raise ConfigError(f"{what} {text!r} is not one of {names}") from None


# What each role may do; the one place that says it.
ROLE_ACCESS: dict[MeshRole, frozenset[Access]] = {
    MeshRole.MEMBER: frozenset({Access.READ, Access.WRITE}),
    MeshRole.READER: frozenset({Access.READ}),
}


@dataclass(frozen=True, slots=True)
class PeerIdentity:
    """Who is calling: the transport address and the auth context properties."""

    address: str
    auth_context: dict[str, tuple[bytes, ...]] = field(default_factory=dict)


def identity_of(context: grpc.aio.ServicerContext[Any, Any]) -> PeerIdentity:
    """Who is calling, from the gRPC auth context (the verified certificate under mTLS)."""
    auth = {key: tuple(values) for key, values in (context.auth_context() or {}).items()}
    return PeerIdentity(address=context.peer() or "", auth_context=auth)


@dataclass(frozen=True, slots=True)
class SessionPeer:
    """The caller of one session, once authorized: who, and whether it may send us items."""

    identity: PeerIdentity
    can_write: bool = True
    why_not: str = ""  # the authorizer's reason when can_write is False


class Authorizer(Protocol):
    async def authenticate(self, peer: PeerIdentity) -> None:
        """Return when the caller may call this node at all, whatever it asks for (a
        member of the mesh, not revoked); raise :class:`~lifeline.errors.Refused` (or a
        subclass) otherwise. Asked first, so a caller refused here learns nothing of the
        lines it names (docs/security.md, "Unauthenticated network peer")."""
        ...

    async def authorize(self, peer: PeerIdentity, line: str, access: Access) -> None:
        """Return to allow; raise :class:`~lifeline.errors.Refused` (or a subclass) to deny."""
        ...


class AllowAll:
    """Allows every peer: only for a node without TLS, which stays on loopback."""

    async def authenticate(self, peer: PeerIdentity) -> None:
        return None

    async def authorize(self, peer: PeerIdentity, line: str, access: Access) -> None:
        return None
