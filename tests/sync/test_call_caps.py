"""The caps on sessions running at once, with the constants shrunk, on a real grpc.aio
server (127.0.0.1, port 0): a session past them is refused busy (RESOURCE_EXHAUSTED) and
the caller hears Busy, not a size limit; a slot is given back when its session ends
(docs/security.md, "What an admitted caller can hold"; the flood itself runs against a
real serve in tests/mesh/test_admitted_floods.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from lifeline.errors import Busy, PeerError, RemoteProtocolError
from lifeline_mesh.transport.call_caps import CallGate
from lifeline_mesh.transport.channels import METHOD
from lifeline_mesh.transport.errors import error_from_rpc
from lifeline_mesh.wire import sync_pb2 as pb
from tests.support.sync_helpers import make_node, serving

HELLO = pb.Frame(
    hello=pb.Hello(protocol_version=1, line="ledger", sets=["entries"], max_frame_bytes=1 << 20)
).SerializeToString()
END_OF_TURN = pb.Frame(end_of_turn=pb.EndOfTurn()).SerializeToString()


async def _open(address: str) -> tuple[grpc.aio.Channel, object]:
    """A session of its own connection (another caller without TLS): its first answer."""
    channel = grpc.aio.insecure_channel(address)
    call = channel.stream_stream(METHOD)()
    await call.write(HELLO)
    await call.write(END_OF_TURN)
    try:
        async with asyncio.timeout(10):
            first = pb.Frame.FromString(await call.read())
    except grpc.aio.AioRpcError as exc:
        await channel.close()
        return channel, exc
    return channel, first


async def test_sessions_past_the_node_s_cap_are_refused_busy(tmp_path: Path) -> None:
    node = make_node(tmp_path / "a")
    async with serving(node) as (server, address):
        server.sessions.total = 2
        opened = [await _open(address) for _ in range(3)]
        assert [type(answer).__name__ for _, answer in opened[:2]] == ["Frame", "Frame"]
        refused = opened[2][1]
        assert isinstance(refused, grpc.aio.AioRpcError)
        assert refused.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert (refused.details() or "").startswith("busy: 2 sessions are running")
        assert "cap MAX_SESSIONS = 2" in (refused.details() or "")
        mapped = error_from_rpc(refused, address)
        assert isinstance(mapped, Busy) and "is busy" in str(mapped)
        assert server.sessions.running == 2
        await opened[0][0].close()  # its session ends: the slot is given back
        async with asyncio.timeout(10):
            while server.sessions.running == 2:
                await asyncio.sleep(0.01)
        again, answer = await _open(address)
        assert isinstance(answer, pb.Frame) and answer.WhichOneof("body") == "hello"
        for channel in (again, opened[1][0]):
            await channel.close()


async def test_a_busy_node_is_told_to_the_syncing_node(tmp_path: Path) -> None:
    a, b = make_node(tmp_path / "a"), make_node(tmp_path / "b")
    async with serving(a) as (server, address):
        server.sessions.total = 0
        with pytest.raises(Busy, match=r"is busy: .*cap MAX_SESSIONS = 0"):
            await b.sync(address, ["ledger"])
        assert server.sessions.running == 0 and server.failures.total == 1


def test_a_caller_s_cap_is_its_own() -> None:
    gate = CallGate("sessions", 3, 2, ("TOTAL", "MINE"))
    gate.enter("a")
    gate.enter("a")
    with pytest.raises(Busy, match=r"this caller already has 2 sessions .*cap MINE = 2"):
        gate.enter("a")
    with gate.held("b"), pytest.raises(Busy, match=r"3 sessions are running .*cap TOTAL = 3"):
        gate.enter("c")
    gate.leave("a")
    gate.enter("c")
    assert gate.running == 2 and gate.callers() == 2 and gate.refused == 2


def test_a_message_over_a_size_cap_is_no_busy_node() -> None:
    exhausted = grpc.aio.AioRpcError(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.aio.Metadata(),
        grpc.aio.Metadata(),
        "Received message larger than max (9000000 vs. 8392704)",
    )
    assert isinstance(error_from_rpc(exhausted, "peer:1"), RemoteProtocolError)


def test_a_write_the_peer_had_closed_is_told_as_such() -> None:
    """gRPC's client fails a write racing the peer's refusal as INTERNAL "Internal error
    from Core", losing the peer's status: the user hears that, not a failed call."""
    lost = grpc.aio.AioRpcError(
        grpc.StatusCode.INTERNAL,
        grpc.aio.Metadata(),
        grpc.aio.Metadata(),
        "Internal error from Core",
    )
    said = error_from_rpc(lost, "peer:1")
    assert isinstance(said, PeerError) and not isinstance(said, RemoteProtocolError)
    assert "ended the call before it read what we sent" in str(said)
    assert "try again" in str(said)
    other = grpc.aio.AioRpcError(
        grpc.StatusCode.INTERNAL, grpc.aio.Metadata(), grpc.aio.Metadata(), "boom"
    )
    assert "failed the call (INTERNAL): boom" in str(error_from_rpc(other, "peer:1"))
