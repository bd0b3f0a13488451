"""Watch calls an admitted caller can hold (docs/security.md, "What an admitted caller can
hold", decision 0130).

A real ``lifeline-mesh serve`` over mutual TLS (the CA holder), and a reader of its mesh
that opens Watch calls through the generated stubs of ``lifeline_mesh/wire/`` and never
ends them. Each accepted call holds a subscription for as long as its caller keeps it
open; before the cap one reader held 10,000 of them (+290 MB) and nothing refused more.
The node-wide cap is checked on a real grpc.aio server with the constant shrunk.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest

from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.certs import TARGET_NAME
from lifeline_mesh.membership.tls import channel_credentials
from lifeline_mesh.peering.changes import ChangeFeed
from lifeline_mesh.transport.announce import MAX_WATCHES_PER_CALLER, WATCH_METHOD
from lifeline_mesh.transport.server import SyncServer
from lifeline_mesh.wire import sync_pb2 as pb
from tests.support.mesh_procs import ca_serving, cli, join_mesh, shared_node
from tests.support.sync_helpers import make_node

pytestmark = pytest.mark.slow

CALL_S = 30.0  # an answer must come within this; a hanging call fails the test


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    base = tmp_path_factory.mktemp("watches")
    ca, reader, member = base / "ca", base / "reader", base / "member"
    for root in (ca, reader, member):
        shared_node(root)
    join_mesh(ca, [reader, member], roles=["reader", "member"])
    return ca, reader, member


@asynccontextmanager
async def _channel(address: str, caller: Path | None, n: int) -> AsyncIterator[grpc.aio.Channel]:
    options: list[tuple[str, Any]] = [("grpc.channel_id", n)]  # a connection of its own
    if caller is None:
        channel = grpc.aio.insecure_channel(address, options=options)
    else:
        options.append(("grpc.ssl_target_name_override", TARGET_NAME))
        credentials = channel_credentials(NodeHome(caller))
        channel = grpc.aio.secure_channel(address, credentials, options=options)
    async with channel:
        yield channel


async def _watch(channel: grpc.aio.Channel) -> tuple[Any, pb.LineChange | grpc.aio.AioRpcError]:
    """A Watch call that asks for rows and is never read past its first announcement: the
    call, and that announcement or the error the node refused it with."""
    call = channel.unary_stream(
        WATCH_METHOD,
        request_serializer=pb.WatchRequest.SerializeToString,
        response_deserializer=pb.LineChange.FromString,
    )(pb.WatchRequest(items=True))
    try:
        async with asyncio.timeout(CALL_S):
            first: pb.LineChange = await call.read()
    except grpc.aio.AioRpcError as exc:
        return call, exc
    return call, first


def _split(answers: list[tuple[Any, Any]]) -> tuple[list[Any], list[grpc.aio.AioRpcError]]:
    accepted = [call for call, a in answers if isinstance(a, pb.LineChange) and a.initial]
    refused = [a for _, a in answers if isinstance(a, grpc.aio.AioRpcError)]
    assert len(accepted) + len(refused) == len(answers), answers[:3]
    return accepted, refused


async def test_a_reader_s_watch_calls_are_capped_and_a_member_still_watches(
    mesh: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """400 Watch calls from one reader over four connections: 8 are accepted, the rest are
    refused at once as busy; a member's call is accepted meanwhile and the member syncs;
    once the reader's calls end it may watch again. Was: all 400 accepted."""
    ca, reader, member = mesh
    log = tmp_path / "serve.log"
    with ca_serving(ca, log) as address:
        async with AsyncExitStack() as stack:
            channels = [
                await stack.enter_async_context(_channel(address, reader, n)) for n in range(4)
            ]
            answers = await asyncio.gather(*(_watch(channels[n % 4]) for n in range(400)))
            accepted, refused = _split(answers)
            mine = await stack.enter_async_context(_channel(address, member, 9))
            member_call, member_first = await _watch(mine)
            synced = await asyncio.to_thread(
                cli, "lifeline_mesh", member, "sync", address, check=False
            )
            for call in accepted:
                call.cancel()
            member_call.cancel()
            again = await _released(channels[0])
    assert len(accepted) == MAX_WATCHES_PER_CALLER, [e.details() for e in refused[:3]]
    assert {e.code() for e in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
    assert all((e.details() or "").startswith("busy: ") for e in refused), refused[0].details()
    assert "MAX_WATCHES_PER_CALLER" in (refused[0].details() or ""), refused[0].details()
    assert isinstance(member_first, pb.LineChange) and member_first.initial, member_first
    assert synced.returncode == 0, synced.stderr
    assert again, "the reader's ended calls were still counted"
    assert log.stat().st_size < 16 * 1024, log.read_text()[-3000:]


async def _released(channel: grpc.aio.Channel) -> bool:
    """Whether a new call is accepted once the caller's others have ended (the node hears
    of a cancelled call a moment later)."""
    async with asyncio.timeout(CALL_S):
        while True:
            call, answer = await _watch(channel)
            call.cancel()
            if isinstance(answer, pb.LineChange):
                return True
            assert answer.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, answer
            await asyncio.sleep(0.05)


async def test_watch_calls_on_the_node_are_capped(tmp_path: Path) -> None:
    """With the node's cap shrunk to 10, three callers of 4 calls each (plain text on
    loopback: each connection is a caller): 10 accepted, 2 refused naming MAX_WATCHES."""
    node = make_node(tmp_path / "a")
    feed = ChangeFeed(lambda: node.config().shared_lines)
    server = SyncServer(node.session, node.is_shared, announcements=feed)
    assert server.watch is not None
    server.watch.open.total = 10
    address = await server.start("127.0.0.1:0")
    try:
        async with AsyncExitStack() as stack:
            channels = [
                await stack.enter_async_context(_channel(address, None, n)) for n in range(3)
            ]
            answers = []
            for channel in channels:
                answers += [await _watch(channel) for _ in range(4)]
            accepted, refused = _split(answers)
            for call in accepted:
                call.cancel()
    finally:
        await server.stop(0)
    assert len(accepted) == 10 and len(refused) == 2, [e.details() for e in refused]
    assert all("MAX_WATCHES = 10" in (e.details() or "") for e in refused), refused[0].details()
