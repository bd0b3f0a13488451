"""The HTTP servers' browser rule (table tests) and connection limits, against real uvicorn on
127.0.0.1 port 0 with the limits shrunk: the header deadline, the cap closing the longest
idle connection, 503 when every connection is busy, and a busy request never cut."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from lifeline_mesh.transport.addresses import listen_socket
from lifeline_mesh.transport.http_guard import host_allowed, origin_allowed
from lifeline_mesh.transport.http_limits import HttpLimits, server_config

pytestmark = pytest.mark.timeout(60)

LIMITS = HttpLimits(header_timeout=0.5, keep_alive=5, max_connections=4)


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1:8470", True),
        ("localhost:8470", True),
        ("LOCALHOST", True),
        ("[::1]:8470", True),
        ("192.168.1.20:8470", True),  # an address: no page can rebind it
        ("viewer.lan:8470", True),  # given with --allow-host
        ("attacker.example:8470", False),
        ("localhost.", False),
        ("localhost.attacker.example", False),
        ("", False),
    ],
)
def test_host_rule(host: str, allowed: bool) -> None:
    assert host_allowed(host, ["viewer.lan"]) is allowed


@pytest.mark.parametrize(
    ("origin", "host", "allowed"),
    [
        ("http://127.0.0.1:8470", "127.0.0.1:8470", True),
        ("https://hub.example", "hub.example:443", True),
        ("http://viewer.lan", "127.0.0.1:8470", True),
        ("http://127.0.0.1:8471", "127.0.0.1:8470", False),  # another port, another origin
        ("http://localhost:8470", "127.0.0.1:8470", False),
        ("https://127.0.0.1:8470", "127.0.0.1:8470", False),
        ("null", "127.0.0.1:8470", False),
        ("file://", "127.0.0.1:8470", False),
    ],
)
def test_origin_rule(origin: str, host: str, allowed: bool) -> None:
    scheme = "https" if host.endswith(":443") else "http"
    assert origin_allowed(origin, host, ["viewer.lan"], scheme=scheme) is allowed


class _App:
    """``/hold`` answers once ``release`` is set; anything else at once."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.holding = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        if scope["path"] == "/hold":
            self.holding += 1
            await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


@asynccontextmanager
async def _serving(app: _App, limits: HttpLimits = LIMITS) -> AsyncIterator[int]:
    sock = listen_socket("127.0.0.1", 0, hint="")
    server = uvicorn.Server(server_config(app, limits, log_level="error", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        app.release.set()
        await task


async def _closed(reader: asyncio.StreamReader, within: float = 5.0) -> bool:
    """Whether the server closes the connection within ``within`` seconds."""
    try:
        while await asyncio.wait_for(reader.read(4096), within):
            pass
    except TimeoutError:
        return False
    except ConnectionError:
        pass
    return True


async def _get(port: int, path: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    answer = await asyncio.wait_for(reader.read(4096), 10)
    writer.close()
    return answer


async def test_a_connection_that_never_finishes_its_head_is_closed() -> None:
    async with _serving(_App()) as port:
        _r1, silent = await asyncio.open_connection("127.0.0.1", port)
        r2, slow = await asyncio.open_connection("127.0.0.1", port)
        slow.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        for _ in range(3):  # a byte now and then does not extend the deadline
            await asyncio.sleep(0.2)
            slow.write(b"X-A: b\r\n")
        assert await _closed(r2)
        assert await _closed(_r1)
        silent.close()
        slow.close()


async def test_past_the_cap_the_longest_idle_connection_is_closed() -> None:
    no_deadline = HttpLimits(header_timeout=60, max_connections=4)  # only the cap acts
    async with _serving(_App(), no_deadline) as port:
        idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(4)]
        assert not await _closed(idle[0][0], within=0.1)
        assert (await _get(port, "/")).startswith(b"HTTP/1.1 200")  # the fifth is served
        assert await _closed(idle[0][0], within=5.0)  # the oldest made room
        for reader, _w in idle[1:]:
            assert not await _closed(reader, within=0.05)
        for _r, w in idle:
            w.close()


async def test_when_every_connection_is_busy_the_newcomer_gets_503() -> None:
    app = _App()
    async with _serving(app) as port:
        held = [asyncio.create_task(_get(port, "/hold")) for _ in range(4)]
        while app.holding < 4:
            await asyncio.sleep(0.01)
        assert (await _get(port, "/")).startswith(b"HTTP/1.1 503")
        await asyncio.sleep(LIMITS.header_timeout * 2)  # busy past the header deadline
        app.release.set()
        answers = await asyncio.gather(*held)
        assert all(a.startswith(b"HTTP/1.1 200") for a in answers)  # never cut
