"""What a node announces on the LAN, and the checks applied to what others announce.

Pure: it turns a node's facts into DNS-SD TXT properties and back. Everything read from the
network is untrusted input — a TXT record that does not parse is rejected with a reason the
adapter logs at debug level, never an exception that reaches the event loop. Admission by
discovery is only a hint for *whom to dial*: the mTLS handshake decides who is a member.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from lifeline.errors import ConfigError
from lifeline_mesh.home.identity import parse_node_id

__all__ = [
    "PROTOCOL_VERSION",
    "SERVICE_TYPE",
    "TXT_VERSION",
    "Advert",
    "AdvertRejected",
    "PeerEvent",
    "PeerFound",
    "PeerLost",
    "admit",
    "check_interfaces",
    "instance_name",
    "parse_txt",
    "well_formed_name",
]

# DNS-SD service type (RFC 6763 §7): service names are at most 15 characters.
SERVICE_TYPE = "_lifeline-mesh._tcp.local."
TXT_VERSION = "1"  # layout of the TXT keys below
PROTOCOL_VERSION = 1  # sync protocol major version; peers with another major are not dialled

_MESH_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,64}\Z")
_MAX_VALUE = 255  # one TXT string is at most 255 bytes (RFC 6763 §6.1)


class AdvertRejected(ValueError):
    """A TXT record from the LAN that is malformed or not for us (reason in the message)."""


@dataclass(frozen=True, slots=True)
class Advert:
    """One node's announcement: who it is, which mesh, how to reach it."""

    node_id: str
    mesh_id: str
    port: int
    addresses: tuple[str, ...] = ()
    protocol: int = PROTOCOL_VERSION

    def txt(self) -> dict[str, str]:
        """The TXT properties (addresses and port travel in A/SRV records, not here)."""
        return {
            "txtvers": TXT_VERSION,
            "node": self.node_id,
            "mesh": self.mesh_id,
            "proto": str(self.protocol),
        }


@dataclass(frozen=True, slots=True)
class PeerFound:
    """A node of our mesh appeared (or changed address) on the LAN."""

    node_id: str
    addresses: tuple[str, ...]
    port: int


@dataclass(frozen=True, slots=True)
class PeerLost:
    """A node we had found said goodbye or expired."""

    node_id: str


def instance_name(node_id: str) -> str:
    """The DNS-SD instance name of a node: its node id is unique on any LAN."""
    return f"{node_id}.{SERVICE_TYPE}"


_INSTANCE = re.compile(
    r"^[0-9a-z]{4}(?:-[0-9a-z]{4}){3}-[0-9a-z]{2}\." + re.escape(SERVICE_TYPE) + r"\Z",
    re.IGNORECASE,
)


def well_formed_name(name: str) -> bool:
    """Whether a name heard on the LAN can be a node's (:func:`instance_name`): anything
    else is dropped before a lookup, which a control character in it made raise."""
    return bool(_INSTANCE.match(name))


def _text(props: Mapping[bytes, bytes | None], key: str) -> str:
    raw = props.get(key.encode())
    if raw is None:
        raise AdvertRejected(f"TXT key {key!r} is missing or has no value")
    if len(raw) > _MAX_VALUE:
        raise AdvertRejected(f"TXT key {key!r} is {len(raw)} bytes, over {_MAX_VALUE}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AdvertRejected(f"TXT key {key!r} is not UTF-8: {raw[:32]!r}") from exc


def parse_txt(
    props: Mapping[bytes, bytes | None],
    *,
    port: int | None,
    addresses: tuple[str, ...],
) -> Advert:
    """Decode a peer's TXT properties; raise AdvertRejected with the reason otherwise."""
    if _text(props, "txtvers") != TXT_VERSION:
        raise AdvertRejected(f"TXT layout version {_text(props, 'txtvers')!r} is not supported")
    try:
        node_id = parse_node_id(_text(props, "node"))
    except ConfigError as exc:
        raise AdvertRejected(str(exc)) from exc
    mesh_id = _text(props, "mesh")
    if not _MESH_ID.match(mesh_id):
        raise AdvertRejected(f"mesh id {mesh_id[:80]!r} is not a valid mesh id")
    proto_text = _text(props, "proto")
    if not (proto_text.isascii() and proto_text.isdigit()) or len(proto_text) > 6:
        raise AdvertRejected(f"protocol version {proto_text[:16]!r} is not a number")
    if port is None or not 0 < port < 65536:
        raise AdvertRejected(f"service port {port!r} is not a TCP port")
    if not addresses:
        raise AdvertRejected("the service record carries no address")
    return Advert(node_id, mesh_id, port, addresses, int(proto_text))


def admit(
    advert: Advert,
    *,
    mesh_id: str,
    own_node_id: str,
    allow: Callable[[str], bool] | None = None,
) -> Advert:
    """Return ``advert`` when we should dial it; raise AdvertRejected saying why not."""
    if advert.node_id == own_node_id:
        raise AdvertRejected("it is this node's own advert")
    if advert.mesh_id != mesh_id:
        raise AdvertRejected(f"node {advert.node_id} belongs to mesh {advert.mesh_id!r}")
    if advert.protocol != PROTOCOL_VERSION:
        raise AdvertRejected(
            f"node {advert.node_id} speaks protocol {advert.protocol}, we speak {PROTOCOL_VERSION}"
        )
    if allow is not None and not allow(advert.node_id):
        raise AdvertRejected(f"node {advert.node_id} is not on the allow-list")
    return advert


PeerEvent = PeerFound | PeerLost


def check_interfaces(interfaces: Sequence[str]) -> list[str]:
    """Validate the interface addresses: IP literals, at least one, never the wildcard."""
    if not interfaces:
        raise ConfigError(
            "discovery needs at least one interface address (e.g. --interface 192.168.1.20); "
            "it never announces on every interface, or pass --no-discovery"
        )
    out: list[str] = []
    for text in interfaces:
        try:
            addr = ipaddress.ip_address(text.strip())
        except ValueError as exc:
            raise ConfigError(
                f"interface {text!r} is not an IP address; pass the address of the interface "
                "to announce on (`ip addr` lists them)"
            ) from exc
        if addr.is_unspecified:
            raise ConfigError(
                f"interface {text!r} means every interface; name the one address to announce on"
            )
        out.append(str(addr))
    return out
