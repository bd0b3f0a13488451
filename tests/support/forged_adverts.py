"""Adverts anyone on a LAN can send: mDNS answers built by hand and sent from a plain socket.

What an attacker on the segment sends to keep two nodes from finding each other: a node's
own instance name with another address (:func:`advert_packets` for a real node id), or a
flood of made-up nodes of a mesh whose id every advert of it shows (:func:`flood_packets`),
with names that answer no lookup among them (:func:`pointer_packets`). The unique records
carry the cache-flush bit, as a real responder's do, so they replace what a listener held.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable, Sequence

from zeroconf._dns import DNSAddress, DNSPointer, DNSService, DNSText
from zeroconf._protocol.outgoing import DNSOutgoing
from zeroconf.const import (
    _CLASS_IN,
    _CLASS_IN_UNIQUE,
    _FLAGS_AA,
    _FLAGS_QR_RESPONSE,
    _TYPE_A,
    _TYPE_PTR,
    _TYPE_SRV,
    _TYPE_TXT,
)

from lifeline_mesh.discovery.advert import PROTOCOL_VERSION, SERVICE_TYPE, Advert, instance_name
from lifeline_mesh.home.identity import node_id_for

__all__ = ["advert_packets", "flood_packets", "made_up_node_ids", "pointer_packets", "send"]

TTL = 4500  # what zeroconf gives PTR, SRV and TXT records


def made_up_node_ids(count: int) -> list[str]:
    """Node ids with valid check characters, of keys nobody holds."""
    return [node_id_for(os.urandom(32)) for _ in range(count)]


def _txt(advert: Advert) -> bytes:
    out = b""
    for key, value in advert.txt().items():
        item = f"{key}={value}".encode()
        out += bytes([len(item)]) + item
    return out


def _add(out: DNSOutgoing, node_id: str, mesh_id: str, port: int, address: str) -> None:
    name = instance_name(node_id)
    host = f"{node_id}-x.local."  # a host name of its own: the real node's A record stays
    advert = Advert(node_id, mesh_id, port, (address,), PROTOCOL_VERSION)
    records = [
        DNSPointer(SERVICE_TYPE, _TYPE_PTR, _CLASS_IN, TTL, name),
        DNSService(name, _TYPE_SRV, _CLASS_IN_UNIQUE, 120, 0, 0, port, host),
        DNSText(name, _TYPE_TXT, _CLASS_IN_UNIQUE, TTL, _txt(advert)),
        DNSAddress(host, _TYPE_A, _CLASS_IN_UNIQUE, 120, socket.inet_aton(address)),
    ]
    for record in records:
        out.add_answer_at_time(record, 0)


def advert_packets(node_id: str, mesh_id: str, port: int, address: str) -> list[bytes]:
    """A whole advert of ``node_id`` in mesh ``mesh_id``, serving at ``address``:``port``."""
    out = DNSOutgoing(_FLAGS_QR_RESPONSE | _FLAGS_AA)
    _add(out, node_id, mesh_id, port, address)
    return out.packets()


def flood_packets(
    node_ids: Sequence[str], mesh_id: str, port: int, address: str, per_packet: int = 8
) -> list[bytes]:
    """Whole adverts of ``node_ids``, ``per_packet`` to a datagram."""
    packets: list[bytes] = []
    for start in range(0, len(node_ids), per_packet):
        out = DNSOutgoing(_FLAGS_QR_RESPONSE | _FLAGS_AA)
        for node_id in node_ids[start : start + per_packet]:
            _add(out, node_id, mesh_id, port, address)
        packets.extend(out.packets())
    return packets


def pointer_packets(node_ids: Sequence[str], per_packet: int = 40) -> list[bytes]:
    """Pointers of our service type to the instance names of ``node_ids``, nothing more:
    each name a listener looks up waits for an answer that never comes."""
    packets: list[bytes] = []
    for start in range(0, len(node_ids), per_packet):
        out = DNSOutgoing(_FLAGS_QR_RESPONSE | _FLAGS_AA)
        for node_id in node_ids[start : start + per_packet]:
            pointer = DNSPointer(SERVICE_TYPE, _TYPE_PTR, _CLASS_IN, TTL, instance_name(node_id))
            out.add_answer_at_time(pointer, 0)
        packets.extend(out.packets())
    return packets


def send(packets: Iterable[bytes], interface: str = "127.0.0.1", pace_s: float = 0.0) -> int:
    """Send ``packets`` to the mDNS group on ``interface``; ``pace_s`` between datagrams
    (a socket's buffer holds a few hundred). Returns how many were sent."""
    sent = 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(interface))
        for packet in packets:
            sock.sendto(packet, ("224.0.0.251", 5353))
            sent += 1
            if pace_s:
                time.sleep(pace_s)
    return sent
