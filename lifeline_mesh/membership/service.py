"""The Membership gRPC service: joins (invite → certificate), WhoAmI, revocation pulls.

Join runs on a port with server-authenticated TLS only, since the joiner has no certificate
yet (``membership/join_port.py``, where Join is the only method); WhoAmI and Revocations
need a member certificate and so are reached on the node's mutual-TLS port. Only the node
holding the CA key can complete a join (docs/security.md). The members list a node hands
out holds only rows its CA certificates prove (decision 0047); a caller's certificate,
verified by mutual TLS, proves the caller's own row when that row had no proof yet. A caller
whose certificate names its only lines (a CI runner, decision 0120) is handed only the rows
of nodes that may use one of them, so that it does not learn the lines of other credentials'
runners (decision 0125).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives import serialization

from lifeline.errors import (
    ConfigError,
    LifelineError,
    PermissionDenied,
    RemoteProtocolError,
)
from lifeline_mesh.home.identity import NodeIdentity, node_id_for, verify_signature
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership import files
from lifeline_mesh.membership.authz import MeshAuthorizer
from lifeline_mesh.membership.ca import MeshCA, cert_text, load_ca_cert
from lifeline_mesh.membership.certs import identity_from_cert, mesh_id_of
from lifeline_mesh.membership.invite import InviteBook, join_proof
from lifeline_mesh.membership.proof import RowProof, own_certificate, record_proofs
from lifeline_mesh.membership.registry import Member, Registry
from lifeline_mesh.membership.revocation import RevocationList, export_revocations
from lifeline_mesh.transport.authz import Access, identity_of
from lifeline_mesh.transport.errors import status_for
from lifeline_mesh.wire import membership_pb2 as pb
from lifeline_mesh.wire import membership_pb2_grpc

pb_grpc: Any = membership_pb2_grpc  # generated code carries no annotations

__all__ = [
    "MembershipServicer",
    "add_membership",
    "join_message",
    "lists_digest",
]

Clock = Callable[[], dt.datetime]
MAX_CSR = 4096  # a P-256 CSR is about 250 bytes


def lists_digest(revocations_json: str, members_json: str) -> bytes:
    """What a Revocations reply's ``digest`` is: sha256 over both lists as sent."""
    h = hashlib.sha256(b"lifeline-mesh/membership-lists/v1\n")
    for part in (revocations_json, members_json):
        data = part.encode()
        h.update(len(data).to_bytes(8, "big") + data)
    return h.digest()


def join_message(mesh_id: str, token_id: bytes, csr_der: bytes) -> bytes:
    """What the joiner signs with its ed25519 node key (proof of possession)."""
    digest = hashlib.sha256(csr_der).digest()
    return b"lifeline-mesh/join-node/v1\n" + mesh_id.encode() + b"\n" + token_id + digest


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class MembershipServicer(pb_grpc.MembershipServicer):  # type: ignore[misc]
    def __init__(self, home: NodeHome, clock: Clock = _now) -> None:
        self.home = home
        self.clock = clock
        ca_cert = load_ca_cert(home)
        self.mesh_id = mesh_id_of(ca_cert)
        self.proof = RowProof(ca_cert)
        self.node_id = NodeIdentity.of(home).node_id
        self.authorizer = MeshAuthorizer(home, self.mesh_id)

    async def Join(self, request: Any, context: Any) -> Any:
        # A malformed or forged request is INVALID_ARGUMENT (RemoteProtocolError,
        # BadSignature), a spent or expired token PERMISSION_DENIED, a node that cannot
        # sign certificates FAILED_PRECONDITION: the one table in transport/errors.py.
        try:
            return self._join(request)
        except LifelineError as exc:
            await context.abort(status_for(exc), str(exc))

    def _join(self, request: Any) -> Any:
        # Everything below is synchronous: no other join can interleave and reuse a token.
        _check_sizes(request)
        node_id = node_id_for(bytes(request.node_public_key))
        verify_signature(
            request.node_public_key,
            request.node_signature,
            join_message(self.mesh_id, request.token_id, request.csr_der),
        )
        revoked = RevocationList.load(self.home).revoked_at(node_id)
        if revoked is not None:
            raise PermissionDenied(f"node {node_id} was revoked at {revoked}; it cannot rejoin")
        try:
            ca = MeshCA.load(self.home)
        except ConfigError as exc:
            raise ConfigError(
                f"node {self.node_id} does not hold the mesh CA key and cannot complete joins; "
                "join through the node that created the mesh"
            ) from exc
        MeshCA.check_request(request.csr_der)  # before spending the token on a bad request
        now = self.clock()

        def proof_ok(key: bytes) -> bool:
            expected = join_proof(key, request.token_id, request.csr_der, request.node_public_key)
            return hmac.compare_digest(expected, request.proof)

        # One locked step: spend the token, sign, add the member. Two joins racing for a
        # token (in this process or another on the same root) cannot both spend it, and a
        # credential revoked meanwhile either sees this runner or refuses it.
        with files.exclusive(self.home):
            grant = InviteBook(self.home).spend(request.token_id, proof_ok, node_id, now)
            role = grant.role
            cert = ca.issue(
                request.csr_der,
                node_id,
                role,
                now,
                grant.cert_expires,
                grant.credential,
                lines=grant.lines,
            )
            registry = Registry.load(self.home)
            registry.prune(now)  # expired runners leave the member list as new ones join
            member = Member.new(
                bytes(request.node_public_key),
                role,
                now,
                expires=grant.cert_expires,
                credential=grant.credential,
                cert=cert_text(cert),
            )
            # The certificate just issued is the row's proof; a revoked node was refused
            # above, so nothing of an older row (status, role) survives into the new one.
            registry.members[member.node_id] = member
            registry.save(self.home)
        pem = cert.public_bytes(serialization.Encoding.PEM)
        return pb.JoinReply(
            node_cert_pem=pem,
            ca_cert_pem=self.home.ca_cert_path.read_bytes(),
            members_json=self._proven_members(registry, identity_from_cert(pem).lines),
            revocations_json=export_revocations(self.home).decode(),
            role=role,
            mesh_id=self.mesh_id,
        )

    async def WhoAmI(self, request: Any, context: Any) -> Any:
        try:
            peer = self.authorizer.caller(identity_of(context), Access.READ)
        except LifelineError as exc:
            await context.abort(status_for(exc), str(exc))
        return pb.WhoAmIReply(
            node_id=peer.node_id,
            mesh_id=peer.mesh_id,
            role=peer.role.value,
            server_node_id=self.node_id,
        )

    async def Revocations(self, request: Any, context: Any) -> Any:
        peer = identity_of(context)
        try:
            who = self.authorizer.caller(peer, Access.READ)
        except LifelineError as exc:
            await context.abort(status_for(exc), str(exc))
        # The caller's certificate, which TLS just verified, proves its own row; ours too.
        caller = list(peer.auth_context.get("x509_pem_cert") or ())[:1]
        record_proofs(self.home, caller + own_certificate(self.home), self.proof)
        revocations = export_revocations(self.home).decode()
        members = self._proven_members(Registry.load(self.home), who.lines)
        # Over what this caller gets: its "unchanged" shortcut holds for its own rows.
        digest = lists_digest(revocations, members)
        if request.known and hmac.compare_digest(bytes(request.known), digest):
            # The caller holds these lists already (it asks before every session).
            return pb.RevocationsReply(digest=digest, unchanged=True)
        return pb.RevocationsReply(
            revocations_json=revocations, members_json=members, digest=digest
        )

    def _proven_members(self, registry: Registry, lines: tuple[str, ...]) -> str:
        """The list as handed to a peer: only rows whose certificates prove them, and to a
        caller limited to ``lines``, only those of nodes that may use one of them."""
        proof, now = self.proof, self.clock()
        registry.members = {
            k: m
            for k, m in registry.members.items()
            if proof.member(m) is None and proof.shown_to(lines, m.cert, k)
        }
        registry.retired = {
            k: r
            for k, r in registry.retired.items()
            if proof.retired(r, now) is None and proof.shown_to(lines, r.cert, k)
        }
        return json.dumps(registry.to_json(), sort_keys=True)


def _check_sizes(request: Any) -> None:
    sizes = {
        "token_id": (len(request.token_id), 8, 8),
        "proof": (len(request.proof), 32, 32),
        "node_public_key": (len(request.node_public_key), 32, 32),
        "csr_der": (len(request.csr_der), 1, MAX_CSR),
    }
    for name, (size, low, high) in sizes.items():
        if not low <= size <= high:
            raise RemoteProtocolError(
                f"join request field {name} has {size} bytes, expected {low}-{high}; "
                "the joiner is not lifeline-mesh or the token is damaged"
            )


def add_membership(server: Any, home: NodeHome, clock: Clock = _now) -> MembershipServicer:
    """Register the Membership service on a node's gRPC server."""
    servicer = MembershipServicer(home, clock)
    pb_grpc.add_MembershipServicer_to_server(servicer, server)
    return servicer
