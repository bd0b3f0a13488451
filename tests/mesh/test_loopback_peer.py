"""The user on the other end of a loopback connection, read from the kernel's socket list
(lifeline_mesh/transport/loopback_peer.py): real sockets, IPv4, IPv6 and a dual-stack
listener, and a real `curl` run as another user."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from lifeline_mesh.transport.loopback_peer import loopback_peer_uid, proc_address

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads Linux's /proc/net/tcp")

NOBODY = 65534


@contextmanager
def _listening(family: socket.AddressFamily, host: str) -> Iterator[socket.socket]:
    server = socket.socket(family, socket.SOCK_STREAM)
    if host == "::":
        server.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    server.bind((host, 0))
    server.listen()
    try:
        yield server
    finally:
        server.close()


@pytest.mark.parametrize(
    ("family", "listen", "dial"),
    [
        (socket.AF_INET, "127.0.0.1", "127.0.0.1"),
        (socket.AF_INET6, "::1", "::1"),
        (socket.AF_INET6, "::", "127.0.0.1"),  # seen by the server as ::ffff:127.0.0.1
    ],
)
def test_a_connection_of_this_process_is_this_user_s(
    family: socket.AddressFamily, listen: str, dial: str
) -> None:
    with _listening(family, listen) as server:
        client = socket.create_connection((dial, server.getsockname()[1]))
        conn, peer = server.accept()
        try:
            assert loopback_peer_uid(peer[:2], conn.getsockname()[:2]) == os.geteuid()
        finally:
            conn.close()
            client.close()


def test_an_unknown_connection_or_a_name_is_none() -> None:
    with _listening(socket.AF_INET, "127.0.0.1") as server:
        gone = ("127.0.0.1", 1), server.getsockname()
        assert loopback_peer_uid(*gone) is None
    assert proc_address("localhost", 80) is None
    assert proc_address("127.0.0.1", 8080) == "0100007F:1F90"


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None or shutil.which("curl") is None,
    reason="becoming another user needs root and util-linux's setpriv",
)
def test_a_connection_of_another_user_is_theirs() -> None:
    with _listening(socket.AF_INET, "127.0.0.1") as server:
        url = f"http://127.0.0.1:{server.getsockname()[1]}/"
        drop = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
        curl = subprocess.Popen([*drop, "curl", "-s", "-m", "20", url])
        conn, peer = server.accept()
        try:
            assert loopback_peer_uid(peer, conn.getsockname()) == NOBODY
        finally:
            conn.close()
            curl.wait(timeout=30)
