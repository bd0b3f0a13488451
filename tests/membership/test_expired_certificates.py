"""A certificate that expires ends its holder's calls, not only its new connections
(docs/security.md, "CI credentials and ephemeral runners"; decision 0131).

TLS checks a certificate's dates once, in the handshake. A CI runner's certificate lives
``--job-ttl``; a runner that keeps its connection open (a Watch call, keepalive pings)
used to go on opening sessions and watches on it after its certificate had expired, for
as long as it liked. Here the CA holder's real ``serve`` is called by a runner whose
certificate the mesh CA signed valid for a few seconds (as a credential signs one for
``--job-ttl``, whose floor of one minute would make the test slow), over one channel
opened while it was valid.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from lifeline.errors import NotAuthenticated
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.authz import MeshAuthorizer
from lifeline_mesh.membership.ca import MeshCA, make_csr
from lifeline_mesh.membership.certs import TARGET_NAME, CertIdentity
from lifeline_mesh.membership.tls import channel_credentials
from lifeline_mesh.transport.announce import WATCH_METHOD
from lifeline_mesh.transport.authz import Access, MeshRole
from lifeline_mesh.transport.channels import METHOD
from lifeline_mesh.wire import sync_pb2 as pb
from tests.support.mesh_procs import ca_serving, cli, join_mesh, shared_node

pytestmark = pytest.mark.slow

CALL_S = 30.0
LIFE_S = 4.0  # the runner certificate's life left when the test starts


def _short_certificate(ca: Path, runner: Path) -> dt.datetime:
    """Give ``runner`` a certificate of the mesh CA for its own TLS key, of a CI credential,
    expiring in ``LIFE_S`` seconds; returns when it expires."""
    home = NodeHome(runner)
    key = serialization.load_pem_private_key(home.tls_key_path.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    node_id = cli("lifeline_mesh", runner, "id").stdout.strip()
    now = dt.datetime.now(dt.UTC)
    expires = now + dt.timedelta(seconds=LIFE_S)
    cert = MeshCA.load(NodeHome(ca)).issue(
        make_csr(key, node_id), node_id, MeshRole.READER, now, expires, "nightly"
    )
    home.tls_cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return x509.load_pem_x509_certificate(home.tls_cert_path.read_bytes()).not_valid_after_utc


@asynccontextmanager
async def _channel(address: str, caller: Path) -> AsyncIterator[grpc.aio.Channel]:
    options: list[tuple[str, Any]] = [("grpc.ssl_target_name_override", TARGET_NAME)]
    credentials = channel_credentials(NodeHome(caller))
    async with grpc.aio.secure_channel(address, credentials, options=options) as channel:
        yield channel


async def _watch(channel: grpc.aio.Channel) -> pb.LineChange | grpc.aio.AioRpcError:
    call = channel.unary_stream(
        WATCH_METHOD,
        request_serializer=pb.WatchRequest.SerializeToString,
        response_deserializer=pb.LineChange.FromString,
    )(pb.WatchRequest())
    try:
        async with asyncio.timeout(CALL_S):
            first: pb.LineChange = await call.read()
            return first
    except grpc.aio.AioRpcError as exc:
        return exc
    finally:
        call.cancel()


HELLO = pb.Hello(
    protocol_version=1, line="ledger", sets=["entries"], max_frame_bytes=1 << 20, max_items=100
)


async def _say_hello(channel: grpc.aio.Channel) -> tuple[Any, pb.Frame]:
    """A Sync stream with its hello and empty first turn sent: the call and the node's first
    answer (its hello, when admitted)."""
    call = channel.stream_stream(
        METHOD,
        request_serializer=pb.Frame.SerializeToString,
        response_deserializer=pb.Frame.FromString,
    )()
    try:
        async with asyncio.timeout(CALL_S):
            await call.write(pb.Frame(hello=HELLO))
            await call.write(pb.Frame(end_of_turn=pb.EndOfTurn()))
            answer: pb.Frame = await call.read()
    except BaseException:
        call.cancel()
        raise
    return call, answer


async def _session(channel: grpc.aio.Channel) -> pb.Frame | grpc.aio.AioRpcError:
    """A Sync stream's hello and empty first turn: the node's hello, or its refusal."""
    try:
        call, answer = await _say_hello(channel)
    except grpc.aio.AioRpcError as exc:
        return exc
    call.cancel()
    return answer


async def _open_session(channel: grpc.aio.Channel) -> Any:
    """A Sync stream past its hello: the call, once the node's hello has come back."""
    call, answer = await _say_hello(channel)
    assert answer.WhichOneof("body") == "hello", answer
    return call


async def _next_turn(call: Any) -> str:
    """Send one more (empty) turn on a running session; what ends it: the reason of the
    node's Abort, or its status."""
    try:
        async with asyncio.timeout(CALL_S):
            await call.write(pb.Frame(end_of_turn=pb.EndOfTurn()))
            while True:
                frame = await call.read()
                if frame is grpc.aio.EOF:
                    return "end of stream"
                if frame.WhichOneof("body") in ("abort", "fin"):
                    return f"{frame.WhichOneof('body')}: {frame}"
    except grpc.aio.AioRpcError as exc:
        return f"{exc.code().name}: {exc.details()}"
    except TimeoutError:
        return f"no answer in {CALL_S:g} s"
    finally:
        call.cancel()


def test_an_expired_runner_s_open_connection_is_refused_new_calls(tmp_path: Path) -> None:
    ca, runner = tmp_path / "ca", tmp_path / "runner"
    for root in (ca, runner):
        shared_node(root)
    join_mesh(ca, [runner], roles=["reader"])
    log = tmp_path / "serve.log"
    with ca_serving(ca, log) as address:
        expires = _short_certificate(ca, runner)
        before, after, session, running = asyncio.run(_calls(address, runner, expires))
    assert isinstance(before, pb.LineChange) and before.initial, before  # valid: served
    # Expired: the same connection's next calls are refused, naming the expiry
    assert isinstance(after, grpc.aio.AioRpcError), after
    assert after.code() is grpc.StatusCode.UNAUTHENTICATED, after
    assert "expired at" in (after.details() or ""), after.details()
    assert isinstance(session, grpc.aio.AioRpcError), session
    assert session.code() is grpc.StatusCode.UNAUTHENTICATED, session
    # A session opened while it held is refused at its next frame (was: went on to its end)
    assert running.startswith("abort: ") and "expired at" in running, running
    assert log.stat().st_size < 16 * 1024, log.read_text()[-3000:]


async def _calls(address: str, runner: Path, expires: dt.datetime) -> tuple[Any, Any, Any, str]:
    async with _channel(address, runner) as channel:
        before = await _watch(channel)  # the connection is made while the certificate holds
        running = await _open_session(channel)
        left = (expires - dt.datetime.now(dt.UTC)).total_seconds()
        assert left > 0, "the certificate expired before the first call: raise LIFE_S"
        await asyncio.sleep(left + 1.0)  # the certificate's own clock, not a synchronisation
        assert channel.get_state() is grpc.ChannelConnectivity.READY  # still the same one
        after, session = await _watch(channel), await _session(channel)
        ended = await _next_turn(running)
    async with _channel(address, runner) as fresh:  # a new connection: TLS refuses it
        assert isinstance(await _watch(fresh), grpc.aio.AioRpcError)
    return before, after, session, ended


def test_the_authorizer_reads_expiry_on_its_own_clock(tmp_path: Path) -> None:
    root = tmp_path / "ca"
    shared_node(root)
    mesh_id = json.loads(cli("lifeline_mesh", root, "init", "--new-mesh", "t", "--json").stdout)[
        "mesh_id"
    ]
    node_id = cli("lifeline_mesh", root, "id").stdout.strip()
    expires = dt.datetime(2026, 12, 6, 18, 0, tzinfo=dt.UTC)
    now = [expires - dt.timedelta(seconds=1)]
    auth = MeshAuthorizer(NodeHome(root), mesh_id, clock=lambda: now[0])
    runner = CertIdentity(node_id, mesh_id, MeshRole.READER, credential="ci", expires=expires)
    assert auth.check(runner, Access.READ).node_id == node_id
    now[0] = expires  # not valid after: the last second it holds is the one before
    with pytest.raises(NotAuthenticated, match=r"certificate expired at 2026-12-06T18:00:00"):
        auth.check(runner, Access.READ)
    assert auth.check(replace(runner, expires=None), Access.READ)  # made by hand: no expiry
