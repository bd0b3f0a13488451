"""Sync sessions over mutual TLS, in process: a member's garbage aborts only its session."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from lifeline_mesh.config import NodeConfig
from lifeline_mesh.membership.ca import create_mesh
from lifeline_mesh.membership.invite import issue_invite, parse_duration
from lifeline_mesh.membership.join import join
from lifeline_mesh.membership.tls import channel_credentials, channel_options
from lifeline_mesh.node import Node
from lifeline_mesh.recon.frames import Abort, Hello, Items
from lifeline_mesh.transport.channels import METHOD, grpc_options
from lifeline_mesh.wire.codec import decode_bytes, encode
from tests.recon_helpers import chain
from tests.sync_helpers import history, write


@pytest.fixture
async def mesh(tmp_path: Path) -> AsyncIterator[tuple[Node, str, Node]]:
    """A (CA holder, serving over mTLS with its join port) and B, a member that joined."""
    a_root, b_root = tmp_path / "a", tmp_path / "b"
    for root in (a_root, b_root):
        root.mkdir()
        NodeConfig(shared_lines=["ledger"]).save(root)
    create_mesh(a_root, "team")
    a = Node(a_root)
    server = a.server(join_listen="127.0.0.1:0")
    address = await server.start("127.0.0.1:0")
    assert a.join_address is not None
    token = issue_invite(a_root, "member", parse_duration("1h"), [a.join_address])
    await join(b_root, token.encode())
    try:
        yield a, address, Node(b_root)
    finally:
        await server.stop(0)


async def _raw(
    root: Path, address: str, frames: list[bytes]
) -> tuple[list[object], grpc.StatusCode]:
    options = [*grpc_options(8 << 20), *channel_options()[:1]]
    async with grpc.aio.secure_channel(address, channel_credentials(root), options) as ch:
        call = ch.stream_stream(METHOD)()
        for data in frames:
            await call.write(data)
        await call.done_writing()
        got: list[object] = []
        try:
            while (data := await call.read()) is not grpc.aio.EOF:
                got.append(decode_bytes(data))
        except grpc.aio.AioRpcError as exc:
            return got, exc.code()
        return got, await call.code()


async def test_garbage_from_a_member_aborts_only_its_session(
    mesh: tuple[Node, str, Node],
) -> None:
    a, address, b = mesh
    await write(b, chain(5, "b"))
    _, code = await _raw(b.root, address, [b"\xff\xff\xff\xff\xff\xff\xff\xff\x01"])
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    hello = encode(Hello(1, "ledger", ("entries",), (), 1 << 20, 10**6)).SerializeToString()
    cut = encode(Items(0, (b'{"id": "trunc',))).SerializeToString()
    got, _ = await _raw(b.root, address, [hello, cut[: len(cut) // 2]])
    assert isinstance(got[-1], Abort) and "not a valid protobuf Frame" in got[-1].reason
    # The honest session that follows goes through, signatures and all.
    [report] = await b.sync(address, ["ledger"])
    assert report.entries_sent == 5
    assert await history(a) == await history(b)
