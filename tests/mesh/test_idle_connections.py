"""Connections that carry no call (decision 0134): a gRPC port takes at most a share of the
open-file limit of them, and closes one idle for ``CONNECTION_IDLE_S``.

Before it, a reader's idle TLS connections took every descriptor of a `serve` run under
`prlimit --nofile=256` (232 of them), gRPC logged *File descriptor limit reached* once a
second, and nothing closed them. The first test runs that attack against a real `serve`;
the other two check the idle close and the cap with the constants shrunk, on a real
grpc.aio server (127.0.0.1, port 0)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import grpc
import pytest

from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.certs import TARGET_NAME
from lifeline_mesh.membership.tls import channel_credentials
from lifeline_mesh.transport import call_caps
from lifeline_mesh.transport.channels import METHOD
from lifeline_mesh.wire import sync_pb2 as pb
from tests.support.mesh_procs import cli, join_mesh, serve, shared_node, start_ca_serve
from tests.support.sync_helpers import make_node, serving

HELLO = pb.Frame(
    hello=pb.Hello(protocol_version=1, line="ledger", sets=["entries"], max_frame_bytes=1 << 20)
).SerializeToString()
END_OF_TURN = pb.Frame(end_of_turn=pb.EndOfTurn()).SerializeToString()


async def _ready(channel: grpc.aio.Channel, seconds: float) -> bool:
    """Whether ``channel`` connects (TLS done, HTTP/2 up) within ``seconds``."""
    try:
        await asyncio.wait_for(channel.channel_ready(), seconds)
    except TimeoutError:
        return False
    return True


@pytest.mark.slow
async def test_a_reader_s_idle_connections_leave_the_node_its_descriptors(
    tmp_path: Path,
) -> None:
    ca, reader, member = tmp_path / "ca", tmp_path / "reader", tmp_path / "member"
    for root in (ca, reader, member):
        shared_node(root)
    join_mesh(ca, [reader, member], roles=["reader", "member"])
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        proc, address, _joins = start_ca_serve(
            ca, out.fileno(), extra=("--no-discovery",), wrap=("prlimit", "--nofile=256:256")
        )
    try:
        credentials = channel_credentials(NodeHome(reader))
        channels = [
            grpc.aio.secure_channel(
                address,
                credentials,
                options=[("grpc.ssl_target_name_override", TARGET_NAME), ("grpc.channel_id", n)],
            )
            for n in range(300)  # a connection each
        ]
        try:
            ready = await asyncio.gather(*(_ready(c, 8.0) for c in channels))
            held = len(os.listdir(f"/proc/{proc.pid}/fd"))
            flooded = await asyncio.to_thread(
                cli, "lifeline_mesh", member, "sync", address, check=False
            )
        finally:
            for channel in channels:
                await channel.close()
        # the slots come back as the reader's connections close
        for _ in range(40):
            synced = await asyncio.to_thread(
                cli, "lifeline_mesh", member, "sync", address, check=False
            )
            if synced.returncode == 0:
                break
            await asyncio.sleep(0.25)
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    # a quarter of the 256 descriptors (was: 232 connections and every descriptor)
    assert sum(ready) == 256 // call_caps.CONNECTIONS_SHARE, sum(ready)
    assert held < 128, held
    assert flooded.returncode == 2
    assert "all the connections it takes" in flooded.stderr, flooded.stderr
    assert synced.returncode == 0, synced.stderr
    text = log.read_text()
    assert "File descriptor limit reached" not in text, text[-2000:]
    assert "Traceback" not in text, text[-3000:]


async def test_an_idle_connection_is_closed_and_a_call_keeps_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection with no call is closed after the idle time (the channel hears a GOAWAY
    and goes IDLE); one carrying a session is not, however long the session waits; and a
    closed channel's next call connects again."""
    monkeypatch.setattr(call_caps, "CONNECTION_IDLE_S", 0.5)
    node = make_node(tmp_path / "a")
    async with serving(node) as (_server, address):
        idle = grpc.aio.insecure_channel(address, options=[("grpc.channel_id", 1)])
        busy = grpc.aio.insecure_channel(address, options=[("grpc.channel_id", 2)])
        try:
            assert await _ready(idle, 10.0)
            call = busy.stream_stream(METHOD)()
            await call.write(HELLO)
            await call.write(END_OF_TURN)
            first = pb.Frame.FromString(await call.read())
            assert first.WhichOneof("body") == "hello"
            await asyncio.sleep(2.0)  # four idle times
            assert idle.get_state() is grpc.ChannelConnectivity.IDLE
            assert busy.get_state() is grpc.ChannelConnectivity.READY
            call.cancel()
            # the idle channel's next call opens a connection again
            again = idle.stream_stream(METHOD)()
            await again.write(HELLO)
            await again.write(END_OF_TURN)
            answer = pb.Frame.FromString(await again.read())
            assert answer.WhichOneof("body") == "hello"
            again.cancel()
        finally:
            await idle.close()
            await busy.close()


async def _answers(channel: grpc.aio.Channel) -> bool:
    """Whether a session opened on ``channel`` hears the node's hello (its connection was
    taken), or fails (closed as it was accepted); the session is cancelled either way."""
    call = channel.stream_stream(METHOD)()
    try:
        async with asyncio.timeout(10):
            await call.write(HELLO)
            await call.write(END_OF_TURN)
            answer = pb.Frame.FromString(await call.read())
    except grpc.aio.AioRpcError:
        return False
    call.cancel()
    return answer.WhichOneof("body") == "hello"


async def test_connections_past_the_cap_are_closed_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``MAX_CONNECTIONS``, a new connection is closed as it is accepted (its call
    fails UNAVAILABLE); one closed gives its place back."""
    monkeypatch.setattr(call_caps, "MAX_CONNECTIONS", 3)
    node = make_node(tmp_path / "a")
    async with serving(node) as (_server, address):
        channels = [
            grpc.aio.insecure_channel(address, options=[("grpc.channel_id", n)]) for n in range(5)
        ]
        try:
            assert [await _answers(c) for c in channels] == [True] * 3 + [False] * 2
            await channels[0].close()
            # the node sees the close a moment later; a new channel each time (a refused one
            # waits out its reconnect back-off, which grows with each refusal)
            for n in range(80):
                async with grpc.aio.insecure_channel(
                    address, options=[("grpc.channel_id", 100 + n)]
                ) as again:
                    if await _answers(again):
                        break
                await asyncio.sleep(0.25)
            else:
                raise AssertionError("a closed connection's place was not given back")
        finally:
            for channel in channels:
                await channel.close()


def test_serve_raises_its_soft_open_file_limit_to_the_hard_one(tmp_path: Path) -> None:
    """A shell's soft limit (1,024) would bound every cap to a few hundred: `serve` raises
    it, within the hard limit (here 4,096, below the 65,536 it wants)."""
    root = tmp_path / "a"
    shared_node(root)
    with serve(root, "--insecure", "--no-discovery", wrap=("prlimit", "--nofile=1024:4096")) as p:
        limits = Path(f"/proc/{p.pid}/limits").read_text()
    row = next(r for r in limits.splitlines() if r.startswith("Max open files"))
    assert row.split()[3:5] == ["4096", "4096"], row
