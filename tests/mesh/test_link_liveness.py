"""A connection attempt that gets no answer fails within seconds, named as the unreachable
peer it is (decision 0085).

A real listening socket whose accept queue is full: Linux then drops further SYNs without
a word, as a partitioned link does, so a dial sees nothing but its own SYN retries. The
Watch call must give up after ``CONNECT_TIMEOUT_S`` (gRPC's own attempt lasts 20 s, which
kept a healed link unused for up to 8 s) and say the peer is unreachable, not that the
two nodes "do not trust each other" (gRPC words the timeout "tcp handshaker shutdown").
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Iterator

import pytest

from lifeline.errors import PeerError
from lifeline_mesh.transport.announce import watch_lines
from lifeline_mesh.transport.channels import CONNECT_TIMEOUT_S


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port on loopback that drops every new SYN: its accept queue is full."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = int(server.getsockname()[1])
    fillers = []
    try:
        for _ in range(3):  # the queue holds one; the rest wait in SYN retries
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):  # the connect goes on in the kernel
                filler.connect(("127.0.0.1", port))
            fillers.append(filler)
        time.sleep(0.2)
        yield port
    finally:
        for filler in fillers:
            filler.close()
        server.close()


async def test_a_dial_that_gets_no_answer_fails_within_the_connect_timeout(
    silent_port: int,
) -> None:
    target = f"127.0.0.1:{silent_port}"
    start = time.monotonic()
    with pytest.raises(PeerError) as caught:
        async with asyncio.timeout(CONNECT_TIMEOUT_S + 7):  # gRPC's default is 20 s
            async for _ in watch_lines(target, []):
                pass
    took = time.monotonic() - start
    assert took < CONNECT_TIMEOUT_S + 2, f"the dial gave up after {took:.1f}s"
    message = str(caught.value)
    assert f"peer {target} is unreachable" in message
    assert "trust" not in message
