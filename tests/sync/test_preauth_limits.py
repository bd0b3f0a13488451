"""The bounds a peer meets before its session starts, with the constants shrunk: the hello
deadline on a real grpc.aio server (127.0.0.1, port 0), the kept failures and the quiet
log, and the caps on every repeated field of a frame (docs/security.md, "Unauthenticated
network peer"; the attacks themselves run against a real serve in
tests/membership/test_preauth_attacks.py)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import grpc
import pytest

from lifeline.errors import RemoteProtocolError
from lifeline_mesh.recon.frames import Bound, Mode, Range
from lifeline_mesh.transport.refusals import FailureRing, QuietLog, cut, quote
from lifeline_mesh.wire import sync_pb2 as pb
from lifeline_mesh.wire import sync_pb2_grpc as stubs
from lifeline_mesh.wire.codec import MAX_HELLO_SETS, MAX_ITEMS_PER_FRAME, decode_bytes
from lifeline_mesh.wire.packed import pack_ranges, unpack_ranges
from tests.support.sync_helpers import make_node, serving

grpc_stubs: Any = stubs  # generated code carries no annotations


async def test_a_stream_without_its_hello_is_ended_at_the_deadline(tmp_path: Path) -> None:
    node = make_node(tmp_path / "a")
    async with serving(node) as (server, address):
        server.hello_timeout = 0.3
        async with grpc.aio.insecure_channel(address) as channel:
            call = grpc_stubs.MeshStub(channel).Sync()
            async with asyncio.timeout(10):
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await call.read()
        assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "no hello within 0.3s" in (info.value.details() or "")
        assert server.waiting_hellos == 0 and server.failures.total == 1


async def test_a_refused_stream_that_stalls_after_its_hello_is_ended(tmp_path: Path) -> None:
    """A refused caller's opening turn is read before the refusal, but not forever: a
    hello for a line not shared here, then nothing, ends within the deadline."""
    node = make_node(tmp_path / "a")
    hello = pb.Frame(hello=pb.Hello(protocol_version=1, line="private", max_frame_bytes=1 << 20))
    async with serving(node) as (server, address):
        server.hello_timeout = 0.3
        async with grpc.aio.insecure_channel(address) as channel:
            call = grpc_stubs.MeshStub(channel).Sync()
            await call.write(hello)
            async with asyncio.timeout(10):
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await call.read()
        assert info.value.code() is grpc.StatusCode.PERMISSION_DENIED
        assert "'private' is not shared" in (info.value.details() or "")
        assert server.waiting_hellos == 0


def test_failures_keep_the_last_reasons_cut_and_count_all() -> None:
    ring = FailureRing(kept=3)
    for n in range(10):
        ring.append(f"reason {n} " + "x" * (10_000 if n == 9 else 0))
    assert ring.total == 10 and len(ring) == 3
    assert ring[:2] == ["reason 7 ", "reason 8 "]
    assert len(ring[-1]) < 400 and ring[-1].endswith("(10009 characters)")
    assert cut("short") == "short" and quote("y" * 100).endswith("(100 characters)")


def test_the_log_says_each_peer_once_a_window_and_counts_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    quiet = QuietLog(logging.getLogger("test.quiet"), window=60, lines=3, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="test.quiet"):
        for _ in range(100):
            quiet.warning("ipv4:10.0.0.1", "refused %s", "z" * 5000)
        for n in range(10):  # many peers: at most `lines` lines a window in all
            quiet.warning(f"ipv4:10.0.0.{n + 2}", "refused %d", n)
        assert len(caplog.records) == 3 and quiet.quiet == 107
        assert len(caplog.records[0].getMessage()) < 400
        now[0] = 61.0
        quiet.warning("ipv4:10.0.0.1", "refused again")
    assert "107 more refused or failed calls" in caplog.records[3].getMessage()
    assert caplog.records[4].getMessage() == "refused again"


def _frame(**body: object) -> bytes:
    return pb.Frame(**body).SerializeToString()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("hello", "words"),
    [
        (pb.Hello(line="ledger", sets=["s"] * (MAX_HELLO_SETS + 1)), "17 sets (cap 16)"),
        (pb.Hello(line="l" * 65), "a line of 65 characters"),
        (pb.Hello(line="ledger", sets=["a" * 65]), "sets of 65 characters"),
        (pb.Hello(line="ledger", capabilities=["c"] * 65), "65 capabilities (cap 64)"),
        (pb.Hello(line="ledger", sets=["a"], summaries=[b"x", b"y"]), "2 set summaries"),
    ],
)
def test_a_hello_over_a_cap_is_refused_before_it_is_built(hello: pb.Hello, words: str) -> None:
    with pytest.raises(RemoteProtocolError, match=words.replace("(", r"\(").replace(")", r"\)")):
        decode_bytes(_frame(hello=hello))


def test_frames_over_a_count_cap_are_refused() -> None:
    too_many = pb.Items(items=[b""] * (MAX_ITEMS_PER_FRAME + 1))
    with pytest.raises(RemoteProtocolError, match="65537 items"):
        decode_bytes(_frame(items=too_many))
    ranges = tuple(Range(Bound(h, b""), Mode.SKIP, b"", 0, b"") for h in range(1, 4))
    packed = pack_ranges((*ranges, Range(None, Mode.SKIP, b"", 0, b"")), 8, 6)
    assert len(unpack_ranges(packed)[0]) == 4
    with pytest.raises(RemoteProtocolError, match="more than 2 in one frame"):
        unpack_ranges(packed, 2)
