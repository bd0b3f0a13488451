"""The calls a node makes to one peer share one connection (decision 0096).

A real `serve` behind a TCP proxy that counts the connections made through it, and a node
of the same mesh (mutual TLS) that watches it and syncs with it: while the Watch call is
open, every session and the membership pull before it ride on the Watch call's
connection — one TLS handshake for all of them, where each session used to make two.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from lifeline.errors import NotAuthenticated, PeerError, RemoteProtocolError
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.node.root import Node
from lifeline_mesh.peering.table import PeerAddress, PeerState
from lifeline_mesh.peering.watches import Heard
from lifeline_mesh.recon.session import SessionLimits
from lifeline_mesh.transport.channels import FRAME_HEADROOM, METHOD, ClientChannel
from lifeline_mesh.transport.pool import ChannelPool
from tests.support.mesh_procs import cli, free_port, join_mesh, log_note, serve, wait_for_entry

LINE = "ledger"


class CountingProxy:
    """Forwards every connection to ``port`` on loopback, counting them."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.accepted = 0
        self.server: asyncio.Server | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> str:
        assert self.server is not None
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        self.tasks.discard(task)

    async def __aenter__(self) -> CountingProxy:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


@pytest.fixture
def trio(tmp_path: Path) -> tuple[Path, Path, Path]:
    roots = a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for root in roots:
        root.mkdir()
        cli("lifeline", root, "init")
    join_mesh(b, [a, c])
    for root in roots:
        cli("lifeline_mesh", root, "share", LINE)
    return a, b, c


@contextlib.asynccontextmanager
async def watching(node: Node, peer: PeerState) -> AsyncIterator[asyncio.Task[None]]:
    """``node``'s Watch call to ``peer``, open for the block."""
    opened = asyncio.Event()

    async def watch() -> None:
        async for heard in node.watch_peer(peer):
            if heard is Heard.OPENED:
                opened.set()

    task = asyncio.create_task(watch())
    try:
        async with asyncio.timeout(30):
            await opened.wait()
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_sessions_ride_on_the_watch_call_s_connection(
    trio: tuple[Path, Path, Path],
) -> None:
    a_root, b_root, _ = trio
    port = free_port()
    with serve(b_root, "--listen", f"127.0.0.1:{port}", "--no-discovery"):
        async with CountingProxy(port) as proxy:
            a = Node(NodeHome(a_root))
            peer = PeerState(proxy.address, PeerAddress.parse(proxy.address), set())
            async with watching(a, peer):
                # the pin (one handshake of its own at the first contact) and the Watch call
                assert proxy.accepted == 2
                for n in range(3):
                    entry = log_note(b_root, f"note {n}")
                    await a.sync(proxy.address, [LINE])  # (the Watch call may bring it first)
                    wait_for_entry(a.home.line_path(LINE), entry, deadline_s=10)
                assert proxy.accepted == 2, "a session opened a connection of its own"
                assert len(a.channels) == 1
            assert len(a.channels) == 0  # closed with its last call
            await a.sync(proxy.address, [LINE])  # no Watch call: pull and session share one
            assert proxy.accepted == 3
            assert len(a.channels) == 0


async def test_another_member_at_a_pinned_address_is_pinned_anew(
    trio: tuple[Path, Path, Path],
) -> None:
    """The node pinned at an address is asked again when a handshake there fails as
    untrusted (another node serves there now), not kept forever nor forgotten whenever
    the peer is unreachable."""
    a_root, b_root, c_root = trio
    port = free_port()
    address = f"127.0.0.1:{port}"
    a = Node(NodeHome(a_root))
    b_id, c_id = (cli("lifeline_mesh", r, "id").stdout.strip() for r in (b_root, c_root))
    with serve(b_root, "--listen", address, "--no-discovery"):
        await a.sync(address, [LINE])
    assert a.pins.known[address] == b_id
    with pytest.raises(PeerError, match="unreachable"):
        await a.sync(address, [LINE])  # nobody there
    assert a.pins.known[address] == b_id  # kept: the same node may come back
    with serve(c_root, "--listen", address, "--no-discovery"):
        with pytest.raises(NotAuthenticated):
            await a.sync(address, [LINE])  # pinned to b, c answers
        assert address not in a.pins.known
        await a.sync(address, [LINE])
    assert a.pins.known[address] == c_id
    assert len(a.channels) == 0


async def test_a_frame_above_the_cap_on_a_shared_channel_is_refused() -> None:
    """A shared channel admits messages as large as a members list; a session on it still
    refuses a frame above its own cap, as gRPC does on a channel of its own."""
    limits = SessionLimits()
    big = b"\x00" * (limits.max_frame_bytes + 8192)

    async def flood(requests: AsyncIterator[bytes], context: object) -> AsyncIterator[bytes]:
        yield big

    handler = grpc.method_handlers_generic_handler(
        METHOD.split("/")[1], {METHOD.split("/")[2]: grpc.stream_stream_rpc_method_handler(flood)}
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    target = f"127.0.0.1:{port}"
    size = [("grpc.max_receive_message_length", 4 * len(big))]
    try:
        pool = ChannelPool()
        async with pool.lease(target, None, size) as channel:
            call = channel.stream_stream(METHOD)()
            session = ClientChannel(call, target, limits.max_frame_bytes + FRAME_HEADROOM)
            with pytest.raises(RemoteProtocolError, match="above the"):
                await session.recv()
    finally:
        await server.stop(None)
