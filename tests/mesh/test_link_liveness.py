"""Link liveness (decision 0085): a dial that gets no answer fails within seconds, named as
the unreachable peer it is; our keepalive pings pass a server with gRPC's default policy.

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
from typing import Any

import grpc
import pytest

from lifeline.errors import PeerError
from lifeline_mesh.transport.announce import WATCH_HEARTBEAT_S, watch_lines
from lifeline_mesh.transport.channels import CONNECT_TIMEOUT_S, KEEPALIVE_S, open_channel


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


async def _stream_through_pings(server_options: list[tuple[str, Any]], ping_ms: int) -> int:
    """Messages a quiet stream (one every ``BEAT_S``) delivered to a caller pinging every
    ``ping_ms`` before it ended (all of them when the server never sent GOAWAY)."""

    async def beats(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        for _ in range(BEATS):
            await asyncio.sleep(BEAT_S)
            yield b"beat"

    server = grpc.aio.server(options=server_options)
    handler = grpc.unary_stream_rpc_method_handler(beats)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("t.Beat", {"Beat": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    got = 0
    try:
        options = [("grpc.keepalive_time_ms", ping_ms)]
        async with open_channel(f"127.0.0.1:{port}", None, options) as channel:
            call = channel.unary_stream("/t.Beat/Beat")(b"")
            with contextlib.suppress(grpc.aio.AioRpcError):
                async for _ in call:
                    got += 1
    finally:
        await server.stop(0)
    return got


BEAT_S = 5.0
BEATS = 3


@pytest.mark.slow  # three 5 s heartbeats, twice
# Alone (the serial part): scaled down 4:1, a heartbeat held up 2.5 s by a loaded machine
# lets a third ping in between two (at 20 s heartbeats, 10 s of delay would).
@pytest.mark.serial
async def test_our_pings_pass_a_server_with_grpcs_default_ping_policy() -> None:
    """Scaled down 4:1 (a heartbeat every 5 s, pings as often against it as ours every
    10 s against 20 s heartbeats) against a server that takes pings as gRPC's default
    does (none more often than every 5 minutes while it sends nothing, 2 strikes): the
    call lives, since each message the server sends resets the strikes. Pinging every
    second (gRPC's floor for a client) ends it with GOAWAY: the policy is in force."""
    default_policy = [("grpc.http2.min_recv_ping_interval_without_data_ms", 300_000)]
    ratio = WATCH_HEARTBEAT_S / KEEPALIVE_S
    assert ratio <= 2, "more than 2 pings between heartbeats: a default peer says GOAWAY"
    assert await _stream_through_pings(default_policy, int(BEAT_S * 1000 / ratio)) == BEATS
    assert await _stream_through_pings(default_policy, 1000) < BEATS
