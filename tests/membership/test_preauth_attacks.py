"""Before authentication a peer costs a node almost nothing (docs/security.md,
"Unauthenticated network peer").

Each test attacks a real ``lifeline-mesh serve`` on 127.0.0.1 with frames crafted through
the generated stubs of ``lifeline_mesh/wire/``: through the join port (no client
certificate), as a revoked node on the mutual-TLS port, and on a plain-text loopback node
(where every caller is let in, the stand-in for an admitted reader). The serve's log goes
to a file the tests measure; its memory is read from /proc.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest

from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.certs import TARGET_NAME
from lifeline_mesh.membership.tls import channel_credentials
from lifeline_mesh.transport.server import MAX_WAITING_HELLOS, MAX_WAITING_HELLOS_PER_CALLER
from lifeline_mesh.wire import sync_pb2 as pb
from lifeline_mesh.wire import sync_pb2_grpc as stubs
from tests.support.mesh_procs import cli, join_mesh, serve_insecure, shared_node, start_ca_serve

grpc_stubs: Any = stubs  # generated code carries no annotations

pytestmark = pytest.mark.slow

MiB = 1 << 20
CALL_S = 30.0  # an answer must come within this; a hanging call fails the test


def _rss_mb(pid: int) -> float:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmRSS:"):
            return int(row.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@contextmanager
def _ca_serving(root: Path, log: Path) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    with log.open("w") as out:
        proc, sync, join = start_ca_serve(root, stderr=out.fileno())
    try:
        yield proc, sync, join
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


@asynccontextmanager
async def _channel(
    address: str, credentials: grpc.ChannelCredentials | None
) -> AsyncIterator[grpc.aio.Channel]:
    options: list[tuple[str, Any]] = [("grpc.max_send_message_length", 16 * MiB)]
    if credentials is None:
        channel = grpc.aio.insecure_channel(address, options=options)
    else:
        options.append(("grpc.ssl_target_name_override", TARGET_NAME))
        channel = grpc.aio.secure_channel(address, credentials, options=options)
    async with channel:
        yield channel


def _anonymous(ca_root: Path) -> grpc.ChannelCredentials:
    """A caller with no certificate, trusting the mesh CA (anyone can fetch it)."""
    return grpc.ssl_channel_credentials(
        root_certificates=NodeHome(ca_root).ca_cert_path.read_bytes()
    )


def _hello(line: str, sets: list[str] | None = None) -> pb.Frame:
    return pb.Frame(
        hello=pb.Hello(
            protocol_version=1,
            line=line,
            sets=sets if sets is not None else ["attestations", "statements", "entries"],
            max_frame_bytes=MiB,
            max_items=1000,
        )
    )


async def _refusal(channel: grpc.aio.Channel, *frames: pb.Frame) -> grpc.aio.AioRpcError:
    """Send ``frames`` on a Sync stream; the error the server ended it with."""
    call = grpc_stubs.MeshStub(channel).Sync()
    try:
        async with asyncio.timeout(CALL_S):
            for frame in frames:
                await call.write(frame)
            await call.done_writing()
            while await call.read() is not grpc.aio.EOF:
                pass
    except grpc.aio.AioRpcError as exc:
        return exc
    finally:
        call.cancel()
    raise AssertionError("the server accepted the stream")


async def _watch_answer(channel: grpc.aio.Channel) -> pb.LineChange | grpc.aio.AioRpcError:
    call = grpc_stubs.MeshStub(channel).Watch(pb.WatchRequest())
    try:
        async with asyncio.timeout(CALL_S):
            answer: pb.LineChange | grpc.aio.AioRpcError = await call.read()
            return answer
    except grpc.aio.AioRpcError as exc:
        return exc
    finally:
        call.cancel()


@pytest.fixture(scope="module")
def ca_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ca")
    cli("lifeline", root, "init")
    cli("lifeline_mesh", root, "init", "--new-mesh", "team")
    cli("lifeline_mesh", root, "share", "ledger")
    return root


async def test_oversized_hellos_at_the_join_port_leave_no_trace(
    ca_root: Path, tmp_path: Path
) -> None:
    log = tmp_path / "serve.log"
    with _ca_serving(ca_root, log) as (proc, _, join):
        before = _rss_mb(proc.pid)
        async with _channel(join, _anonymous(ca_root)) as channel:
            for _ in range(40):
                refused = await _refusal(channel, _hello("x" * MiB))
                assert refused.code() is not grpc.StatusCode.OK
                assert len(refused.details() or "") < 1000
        grown = _rss_mb(proc.pid) - before
    assert log.stat().st_size < 64 * 1024, log.stat().st_size  # was 40 MiB: each line logged
    assert grown < 60, f"RSS grew {grown:.0f} MB"


async def test_the_join_port_serves_no_sync_stream_and_no_watch(
    ca_root: Path, tmp_path: Path
) -> None:
    with _ca_serving(ca_root, tmp_path / "serve.log") as (_, _, join):
        async with _channel(join, _anonymous(ca_root)) as channel:
            # A stream that never sends its hello is answered at once, not held open
            silent = grpc_stubs.MeshStub(channel).Sync()
            async with asyncio.timeout(CALL_S):
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await silent.read()
            assert info.value.code() is grpc.StatusCode.UNIMPLEMENTED
            # A watch naming no line, without a certificate: refused as every method but Join
            answer = await _watch_answer(channel)
            assert isinstance(answer, grpc.aio.AioRpcError), answer
            assert answer.code() is grpc.StatusCode.UNIMPLEMENTED


def test_a_revoked_node_learns_nothing_of_the_lines(tmp_path: Path) -> None:
    ca, rogue = tmp_path / "ca", tmp_path / "rogue"
    shared_node(ca)
    shared_node(rogue)
    join_mesh(ca, [rogue])
    rogue_id = cli("lifeline_mesh", rogue, "id").stdout.strip()
    cli("lifeline_mesh", ca, "revoke", rogue_id, "--reason", "laptop stolen")
    log = tmp_path / "serve.log"
    with _ca_serving(ca, log) as (_, sync, _):
        shared, unshared, watch = asyncio.run(_as_revoked(rogue, sync))
    # The same answer whether the line is shared or not
    assert shared.code() is unshared.code() is grpc.StatusCode.PERMISSION_DENIED
    assert shared.details() == unshared.details(), (shared.details(), unshared.details())
    assert "revoked" in (shared.details() or "")
    # A watch naming no line is refused too
    assert isinstance(watch, grpc.aio.AioRpcError), watch
    assert watch.code() is grpc.StatusCode.PERMISSION_DENIED
    assert log.stat().st_size < 16 * 1024


async def _as_revoked(
    rogue: Path, sync: str
) -> tuple[grpc.aio.AioRpcError, grpc.aio.AioRpcError, pb.LineChange | grpc.aio.AioRpcError]:
    async with _channel(sync, channel_credentials(NodeHome(rogue))) as channel:
        shared = await _refusal(channel, _hello("ledger"))
        unshared = await _refusal(channel, _hello("no-such-line"))
        for _ in range(20):  # refused again and again: logged once
            await _refusal(channel, _hello("y" * MiB))
        return shared, unshared, await _watch_answer(channel)


async def test_a_hello_naming_700k_sets_is_refused_before_it_is_built(tmp_path: Path) -> None:
    root = tmp_path / "node"
    shared_node(root)
    with serve_insecure(root) as (proc, address):
        before = _rss_mb(proc.pid)
        async with _channel(address, None) as channel:
            sets = [f"s{n}" for n in range(700_000)]  # about 6 MB
            refused = await _refusal(channel, _hello("ledger", sets))
        grown = _rss_mb(proc.pid) - before
    assert refused.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "cap 16" in (refused.details() or ""), refused.details()
    assert grown < 150, f"RSS grew {grown:.0f} MB"


async def test_streams_without_a_hello_are_capped(tmp_path: Path) -> None:
    root = tmp_path / "node"
    shared_node(root)
    opened = MAX_WAITING_HELLOS + 100
    with serve_insecure(root) as (_, address):
        async with _channel(address, None) as channel:
            stub = grpc_stubs.MeshStub(channel)
            calls = [stub.Sync() for _ in range(opened)]
            answers = await asyncio.gather(*(_answer(call) for call in calls))
            for call in calls:
                call.cancel()
    busy = [a for a in answers if a is not None and "busy" in a]
    waiting = answers.count(None)
    assert waiting <= MAX_WAITING_HELLOS and len(busy) >= opened - MAX_WAITING_HELLOS, (
        waiting,
        answers[:3],
    )


async def _answer(call: Any) -> str | None:
    """The refusal a silent stream got within a few seconds; None: still waiting."""
    try:
        async with asyncio.timeout(5):
            await call.read()
    except TimeoutError:
        return None
    except grpc.aio.AioRpcError as exc:
        return exc.details() or ""
    return "answered"


def test_a_revoked_node_cannot_hold_the_waiting_hellos(tmp_path: Path) -> None:
    """Its streams are refused only once their hello arrives, so 260 silent ones held all
    256 slots for streams waiting for a hello and every member's sync got Busy. Now one
    certificate holds at most MAX_WAITING_HELLOS_PER_CALLER of them, and a member syncs."""
    ca, rogue, member = tmp_path / "ca", tmp_path / "rogue", tmp_path / "member"
    for root in (ca, rogue, member):
        shared_node(root)
    join_mesh(ca, [rogue, member])
    cli("lifeline_mesh", ca, "revoke", cli("lifeline_mesh", rogue, "id").stdout.strip())
    with _ca_serving(ca, tmp_path / "serve.log") as (_, sync, _):
        answers = asyncio.run(_silent_streams(rogue, sync, 40, member))
    waiting, busy, synced = answers
    assert waiting <= MAX_WAITING_HELLOS_PER_CALLER, answers
    assert busy >= 40 - MAX_WAITING_HELLOS_PER_CALLER, answers
    assert synced.returncode == 0, synced.stderr


async def _silent_streams(
    rogue: Path, sync: str, n: int, member: Path
) -> tuple[int, int, subprocess.CompletedProcess[str]]:
    """``n`` streams from ``rogue`` that send nothing, and while they are open a sync by
    ``member``: (streams still waiting, streams refused as busy, the member's sync)."""
    async with _channel(sync, channel_credentials(NodeHome(rogue))) as channel:
        stub = grpc_stubs.MeshStub(channel)
        calls = [stub.Sync() for _ in range(n)]
        answers = await asyncio.gather(*(_answer(call) for call in calls))
        synced = await asyncio.to_thread(cli, "lifeline_mesh", member, "sync", sync, check=False)
        for call in calls:
            call.cancel()
    busy = [a for a in answers if a is not None and "busy" in a]
    return answers.count(None), len(busy), synced
