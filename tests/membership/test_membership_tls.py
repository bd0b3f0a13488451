"""Membership over real TLS servers on loopback: who gets in, who is refused, and why."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography.hazmat.primitives.serialization import Encoding

from lifeline.errors import LifelineError, NotAuthenticated, PeerError, PermissionDenied
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership import files
from lifeline_mesh.membership.authz import MeshAuthorizer
from lifeline_mesh.membership.ca import MeshCA, create_mesh, make_csr, new_tls_key, pem_key
from lifeline_mesh.membership.certs import TARGET_NAME, identity_from_cert
from lifeline_mesh.membership.client import pull_membership, whoami
from lifeline_mesh.membership.invite import Token, issue_invite, parse_duration
from lifeline_mesh.membership.join import join
from lifeline_mesh.membership.registry import Registry
from lifeline_mesh.membership.revocation import RevocationList, revoke
from lifeline_mesh.membership.service import lists_digest
from lifeline_mesh.membership.tls import (
    channel_credentials,
    channel_options,
    fetch_ca_pem,
    server_credentials,
)
from lifeline_mesh.node.root import MembershipServer, serve_membership
from lifeline_mesh.transport.authz import Access, identity_of
from lifeline_mesh.transport.channels import open_channel
from lifeline_mesh.transport.errors import error_from_rpc, status_for
from lifeline_mesh.wire import membership_pb2, membership_pb2_grpc

HOUR = parse_duration("1h")


@dataclass
class Mesh:
    ca_root: Path
    server: MembershipServer
    tmp: Path

    @property
    def join_address(self) -> str:
        return f"127.0.0.1:{self.server.join_port}"

    @property
    def mtls_address(self) -> str:
        return f"127.0.0.1:{self.server.mtls_port}"

    def invite(self, role: str = "member", **kw: Any) -> str:
        return issue_invite(NodeHome(self.ca_root), role, HOUR, [self.join_address], **kw).encode()

    async def new_node(self, name: str, role: str = "member") -> Path:
        root = self.tmp / name
        root.mkdir()
        await join(NodeHome(root), self.invite(role))
        return root


@pytest.fixture
async def mesh(tmp_path: Path) -> AsyncIterator[Mesh]:
    ca_root = tmp_path / "ca"
    ca_root.mkdir()
    create_mesh(NodeHome(ca_root), "team")
    server = await serve_membership(NodeHome(ca_root))
    try:
        yield Mesh(ca_root, server, tmp_path)
    finally:
        await server.stop()


async def test_member_joins_and_makes_an_authenticated_call(mesh: Mesh) -> None:
    root = await mesh.new_node("laptop")
    home = NodeHome(root)
    for path in (home.tls_key_path, home.tls_cert_path, home.ca_cert_path, home.members_path):
        assert path.exists()
    assert NodeHome(root).tls_key_path.stat().st_mode & 0o777 == 0o600
    assert not NodeHome(root).ca_key_path.exists()  # the CA key never travels
    me = identity_from_cert(NodeHome(root).tls_cert_path.read_bytes())
    reply = await whoami(NodeHome(root), mesh.mtls_address)
    assert (reply.node_id, reply.role) == (me.node_id, "member")
    ca_node = identity_from_cert(NodeHome(mesh.ca_root).tls_cert_path.read_bytes())
    assert reply.server_node_id == ca_node.node_id
    # Pinning the expected server node id: the right one passes, a wrong one is refused.
    await whoami(NodeHome(root), mesh.mtls_address, peer_node_id=ca_node.node_id)
    with pytest.raises(NotAuthenticated, match="handshake"):
        await whoami(NodeHome(root), mesh.mtls_address, peer_node_id=me.node_id, timeout=5)


async def test_stranger_with_own_ca_is_refused_both_ways(mesh: Mesh) -> None:
    stranger = mesh.tmp / "stranger"
    stranger.mkdir()
    create_mesh(NodeHome(stranger), "evil")
    # The stranger does not trust our server: its client refuses the handshake.
    with pytest.raises(NotAuthenticated, match=r"do not trust each other \(TLS handshake failed"):
        await whoami(NodeHome(stranger), mesh.mtls_address, timeout=5)
    # Even trusting our (public) CA certificate, our server refuses its certificate.
    files.write_atomic(
        NodeHome(stranger).ca_cert_path,
        NodeHome(mesh.ca_root).ca_cert_path.read_bytes(),
    )
    with pytest.raises(NotAuthenticated, match="not a member"):
        await whoami(NodeHome(stranger), mesh.mtls_address, timeout=5)


async def test_join_port_serves_nothing_but_join(mesh: Mesh) -> None:
    root = await mesh.new_node("laptop")
    with pytest.raises(PeerError, match="unimplemented"):  # a server of its own: Join only
        await whoami(NodeHome(root), mesh.join_address, timeout=5)


async def _write_server(root: Path, mesh_id: str) -> tuple[grpc.aio.Server, int]:
    """A server with one 'write' method guarded by the authorizer, as the sync service is."""
    authorizer = MeshAuthorizer(NodeHome(root), mesh_id)

    async def put(request: bytes, context: Any) -> bytes:
        try:
            peer = authorizer.caller(identity_of(context), Access.WRITE)
        except LifelineError as exc:
            await context.abort(status_for(exc), str(exc))
        return f"{peer.node_id} {peer.mesh_id}".encode()

    handler = grpc.method_handlers_generic_handler(
        "test.Lines", {"Put": grpc.unary_unary_rpc_method_handler(put)}
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([handler])
    port = server.add_secure_port("127.0.0.1:0", server_credentials(NodeHome(root)))
    await server.start()
    return server, port


async def _put(root: Path, port: int) -> bytes:
    target = f"127.0.0.1:{port}"
    creds = channel_credentials(NodeHome(root))
    async with open_channel(target, creds, channel_options()) as channel:
        call = channel.unary_unary("/test.Lines/Put")
        try:
            result: bytes = await call(b"x", timeout=5)
        except grpc.aio.AioRpcError as exc:
            raise error_from_rpc(exc, target) from exc
    return result


async def test_reader_may_read_but_not_write(mesh: Mesh) -> None:
    reader = await mesh.new_node("ci", role="reader")
    writer = await mesh.new_node("laptop", role="member")
    assert (await whoami(NodeHome(reader), mesh.mtls_address)).role == "reader"
    mesh_id = identity_from_cert(NodeHome(reader).tls_cert_path.read_bytes()).mesh_id
    server, port = await _write_server(mesh.ca_root, mesh_id)
    try:
        writer_id = identity_from_cert(NodeHome(writer).tls_cert_path.read_bytes()).node_id
        assert (await _put(writer, port)).decode() == f"{writer_id} {mesh_id}"
        with pytest.raises(PermissionDenied, match="role 'reader', which may not write"):
            await _put(reader, port)
    finally:
        await server.stop(None)


async def test_revoked_node_is_refused_and_revocation_spreads(mesh: Mesh) -> None:
    victim = await mesh.new_node("stolen")
    other = await mesh.new_node("desk")
    victim_id = identity_from_cert(NodeHome(victim).tls_cert_path.read_bytes()).node_id
    await whoami(NodeHome(victim), mesh.mtls_address)
    revoke(NodeHome(mesh.ca_root), victim_id, "laptop stolen")
    # Picked up on the next call, without restarting the server.
    with pytest.raises(PermissionDenied, match=f"{victim_id} was revoked at"):
        await whoami(NodeHome(victim), mesh.mtls_address)
    # Another member learns it from the mesh and refuses the node on its own server.
    newcomer = await mesh.new_node("newcomer")
    newcomer_id = identity_from_cert(NodeHome(newcomer).tls_cert_path.read_bytes()).node_id
    assert RevocationList.load(NodeHome(other)).revoked_at(victim_id) is None
    assert newcomer_id not in Registry.load(NodeHome(other)).members
    pulled = await pull_membership(NodeHome(other), mesh.mtls_address)
    assert [s.node_id for s in pulled] == [victim_id]
    assert Registry.load(NodeHome(other)).members[victim_id].status == "revoked"
    assert Registry.load(NodeHome(other)).members[newcomer_id].status == "active"
    other_server = await serve_membership(NodeHome(other))
    try:
        with pytest.raises(PermissionDenied, match="revoked"):
            await whoami(NodeHome(victim), f"127.0.0.1:{other_server.mtls_port}")
        await whoami(NodeHome(mesh.ca_root), f"127.0.0.1:{other_server.mtls_port}")
    finally:
        await other_server.stop()
    # A revoked node cannot rejoin with a fresh invite either.
    with pytest.raises(PermissionDenied, match="cannot rejoin"):
        NodeHome(victim).ca_cert_path.unlink()
        await join(NodeHome(victim), mesh.invite())


async def test_expired_and_replayed_tokens_are_refused(mesh: Mesh) -> None:
    past = dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)
    expired = mesh.invite(now=past)
    root = mesh.tmp / "late"
    root.mkdir()
    with pytest.raises(PermissionDenied, match="expired at"):
        await join(NodeHome(root), expired)
    assert not NodeHome(root).ca_cert_path.exists()
    token = mesh.invite()
    await join(NodeHome(root), token)
    again = mesh.tmp / "again"
    again.mkdir()
    with pytest.raises(PermissionDenied, match="already used at"):
        await join(NodeHome(again), token)


async def test_token_for_another_mesh_is_refused_before_sending_anything(mesh: Mesh) -> None:
    other = mesh.tmp / "other"
    other.mkdir()
    create_mesh(NodeHome(other), "other")
    foreign = Token.decode(issue_invite(NodeHome(other), "member", HOUR, []).encode())
    with pytest.raises(PeerError, match="did not present the mesh CA pinned"):
        fetch_ca_pem(mesh.join_address, foreign.ca_fingerprint)
    root = mesh.tmp / "victim"
    root.mkdir()
    with pytest.raises(PeerError, match="did not present the mesh CA pinned"):
        await join(NodeHome(root), foreign.encode(), peer=mesh.join_address)


async def test_server_certificate_change_needs_no_restart(mesh: Mesh) -> None:
    def leaf() -> bytes:
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        ctx.set_alpn_protocols(["h2"])
        with (
            socket.create_connection(("127.0.0.1", mesh.server.join_port)) as raw,
            ctx.wrap_socket(raw, server_hostname=TARGET_NAME) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
        assert der is not None
        return der

    before = leaf()
    ca = MeshCA.load(NodeHome(mesh.ca_root))
    node_id = identity_from_cert(NodeHome(mesh.ca_root).tls_cert_path.read_bytes()).node_id
    key = new_tls_key()
    now = dt.datetime.now(dt.UTC)
    cert = ca.issue(make_csr(key, node_id), node_id, "member", now)
    files.write_atomic(NodeHome(mesh.ca_root).tls_key_path, pem_key(key), private=True)
    files.write_atomic(NodeHome(mesh.ca_root).tls_cert_path, cert.public_bytes(Encoding.PEM))
    after = leaf()
    assert after != before and after == cert.public_bytes(Encoding.DER)
    member = await mesh.new_node("after-rotation")
    assert (await whoami(NodeHome(member), mesh.mtls_address)).server_node_id == node_id


async def test_malformed_join_request_is_refused_with_the_field(mesh: Mesh) -> None:
    ca_pem = NodeHome(mesh.ca_root).ca_cert_path.read_bytes()
    creds = grpc.ssl_channel_credentials(root_certificates=ca_pem)
    async with grpc.aio.secure_channel(mesh.join_address, creds, options=channel_options()) as ch:
        stub: Any = membership_pb2_grpc.MembershipStub(ch)
        request = membership_pb2.JoinRequest(token_id=b"short", proof=b"", csr_der=b"x")
        with pytest.raises(grpc.RpcError) as info:
            await stub.Join(request, timeout=5)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "token_id has 5 bytes" in (info.value.details() or "")


async def test_join_through_a_member_without_the_ca_key_keeps_the_token(mesh: Mesh) -> None:
    member = await mesh.new_node("desk")
    relay = await serve_membership(NodeHome(member))
    token = mesh.invite()
    root = mesh.tmp / "new"
    root.mkdir()
    try:
        with pytest.raises(PeerError, match="does not hold the mesh CA key"):
            await join(NodeHome(root), token, peer=f"127.0.0.1:{relay.join_port}")
    finally:
        await relay.stop()
    assert (await join(NodeHome(root), token)).role == "member"  # the token was not spent


async def test_unreachable_is_not_reported_as_refused(mesh: Mesh) -> None:
    root = await mesh.new_node("laptop")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        address = f"127.0.0.1:{sock.getsockname()[1]}"
        with pytest.raises(PeerError, match="unreachable") as info:
            await whoami(NodeHome(root), address, timeout=5)
    assert not isinstance(info.value, (NotAuthenticated, PermissionDenied))


async def _revocations(root: Path, address: str, known: bytes = b"") -> Any:
    async with open_channel(address, channel_credentials(NodeHome(root)), channel_options()) as ch:
        stub: Any = membership_pb2_grpc.MembershipStub(ch)
        return await stub.Revocations(membership_pb2.RevocationsRequest(known=known))


async def test_lists_move_only_when_they_changed(mesh: Mesh) -> None:
    """A node pulls the lists before every session: a server whose lists did not change
    since the caller's last pull answers with their digest only; any change (here a
    revocation, then a newcomer) sends them again, and a caller that asks without a digest
    (an older node) always gets them whole."""
    other = await mesh.new_node("desk")
    victim = await mesh.new_node("stolen")
    victim_id = identity_from_cert(NodeHome(victim).tls_cert_path.read_bytes()).node_id
    whole = await _revocations(other, mesh.mtls_address)
    assert not whole.unchanged and whole.digest == lists_digest(
        whole.revocations_json, whole.members_json
    )
    again = await _revocations(other, mesh.mtls_address, known=whole.digest)
    assert again.unchanged and again.digest == whole.digest
    assert again.members_json == "" and again.revocations_json == ""
    assert len(again.SerializeToString()) < 64 < len(whole.SerializeToString()) // 10
    stale = await _revocations(other, mesh.mtls_address, known=b"\0" * 32)
    assert not stale.unchanged and stale.members_json == whole.members_json

    seen: dict[str, bytes] = {}
    assert await pull_membership(NodeHome(other), mesh.mtls_address, seen=seen) == []
    assert seen == {mesh.mtls_address: whole.digest}
    before = NodeHome(other).members_path.read_bytes()
    assert await pull_membership(NodeHome(other), mesh.mtls_address, seen=seen) == []
    assert NodeHome(other).members_path.read_bytes() == before
    revoke(NodeHome(mesh.ca_root), victim_id, "laptop stolen")
    pulled = await pull_membership(NodeHome(other), mesh.mtls_address, seen=seen)
    assert [s.node_id for s in pulled] == [victim_id]
    assert Registry.load(NodeHome(other)).members[victim_id].status == "revoked"
    assert seen[mesh.mtls_address] != whole.digest
    newcomer = await mesh.new_node("newcomer")
    newcomer_id = identity_from_cert(NodeHome(newcomer).tls_cert_path.read_bytes()).node_id
    assert await pull_membership(NodeHome(other), mesh.mtls_address, seen=seen) == []
    assert newcomer_id in Registry.load(NodeHome(other)).members
