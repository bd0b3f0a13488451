"""The Watch RPC on a real grpc.aio server (127.0.0.1, port 0): what is announced to whom,
the first announcement, heartbeats and silence, refusals, first-wave peers, shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from lifeline.errors import PeerError, PermissionDenied, Refused
from lifeline_mesh.node.root import Node
from lifeline_mesh.peering.changes import ChangeFeed
from lifeline_mesh.transport.announce import LineChange, watch_lines
from lifeline_mesh.transport.authz import Access, PeerIdentity
from lifeline_mesh.transport.server import SyncServer
from tests.support.sync_helpers import make_node, serving


class ReadOnly:
    """An authorizer that lets callers read ``lines`` only (the node's is membership)."""

    def __init__(self, *lines: str) -> None:
        self.lines = set(lines)

    async def authenticate(self, peer: PeerIdentity) -> None:
        return None

    async def authorize(self, peer: PeerIdentity, line: str, access: Access) -> None:
        if line not in self.lines or access is not Access.READ:
            raise Refused(f"{line} is not readable by {peer.address}")


@asynccontextmanager
async def _server(
    node: Node, authorizer: ReadOnly | None, feed: ChangeFeed | None
) -> AsyncIterator[tuple[SyncServer, str]]:
    server = SyncServer(node.session, node.is_shared, authorizer=authorizer, announcements=feed)
    address = await server.start("127.0.0.1:0")
    try:
        yield server, address
    finally:
        await server.stop(0)


async def _next(it: AsyncIterator[LineChange], timeout: float = 10.0) -> LineChange:
    async with asyncio.timeout(timeout):
        return await anext(it)


async def test_only_shared_lines_the_caller_may_read_are_announced(tmp_path: Path) -> None:
    node = make_node(tmp_path / "a", shared=("ledger", "team", "secret"))
    feed = ChangeFeed(lambda: node.config().shared_lines)
    async with _server(node, ReadOnly("ledger", "team", "private"), feed) as (server, address):
        calls = watch_lines(address, [])
        first = await _next(calls)
        assert first == LineChange(("ledger", "team"), initial=True)  # not "secret"
        assert len(feed) == 1 and server.watch is not None and server.watch.calls == 1
        # subscribed before the first announcement was sent: nothing published is missed
        feed.publish(["private", "secret"])  # unshared, and not readable: nothing
        feed.publish(["team"])
        assert await _next(calls) == LineChange(("team",))
        await calls.aclose()


async def test_asking_for_lines_none_of_which_is_readable_is_refused(tmp_path: Path) -> None:
    node = make_node(tmp_path / "a", shared=("ledger", "secret"))
    feed = ChangeFeed(lambda: node.config().shared_lines)
    async with _server(node, ReadOnly("ledger"), feed) as (_, address):
        with pytest.raises(PermissionDenied, match="secret"):
            await _next(watch_lines(address, ["secret"]))
        narrowed = watch_lines(address, ["ledger", "secret"])
        assert await _next(narrowed) == LineChange(("ledger",), initial=True)
        await narrowed.aclose()


async def test_a_silent_peer_is_noticed_and_a_first_wave_peer_answers_unimplemented(
    tmp_path: Path,
) -> None:
    node = make_node(tmp_path / "a")
    feed = ChangeFeed(lambda: node.config().shared_lines)
    async with _server(node, None, feed) as (_, address):
        calls = watch_lines(address, [], idle=0.3)  # heartbeats come every 20 s
        assert (await _next(calls)).initial
        with pytest.raises(PeerError, match="sent nothing on the watch"):
            await _next(calls)
    async with _server(node, None, None) as (_, address):  # no Watch: a first-wave node
        with pytest.raises(PeerError, match="unimplemented"):
            await _next(watch_lines(address, []))


async def test_stopping_the_server_ends_open_calls_at_once(tmp_path: Path) -> None:
    node = make_node(tmp_path / "a")
    feed = ChangeFeed(lambda: node.config().shared_lines)
    server = SyncServer(node.session, node.is_shared, announcements=feed)
    address = await server.start("127.0.0.1:0")
    calls = watch_lines(address, [])
    assert (await _next(calls)).initial
    started = asyncio.get_running_loop().time()
    await server.stop(grace=5.0)
    with pytest.raises(StopAsyncIteration):
        await _next(calls)  # the call ended cleanly: the caller dials again later
    assert asyncio.get_running_loop().time() - started < 2.0  # not the whole grace


async def test_a_node_served_again_announces_again(tmp_path: Path) -> None:
    node = make_node(tmp_path / "a")
    for _ in range(2):  # stopping the first server closed its feed, not the next one's
        async with serving(node) as (_, address):
            calls = watch_lines(address, [])
            assert (await _next(calls)).initial
            node.changes.publish(["ledger"])
            assert await _next(calls) == LineChange(("ledger",))
            await calls.aclose()
