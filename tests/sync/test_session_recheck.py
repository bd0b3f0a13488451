"""A session's caller is authorized again as its frames arrive (decision 0131): a node
revoked, or a certificate that expires, while its session runs is refused at its next
frame, with the authorizer's reason, instead of being served to the session's end. Here on
a real grpc.aio server (127.0.0.1, port 0) whose authorizer starts refusing mid-session;
tests/membership/test_expired_certificates.py runs the expiry against a real `serve`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from lifeline.errors import PermissionDenied
from lifeline_mesh.transport import channels
from lifeline_mesh.transport.authz import Access, PeerIdentity
from lifeline_mesh.transport.channels import METHOD
from lifeline_mesh.wire import sync_pb2 as pb
from tests.support.sync_helpers import make_node, serving

HELLO = pb.Frame(
    hello=pb.Hello(protocol_version=1, line="ledger", sets=["entries"], max_frame_bytes=1 << 20)
).SerializeToString()
END_OF_TURN = pb.Frame(end_of_turn=pb.EndOfTurn()).SerializeToString()


class _RevokedLater:
    """Lets every caller in until ``revoked`` is set, then refuses it as revoked."""

    def __init__(self) -> None:
        self.revoked = False

    async def authenticate(self, peer: PeerIdentity) -> None:
        await self.authorize(peer, "", Access.READ)

    async def authorize(self, peer: PeerIdentity, line: str, access: Access) -> None:
        if self.revoked:
            raise PermissionDenied("node n was revoked at 2026-12-06T20:00:00Z; it may not connect")


async def test_a_caller_refused_mid_session_is_refused_at_its_next_frame(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(channels, "RECHECK_S", 0.0)  # at every frame
    node = make_node(tmp_path / "a")
    async with serving(node) as (server, address):
        authorizer = _RevokedLater()
        server._authorizer = authorizer
        async with grpc.aio.insecure_channel(address) as channel:
            call = channel.stream_stream(METHOD)()
            async with asyncio.timeout(30):
                await call.write(HELLO)
                await call.write(END_OF_TURN)
                first = pb.Frame.FromString(await call.read())
                assert first.WhichOneof("body") == "hello"
                authorizer.revoked = True
                await call.write(END_OF_TURN)
                frames = []
                while (data := await call.read()) is not grpc.aio.EOF:
                    frames.append(pb.Frame.FromString(data))
    aborts = [f.abort for f in frames if f.WhichOneof("body") == "abort"]
    assert aborts, frames
    assert aborts[0].code == "refused" and "was revoked at" in aborts[0].reason, aborts[0]
    assert server.sessions.running == 0
