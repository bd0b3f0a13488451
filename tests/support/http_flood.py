"""Hostile clients of our HTTP servers, for tests: a flood of idle sockets, and requests
shaped as a browser sends them from another web page (a foreign ``Host`` or ``Origin``).

Everything goes to 127.0.0.1 only, and every flood is bounded by its caller."""

from __future__ import annotations

import http.client
import resource
import select
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

__all__ = [
    "at_most_fds",
    "browser_request",
    "idle_flood",
    "open_count",
    "wait_until_open_at_most",
]

PARTIAL_HEAD = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "  # never finished


def at_most_fds(command: Sequence[str], limit: int | None) -> list[str]:
    """``command`` run with at most ``limit`` open descriptors (the common desktop limit),
    through util-linux's ``prlimit``: a ``preexec_fn`` would run Python in a child forked
    from a test process whose other threads (gRPC's) may hold locks. None: as it is."""
    if limit is None:
        return list(command)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return ["prlimit", f"--nofile={min(limit, hard)}:{hard}", "--", *command]


@contextmanager
def idle_flood(port: int, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connections to ``127.0.0.1:port`` that never finish a request: half say
    nothing, half send the start of a request head and stop (slowloris). Connecting stops
    at the first connection the server does not take within 2 s. Closed on exit."""
    needed = count + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(needed, hard), hard))
    socks: list[socket.socket] = []
    try:
        for i in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            s.settimeout(2.0)
            try:
                s.connect(("127.0.0.1", port))
                if i % 2:
                    s.sendall(PARTIAL_HEAD)
            except OSError:
                break
        yield socks
    finally:
        for s in socks:
            s.close()


def _closed_by_server(s: socket.socket) -> bool:
    try:
        return s.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:  # reset, or never connected
        return True


def open_count(socks: list[socket.socket]) -> int:
    """How many of ``socks`` the server has not closed (a 503 and a close count as closed)."""
    for s in socks:
        s.setblocking(False)
    poller = select.poll()
    by_fd = {s.fileno(): s for s in socks if s.fileno() >= 0}
    for fd in by_fd:
        poller.register(fd, select.POLLIN)
    readable = {by_fd[fd] for fd, _event in poller.poll(0)}
    still = 0
    for s in socks:
        if s in readable:
            while True:  # drain a refusal's body until the close
                try:
                    data = s.recv(65536)
                except BlockingIOError:
                    still += 1
                    break
                except OSError:
                    break
                if not data:
                    break
        elif not _closed_by_server(s):
            still += 1
    return still


def wait_until_open_at_most(socks: list[socket.socket], most: int, within: float) -> int:
    """Poll until at most ``most`` of ``socks`` are open; the last count (the caller
    asserts on it) once that holds or ``within`` seconds passed."""
    deadline = time.monotonic() + within
    while True:
        still = open_count(socks)
        if still <= most or time.monotonic() > deadline:
            return still
        select.poll().poll(200)  # a pause between counts (nothing to wait on but time)


def browser_request(
    port: int,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes | None = None,
) -> tuple[int, str]:
    """One request to ``127.0.0.1:port`` with exactly ``headers`` (``Host`` included, as a
    browser sends it for the page's own name): (status, body text)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()
