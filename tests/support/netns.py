"""Network set-ups for tests: a namespace of one's own, and two hosts in network namespaces.

Two network namespaces joined by a veth pair make a two-host LAN inside one machine;
:func:`own_network` puts the calling thread (and the subprocesses it starts) in a namespace of
its own, with nothing but its loopback: no other mDNS process, interface or test run in sight.

Needs root and iproute2; :func:`netns_unavailable` says why not otherwise, for skip reasons.
Names carry a random tag so parallel runs never collide, addresses are 10.x (private, and only
inside these namespaces), and everything is deleted in ``finally``.
"""

from __future__ import annotations

import ctypes
import functools
import os
import secrets
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

__all__ = [
    "LOOPBACK",
    "Host",
    "netns_unavailable",
    "other_mdns_sockets",
    "own_netns",
    "own_network",
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


@functools.cache
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


_CLONE_NEWNET = 0x40000000


def _setns(fd: int) -> None:
    """Move the calling thread into the network namespace open at ``fd`` (setns(2))."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextmanager
def own_network() -> Iterator[str]:
    """Run the calling thread in a fresh network namespace; yield its name.

    A namespace is per thread on Linux: sockets this thread opens (zeroconf's, gRPC's) and
    processes it starts live in the namespace, the other threads of pytest stay outside.
    Inside: ``lo`` up, flagged multicast, with the 224.0.0.0/4 route on it, and nothing else —
    port 5353 is ours alone, whatever the machine runs. Skips with the reason when namespaces
    cannot be made here (not root, no iproute2)."""
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    name = f"llm-{secrets.token_hex(4)}-own"
    _ip("netns", "add", name)
    try:
        _ip("-n", name, "link", "set", "lo", "multicast", "on", "up")
        _ip("-n", name, "route", "add", "224.0.0.0/4", "dev", "lo")
        home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            target = os.open(f"/run/netns/{name}", os.O_RDONLY)
            try:
                _setns(target)
            finally:
                os.close(target)
            try:
                yield name
            finally:
                _setns(home)
        finally:
            os.close(home)
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


@pytest.fixture
def own_netns() -> Iterator[str]:
    """The test runs in a network namespace of its own (see :func:`own_network`)."""
    with own_network() as name:
        yield name


@contextmanager
def other_mdns_sockets(address: str, count: int) -> Iterator[None]:
    """``count`` sockets bound to ``address``:5353 as other mDNS processes bind theirs
    (SO_REUSEADDR, SO_REUSEPORT), never read: a unicast datagram to that address and port
    reaches one socket of the group, most likely one of these."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((address, 5353))
        yield
    finally:
        for sock in socks:
            sock.close()
