"""Who is calling, and the one authorization hook every service asks (DESIGN §7).

Each service (sync sessions, Watch, Membership) builds a :class:`PeerIdentity` from the
gRPC auth context with :func:`identity_of` and asks the node's :class:`Authorizer` for an
:class:`Access` to a line. With mutual TLS that is membership's authorizer, which reads the
caller's node id and :class:`MeshRole` from the certificate TLS verified
(``membership/authz.py``); a node without TLS credentials (``--insecure``) may listen and
dial only on loopback (``transport/addresses.py``), and uses :class:`OwnUserOnly`: a
loopback port is open to every user of the machine, not only to the node's.
"""

from __future__ import annotations

import asyncio
import enum
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote

import grpc

from lifeline.errors import ConfigError, PermissionDenied
from lifeline_mesh.transport.loopback_peer import PROC_NET, loopback_hosts, loopback_peer_uid

__all__ = [
    "ROLE_ACCESS",
    "Access",
    "AllowAll",
    "Authorizer",
    "MeshRole",
    "OwnUserOnly",
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


class OwnUserOnly(AllowAll):
    """The authorizer of a node without TLS (``--insecure``, loopback only): a caller is let
    in only when it runs as the node's own user, or root (who reads the files anyway).
    Another user of the machine reaches every loopback port, and without TLS nothing else
    tells the callers apart; the kernel's table of TCP sockets names the owner of the
    caller's end (``transport/loopback_peer.py``), read for every call, never remembered by
    address. A call whose caller cannot be found there is refused: its connection is gone
    (a request sent, then the socket closed, would otherwise pass as root's). On a system
    without that table (not Linux) every caller is let in, as by :class:`AllowAll`
    (docs/security.md)."""

    def __init__(self, uid: int | None = None, proc: Path = PROC_NET) -> None:
        self.uid = uid if uid is not None else (os.geteuid() if hasattr(os, "geteuid") else None)
        self._proc = proc
        self._served: set[tuple[str, int]] = set()

    def serving(self, host: str, port: int) -> None:
        """The server bound ``host:port``: the callers' connections end there."""
        self._served.update((address, port) for address in loopback_hosts(host))

    def owner(self, address: str) -> int | None:
        """The uid owning the caller's end of the connection gRPC names ``address``
        (``ipv4:127.0.0.1:PORT``, ``ipv6:[::1]:PORT``), or None if it cannot be read."""
        client = peer_address(address)
        if client is None:
            return None
        return loopback_peer_uid(client, *sorted(self._served), proc=self._proc)

    async def authenticate(self, peer: PeerIdentity) -> None:
        if self.uid is None or not (self._proc / "tcp").exists():
            return  # no way to tell users apart here
        # Off the event loop: the table lists every TCP socket of the machine's namespace.
        uid = await asyncio.to_thread(self.owner, peer.address)
        if uid is None:
            raise PermissionDenied(
                f"this node serves without TLS (--insecure), to the user who started it "
                f"only, and could not tell who is calling from {peer.address} (the "
                "connection is gone, or is not a loopback TCP one): call it again"
            )
        if uid not in (self.uid, 0):
            raise PermissionDenied(
                f"this node serves without TLS (--insecure), to the user who started it "
                f"only, and this call comes from another user of the machine (uid {uid}): "
                "run the command as that user, or serve with mutual TLS and join its mesh"
            )


def peer_address(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a gRPC peer string, or None for another kind (a Unix socket)."""
    kind, _, rest = unquote(address).partition(":")
    if kind not in ("ipv4", "ipv6"):
        return None
    host, _, port = rest.rpartition(":")
    if not port.isdigit():
        return None
    return host.strip("[]"), int(port)
