"""Link liveness (decision 0085): a dial that gets no answer fails within seconds, named as
the unreachable peer it is; our keepalive pings pass our servers' ping policy.

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
from lifeline_mesh.transport.channels import (
    CONNECT_TIMEOUT_S,
    KEEPALIVE_S,
    open_channel,
    server_ping_options,
)


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
SCALE = WATCH_HEARTBEAT_S / BEAT_S  # time scaled down 4:1 (a heartbeat every 5 s, not 20 s)


def _scaled(options: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return [
        (name, int(value / SCALE)) if name.endswith("_ms") else (name, value)
        for name, value in options
    ]


@pytest.mark.slow  # three 5 s heartbeats
@pytest.mark.serial  # bounds on wall-clock ping timing: run alone
async def test_our_pings_pass_our_servers_ping_policy() -> None:
    """Scaled down 4:1: a quiet call (a heartbeat every 5 s, as a Watch call's every 20 s)
    to a server with our ping policy lives through our pings (every 2.5 s, as ours every
    10 s); against gRPC's default policy (scaled: no ping within 75 s of another, 2
    strikes), pinging every second ends the call with GOAWAY too_many_pings: a server's
    policy is what decides. The two calls run side by side (a server and a channel each,
    nothing shared), so the test waits out the heartbeats once."""
    ours = _scaled(server_ping_options())
    default = _scaled([("grpc.http2.min_ping_interval_without_data_ms", 300_000)])
    through_ours, through_default = await asyncio.gather(
        _stream_through_pings(ours, int(KEEPALIVE_S * 1000 / SCALE)),
        _stream_through_pings(default, 1000),
    )
    assert through_ours == BEATS
    assert through_default < BEATS
