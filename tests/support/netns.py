"""Network set-ups for tests: multicast on loopback, and two hosts in network namespaces.

Two network namespaces joined by a veth pair make a two-host LAN inside one machine.

Needs root and iproute2; :func:`netns_unavailable` says why not otherwise, for skip reasons.
Names carry a random tag so parallel runs never collide, addresses are 10.x (private, and only
inside these namespaces), and everything is deleted in ``finally``.
"""

from __future__ import annotations

import functools
import os
import secrets
import shutil
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

__all__ = [
    "LOOPBACK",
    "Host",
    "needs_multicast",
    "netns_unavailable",
    "skip_unless_same_host_conflicts_are_seen",
    "two_hosts",
]

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Host:
    namespace: str
    address: str

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run inside this host's namespace."""
        return ["ip", "netns", "exec", self.namespace, *argv]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def netns_unavailable() -> str | None:
    """None when namespaces can be made here, else the reason."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2 (`ip`) is not installed"
    probe = f"llm-probe-{secrets.token_hex(3)}"
    try:
        _ip("netns", "add", probe)
    except (subprocess.CalledProcessError, OSError) as exc:
        return f"`ip netns add` failed here: {exc}"
    _ip("netns", "del", probe)
    return None


@contextmanager
def two_hosts() -> Iterator[tuple[Host, Host]]:
    tag = secrets.token_hex(3)
    net = f"10.{200 + secrets.randbelow(50)}.{secrets.randbelow(250)}"
    a = Host(f"llm-{tag}-a", f"{net}.1")
    b = Host(f"llm-{tag}-b", f"{net}.2")
    made: list[str] = []
    try:
        for host in (a, b):
            _ip("netns", "add", host.namespace)
            made.append(host.namespace)
        _ip("link", "add", f"lva{tag}", "type", "veth", "peer", "name", f"lvb{tag}")
        for host, dev in ((a, f"lva{tag}"), (b, f"lvb{tag}")):
            _ip("link", "set", dev, "netns", host.namespace)
            ns = ["-n", host.namespace]
            _ip(*ns, "addr", "add", f"{host.address}/24", "dev", dev)
            _ip(*ns, "link", "set", dev, "up")
            _ip(*ns, "link", "set", "lo", "up")
        yield a, b
    finally:
        for name in made:  # deleting a namespace deletes its end of the veth pair too
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


def _loopback_multicast_works() -> bool:
    """Can a multicast datagram sent on 127.0.0.1 be received on it? (Linux: yes, even
    when lo lacks the MULTICAST flag, because the sender names the interface.)"""
    group = "239.255.77.77"
    recv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    send = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        recv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        recv.bind(("", 0))
        port = recv.getsockname()[1]
        mreq = struct.pack("4s4s", socket.inet_aton(group), socket.inet_aton(LOOPBACK))
        recv.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
        send.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(LOOPBACK))
        send.sendto(b"probe", (group, port))
        recv.settimeout(2)
        return recv.recv(16) == b"probe"
    except OSError:
        return False
    finally:
        recv.close()
        send.close()


needs_multicast = pytest.mark.skipif(
    not _loopback_multicast_works(),
    reason="this host does not deliver multicast on 127.0.0.1 (no multicast route on lo)",
)


_CONFLICT_PROBE = """
import asyncio, secrets, socket, sys
from zeroconf import NonUniqueNameException, ServiceInfo
from zeroconf.asyncio import AsyncZeroconf

async def main() -> None:
    kind = f"_llm{secrets.token_hex(3)}._tcp.local."
    def info(port: int) -> ServiceInfo:
        return ServiceInfo(kind, f"probe.{kind}", addresses=[socket.inet_aton("127.0.0.1")],
                           port=port, server="probe.local.")
    first, second = AsyncZeroconf(interfaces=["127.0.0.1"]), AsyncZeroconf(interfaces=["127.0.0.1"])
    try:
        await (await first.async_register_service(info(1)))
        try:
            await (await second.async_register_service(info(2)))
            print("unseen")
        except NonUniqueNameException:
            print("seen")
    finally:
        await second.async_close()
        await first.async_close()

asyncio.run(main())
"""


@functools.cache
def _same_host_conflicts_are_seen() -> bool:
    done = subprocess.run(
        [sys.executable, "-c", _CONFLICT_PROBE], capture_output=True, text=True, timeout=60
    )
    return done.stdout.strip() == "seen"


def skip_unless_same_host_conflicts_are_seen() -> None:
    """Skip when plain zeroconf cannot see two announcers of one name on 127.0.0.1 here.

    Its probe asks for unicast answers, and the kernel hands a unicast datagram to just one
    of the sockets bound to 127.0.0.1:5353 with SO_REUSEPORT: when other mDNS processes run
    on this host (another test run, a responder), the answer can land in one of theirs."""
    if not _same_host_conflicts_are_seen():
        pytest.skip(
            "zeroconf does not see a name announced twice on 127.0.0.1 on this host now "
            "(another process bound to port 5353 takes the unicast answer)"
        )
