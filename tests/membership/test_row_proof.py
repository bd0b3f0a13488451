"""Crafted Revocations replies, through the generated stubs, against `pull_membership`.

A member's server (real gRPC over mutual TLS, with that member's own credentials) answers
the Revocations RPC with a members list crafted row by row. Each forged row is refused and
logged with the peer's address; a genuine row is taken, as active whatever status it
claims. Rows written before decision 0047 gain their proof from certificates the nodes hold.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from lifeline.errors import BadSignature
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.ca import MeshCA, create_mesh, make_csr, new_tls_key
from lifeline_mesh.membership.client import (
    MAX_ROWS_LOGGED,
    MAX_ROWS_REMEMBERED,
    _log_refused,
    pull_membership,
)
from lifeline_mesh.membership.invite import issue_invite, parse_duration
from lifeline_mesh.membership.join import join
from lifeline_mesh.membership.proof import Refused as ProofRefused
from lifeline_mesh.membership.registry import Registry
from lifeline_mesh.membership.tls import server_credentials
from lifeline_mesh.node.root import MembershipServer, serve_membership
from lifeline_mesh.transport.authz import MeshRole
from lifeline_mesh.wire import membership_pb2, membership_pb2_grpc

pb_grpc: Any = membership_pb2_grpc


@dataclass
class Mesh:
    ca: Path
    server: MembershipServer
    tmp: Path

    async def node(self, name: str, role: str = "member") -> Path:
        root = self.tmp / name
        root.mkdir()
        address = f"127.0.0.1:{self.server.join_port}"
        token = issue_invite(NodeHome(self.ca), role, parse_duration("1h"), [address])
        await join(NodeHome(root), token.encode())
        return root


@pytest.fixture
async def mesh(tmp_path: Path) -> AsyncIterator[Mesh]:
    ca = tmp_path / "ca"
    ca.mkdir()
    create_mesh(NodeHome(ca), "team")
    server = await serve_membership(NodeHome(ca))
    try:
        yield Mesh(ca, server, tmp_path)
    finally:
        await server.stop()


class _Crafted(pb_grpc.MembershipServicer):  # type: ignore[misc]
    def __init__(self, members: dict[str, Any]) -> None:
        self.members = members

    async def Revocations(self, request: Any, context: Any) -> Any:
        return membership_pb2.RevocationsReply(
            revocations_json='{"statements":[]}', members_json=json.dumps(self.members)
        )


async def _crafted_server(home: NodeHome, members: dict[str, Any]) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    pb_grpc.add_MembershipServicer_to_server(_Crafted(members), server)
    port = server.add_secure_port("127.0.0.1:0", server_credentials(home))
    await server.start()
    return server, f"127.0.0.1:{port}"


def _row(root: Path, **changes: Any) -> dict[str, Any]:
    """``root``'s genuine row, as its CA holder's list has it, with ``changes``."""
    node_id = NodeIdentity.of(NodeHome(root)).node_id
    rows = json.loads(NodeHome(root).members_path.read_text())["members"]
    row = next(r for r in rows if r["node_id"] == node_id)
    return {**row, **changes}


def _pem_text(root: Path) -> str:
    """``root``'s own certificate, base64 DER."""
    cert = x509.load_pem_x509_certificate(NodeHome(root).tls_cert_path.read_bytes())
    return base64.b64encode(cert.public_bytes(Encoding.DER)).decode("ascii")


def _other_mesh_cert(tmp: Path, node_id: str) -> str:
    other = MeshCA.generate("evil", dt.datetime.now(dt.UTC))
    csr = make_csr(new_tls_key(), node_id)
    cert = other.issue(csr, node_id, MeshRole.MEMBER, dt.datetime.now(dt.UTC))
    return base64.b64encode(cert.public_bytes(Encoding.DER)).decode("ascii")


async def test_crafted_rows_are_refused_and_logged_with_the_peer(
    mesh: Mesh, caplog: pytest.LogCaptureFixture
) -> None:
    rogue = await mesh.node("rogue", role="reader")
    honest = await mesh.node("honest")
    late = await mesh.node("late")  # joined after the honest node: it does not know it yet
    outsider = mesh.tmp / "outsider"
    outsider.mkdir()
    key = NodeIdentity.load_or_create(NodeHome(outsider))[0]
    out_row = {
        "node_id": key.node_id,
        "public_key": key.public_key.hex(),
        "role": "member",
        "status": "active",
        "joined_at": "2026-01-01T00:00:00Z",
    }
    rogue_row = {**_row(rogue), "cert": _pem_text(rogue)}
    ca_row = {**_row(mesh.ca), "cert": _pem_text(mesh.ca)}
    registry = json.loads(NodeHome(mesh.ca).members_path.read_text())
    late_row = next(r for r in registry["members"] if r["node_id"] == _row(late)["node_id"])
    crafted = {
        "mesh_id": registry["mesh_id"],
        "name": "team",
        "members": [
            {**out_row, "cert": rogue_row["cert"]},  # another member's certificate
            {**out_row, "node_id": key.node_id, "cert": _other_mesh_cert(mesh.tmp, key.node_id)},
            {**rogue_row, "role": "member"},  # a role its certificate does not grant
            {**late_row, "status": "revoked", "revoked_at": "2026-01-01T00:00:00Z"},
        ],
    }
    # A retired row for the CA holder: bare (as before decision 0047), then with the CA
    # holder's genuine certificate. The list names the outsider twice: two replies.
    replies = [
        (
            [*crafted["members"][:1], {**rogue_row, "cert": [1, 2]}],  # not even a text
            [[ca_row["node_id"], "2026-01-01T00:00:00Z", "ci"]],
        ),
        (
            crafted["members"][1:],
            [[ca_row["node_id"], "2026-01-01T00:00:00Z", "ci", ca_row["cert"]]],
        ),
    ]
    before = json.loads(NodeHome(honest).members_path.read_text())
    seen: list[str] = []
    for members, retired in replies:
        reply = {**crafted, "members": members, "retired": retired}
        server, address = await _crafted_server(NodeHome(rogue), reply)
        try:
            with caplog.at_level(logging.WARNING, logger="lifeline_mesh.membership.client"):
                await pull_membership(NodeHome(honest), address)
        finally:
            await server.stop(grace=0)
        seen += [r.getMessage() for r in caplog.records if address in r.getMessage()]
        caplog.clear()
        held = Registry.load(NodeHome(honest))
        assert key.node_id not in held.members, "an uncertified key became a member"
        assert ca_row["node_id"] in held.members, "a retired row erased the CA holder"

    text = "\n".join(seen)
    assert f"members row for {key.node_id} sent by peer" in text
    assert f"its certificate names node {rogue_row['node_id']}" in text
    assert "is not one the mesh CA issued" in text
    assert "its certificate grants role reader, the row says member" in text
    assert f"members row for {ca_row['node_id']} sent by peer" in text
    assert "only runners retire" in text
    assert "its certificate is not a base64 text" in text
    after = Registry.load(NodeHome(honest))
    assert key.node_id not in after.members
    assert ca_row["node_id"] in after.members and not after.retired
    assert after.members[rogue_row["node_id"]].role is MeshRole.READER
    # The genuine row is taken, active: status comes from CA-signed revocations only.
    assert after.members[late_row["node_id"]].status == "active"
    assert {m["node_id"] for m in before["members"]} | {late_row["node_id"]} == set(after.members)


async def test_rows_written_before_proofs_gain_them_from_certificates(mesh: Mesh) -> None:
    member = await mesh.node("member")
    member_id = NodeIdentity.of(NodeHome(member)).node_id
    # Both lists as an older version wrote them: no row carries a certificate.
    for root in (mesh.ca, member):
        data = json.loads(NodeHome(root).members_path.read_text())
        for row in data["members"]:
            row.pop("cert", None)
        NodeHome(root).members_path.write_text(json.dumps(data))
    # The member pulls from the CA holder: the CA holder proves the caller's row with the
    # certificate mutual TLS verified, and the member proves its own row with its own.
    await pull_membership(NodeHome(member), f"127.0.0.1:{mesh.server.mtls_port}")
    held = Registry.load(NodeHome(mesh.ca)).members[member_id]
    mine = Registry.load(NodeHome(member)).members[member_id]
    assert held.cert is not None and mine.cert is not None
    # A second pull takes the CA holder's row, which it proved itself meanwhile.
    await pull_membership(NodeHome(member), f"127.0.0.1:{mesh.server.mtls_port}")
    ca_id = NodeIdentity.of(NodeHome(mesh.ca)).node_id
    assert Registry.load(NodeHome(member)).members[ca_id].cert is not None


async def test_a_join_replaces_a_row_listed_before_it(mesh: Mesh) -> None:
    """A row poisoned into the CA holder's own list before decision 0047 (a newcomer listed
    as a revoked reader) does not survive the newcomer's join: the new certificate is its
    row, and only CA-signed revocations say revoked."""
    newcomer = mesh.tmp / "newcomer"
    newcomer.mkdir()
    key = NodeIdentity.load_or_create(NodeHome(newcomer))[0]
    data = json.loads(NodeHome(mesh.ca).members_path.read_text())
    data["members"].append(
        {
            "node_id": key.node_id,
            "public_key": key.public_key.hex(),
            "role": "reader",
            "status": "revoked",
            "revoked_at": "2026-01-01T00:00:00Z",
            "joined_at": "2026-01-01T00:00:00Z",
        }
    )
    NodeHome(mesh.ca).members_path.write_text(json.dumps(data))
    address = f"127.0.0.1:{mesh.server.join_port}"
    token = issue_invite(NodeHome(mesh.ca), "member", parse_duration("1h"), [address])
    await join(NodeHome(newcomer), token.encode())
    row = Registry.load(NodeHome(mesh.ca)).members[key.node_id]
    assert (row.role, row.status, row.revoked_at) == (MeshRole.MEMBER, "active", None)


class _Unchanged(pb_grpc.MembershipServicer):  # type: ignore[misc]
    """A rogue peer that says "unchanged" whatever the caller holds (decision 0092)."""

    async def Revocations(self, request: Any, context: Any) -> Any:
        return membership_pb2.RevocationsReply(digest=b"\x01" * 32, unchanged=True)


async def test_unchanged_for_lists_never_taken_is_refused(mesh: Mesh) -> None:
    honest = await mesh.node("honest")
    rogue = await mesh.node("rogue")
    server = grpc.aio.server()
    pb_grpc.add_MembershipServicer_to_server(_Unchanged(), server)
    port = server.add_secure_port("127.0.0.1:0", server_credentials(NodeHome(rogue)))
    await server.start()
    address = f"127.0.0.1:{port}"
    before = NodeHome(honest).members_path.read_bytes()
    seen: dict[str, bytes] = {}
    try:
        with pytest.raises(BadSignature, match="not valid JSON statements"):
            await pull_membership(NodeHome(honest), address, seen=seen)
        seen[address] = b"\x02" * 32  # lists taken before, with another digest
        with pytest.raises(BadSignature, match="not valid JSON statements"):
            await pull_membership(NodeHome(honest), address, seen=seen)
    finally:
        await server.stop(grace=0)
    assert NodeHome(honest).members_path.read_bytes() == before  # nothing taken
    assert seen == {address: b"\x02" * 32}  # its digest was not remembered


def test_made_up_rows_are_logged_in_a_few_lines(caplog: pytest.LogCaptureFixture) -> None:
    """A rogue member sending 20,000 made-up rows each session wrote 20,000 warnings each
    time (22–32 MB of log in minutes) and grew the node's memory of what it logged."""
    logged: set[tuple[str, str, str]] = set()
    sessions = 5
    with caplog.at_level(logging.WARNING, logger="lifeline_mesh.membership.client"):
        for k in range(sessions):  # new made-up rows each session
            why = "its certificate is not a base64 text"
            _log_refused(
                "127.0.0.1:7420", [ProofRefused(f"n{k}-{n}", why) for n in range(20_000)], logged
            )
            assert len(logged) <= MAX_ROWS_REMEMBERED + 20_000, len(logged)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) <= sessions * (MAX_ROWS_LOGGED + 1), len(lines)
    assert any("more members rows sent by peer 127.0.0.1:7420 refused" in m for m in lines)
