"""Sync sessions over mutual TLS, in process: a member's garbage aborts only its session."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import grpc
import pytest

from lifeline.errors import PermissionDenied
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.ca import create_mesh
from lifeline_mesh.membership.invite import issue_invite, parse_duration
from lifeline_mesh.membership.join import join
from lifeline_mesh.membership.tls import channel_credentials, channel_options
from lifeline_mesh.node.root import Node
from lifeline_mesh.recon.frames import Abort, Hello, Items
from lifeline_mesh.sync.entry_set import EntrySet
from lifeline_mesh.transport.authz import MeshRole
from lifeline_mesh.transport.client import sync_line
from lifeline_mesh.wire.codec import encode
from tests.support.recon_helpers import chain
from tests.support.sync_helpers import history, raw_session, write


@pytest.fixture
async def mesh(tmp_path: Path) -> AsyncIterator[tuple[Node, str, Node]]:
    async for value in _mesh(tmp_path, "member"):
        yield value


@pytest.fixture
async def reader_mesh(tmp_path: Path) -> AsyncIterator[tuple[Node, str, Node]]:
    async for value in _mesh(tmp_path, "reader"):
        yield value


async def _mesh(tmp_path: Path, role: str) -> AsyncIterator[tuple[Node, str, Node]]:
    """A (CA holder, serving over mTLS with its join port) and B, a member that joined."""
    a_root, b_root = tmp_path / "a", tmp_path / "b"
    for root in (a_root, b_root):
        root.mkdir()
        NodeConfig(shared_lines=["ledger"]).save(NodeHome(root))
    create_mesh(NodeHome(a_root), "team")
    a = Node(NodeHome(a_root))
    server = a.server(join_listen="127.0.0.1:0")
    address = await server.start("127.0.0.1:0")
    assert a.join_address is not None
    token = issue_invite(NodeHome(a_root), role, parse_duration("1h"), [a.join_address])
    await join(NodeHome(b_root), token.encode())
    try:
        yield a, address, Node(NodeHome(b_root))
    finally:
        await server.stop(0)


async def _raw(
    root: Path, address: str, frames: list[bytes]
) -> tuple[list[object], grpc.StatusCode]:
    return await raw_session(
        address, frames, channel_credentials(NodeHome(root)), channel_options()[:1]
    )


async def test_garbage_from_a_member_aborts_only_its_session(
    mesh: tuple[Node, str, Node],
) -> None:
    a, address, b = mesh
    await write(b, chain(5, "b"))
    _, code = await _raw(b.home.root, address, [b"\xff\xff\xff\xff\xff\xff\xff\xff\x01"])
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    hello = encode(Hello(1, "ledger", ("entries",), (), 1 << 20, 10**6)).SerializeToString()
    cut = encode(Items(0, (b'{"id": "trunc',))).SerializeToString()
    got, _ = await _raw(b.home.root, address, [hello, cut[: len(cut) // 2]])
    assert isinstance(got[-1], Abort) and "not a valid protobuf Frame" in got[-1].reason
    # The honest session that follows goes through, signatures and all.
    [report] = await b.sync(address, ["ledger"])
    assert report.entries_sent == 5
    assert await history(a) == await history(b)


async def test_a_reader_receives_and_anything_it_pushes_is_refused(
    reader_mesh: tuple[Node, str, Node],
) -> None:
    a, address, c = reader_mesh
    await write(a, chain(3, "a"))
    [report] = await c.sync(address, ["ledger"])  # our client offers nothing as a reader
    assert report.entries_received == 3 and report.entries_sent == 0
    await write(c, chain(2, "c", (await history(a))[-1]["id"]))
    async with c.open_line("ledger") as store:
        pushy = [EntrySet(store)]  # a modified client that offers its entries anyway
        with pytest.raises(PermissionDenied, match="reader"):
            await sync_line(
                address,
                "ledger",
                pushy,
                credentials=c.security.channel_credentials,
                extra_options=c.security.channel_options,
            )
    assert len(await history(a)) == 3


async def test_a_reader_dialed_gets_nothing_in(reader_mesh: tuple[Node, str, Node]) -> None:
    """The role holds whoever dials: a member that dials a reader (a static peer, a
    watch-back, a plain `sync` to its address) takes nothing from it. An honest reader
    offers nothing; one that offers anyway (a modified node: here its own role patched
    to member) is refused by the member, which reads the role from the certificate the
    reader served with, and nothing is stored."""
    a, _address, c = reader_mesh
    await write(a, chain(3, "a"))
    c_server = c.server()
    c_address = await c_server.start("127.0.0.1:0")
    try:
        [pulled] = await c.sync(_address, ["ledger"])
        assert pulled.entries_received == 3
        await write(c, chain(2, "c", (await history(a))[-1]["id"]))
        [report] = await a.sync(c_address, ["ledger"])  # an honest reader offers nothing
        assert report.entries_received == 0
        assert len(await history(a)) == 3
        c.parts = replace(c.parts, security=replace(c.security, role=MeshRole.MEMBER))
        with pytest.raises(PermissionDenied, match="has role 'reader', which may not write"):
            await a.sync(c_address, ["ledger"])
        assert len(await history(a)) == 3
    finally:
        await c_server.stop(0)
