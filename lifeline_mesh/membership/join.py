"""The joiner's side: turn an invite token into this node's mesh certificate.

1. Fetch the CA certificate from the member's TLS chain and check it against the token's
   fingerprint (tls.fetch_ca_pem).
2. Open a TLS channel verified against that CA: the server has now proven it holds a key
   certified by the mesh CA.
3. Send a CSR for a fresh P-256 TLS key, the ed25519 public key with a signature over the
   request (proof of the node key) and an HMAC of the request keyed by the token secret's
   hash (proof of the token; the secret itself never leaves this node).
4. Store the certificate, CA, revocations and the members rows the CA's certificates prove
   (proof.py; an unproven row is refused and logged); the key files are 0600.

A node whose mesh files git tracks is refused before anything is sent: its node key came
with the repository (a clone carries what its author committed) or went into it, so
whoever reads the repository holds it, and a join would give that key this node's place
in the mesh (docs/security.md, "What to commit").
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from cryptography import x509

from lifeline.errors import (
    ConfigError,
    NotAuthenticated,
    PeerError,
    PermissionDenied,
    RemoteProtocolError,
)
from lifeline.ignore import tracked_under
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.mesh_state import CA_CERT
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership import files
from lifeline_mesh.membership.ca import cert_text, make_csr, new_tls_key, pem_key
from lifeline_mesh.membership.certs import fingerprint, identity_from_cert, mesh_id_of
from lifeline_mesh.membership.invite import Token, join_proof
from lifeline_mesh.membership.proof import RowProof, merge_proven
from lifeline_mesh.membership.registry import Member, Registry
from lifeline_mesh.membership.revocation import import_revocations
from lifeline_mesh.membership.service import join_message
from lifeline_mesh.membership.tls import (
    channel_options,
    demands_client_certificate,
    fetch_ca_pem,
)
from lifeline_mesh.transport.channels import open_channel
from lifeline_mesh.transport.errors import error_from_rpc
from lifeline_mesh.wire import membership_pb2 as pb
from lifeline_mesh.wire import membership_pb2_grpc

pb_grpc: Any = membership_pb2_grpc  # generated code carries no annotations

__all__ = ["JOIN_TIMEOUT", "Joined", "join", "join_request", "refuse_keys_from_git"]

JOIN_TIMEOUT = 20.0
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Joined:
    node_id: str
    mesh_id: str
    role: str
    address: str
    created_identity: bool


async def join(
    home: NodeHome, token_text: str, peer: str | None = None, timeout: float = JOIN_TIMEOUT
) -> Joined:
    """Join the mesh of ``token_text`` through ``peer`` (or the token's addresses)."""
    token = Token.decode(token_text)
    existing = home.ca_cert_path
    if existing.exists():
        mesh = mesh_id_of(x509.load_pem_x509_certificate(existing.read_bytes()))
        raise ConfigError(
            f"this node already belongs to mesh {mesh}; a node belongs to one mesh "
            "(use another --root for another mesh)"
        )
    addresses = [peer] if peer else list(token.addresses)
    if not addresses:
        raise ConfigError("the token names no address; pass --peer HOST:PORT of the inviter")
    refuse_keys_from_git(
        home,
        "joining would give it this node's place in the mesh",
        "join again (with a new identity)",
    )
    identity, created = NodeIdentity.load_or_create(home)
    errors: list[PeerError] = []
    for address in addresses:
        try:
            joined = await _join_via(home, token, identity, address, timeout)
        except (PermissionDenied, NotAuthenticated):
            raise  # the mesh refused this token: another address would say the same
        except PeerError as exc:
            errors.append(exc)  # unreachable or not the pinned mesh: try the next address
            continue
        return Joined(joined.node_id, joined.mesh_id, joined.role, address, created)
    if len(errors) == 1:
        raise errors[0]
    raise PeerError("no address of the token worked: " + "; ".join(map(str, errors)))


async def _join_via(
    home: NodeHome, token: Token, identity: NodeIdentity, address: str, timeout: float
) -> Joined:
    ca_pem = await asyncio.to_thread(fetch_ca_pem, address, token.ca_fingerprint, timeout)
    mesh_id = mesh_id_of(x509.load_pem_x509_certificate(ca_pem))
    tls_key = new_tls_key()
    request = join_request(token, identity, mesh_id, make_csr(tls_key, identity.node_id))
    credentials = grpc.ssl_channel_credentials(root_certificates=ca_pem)
    async with open_channel(address, credentials, channel_options()) as ch:
        try:
            reply = await pb_grpc.MembershipStub(ch).Join(request, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNAVAILABLE and await asyncio.to_thread(
                demands_client_certificate, address, timeout
            ):  # it presented the mesh's CA, then wanted a member's certificate
                raise PeerError(
                    f"{address} is a node's sync port, not its join port; ask for an invite "
                    "with --address <join port> (what `serve --join-listen` or "
                    "`membership-serve` prints as its join port)"
                ) from exc
            raise error_from_rpc(exc, address) from exc
    try:
        _check_reply(reply, ca_pem, identity.node_id, mesh_id)
        sent = Registry.from_json(json.loads(reply.members_json))
    except (ValueError, ConfigError, RecursionError) as exc:
        raise RemoteProtocolError(f"{address} sent a malformed join reply ({exc})") from exc
    registry = Registry(mesh_id, sent.name)
    proof = RowProof(x509.load_pem_x509_certificate(ca_pem))
    for refused in merge_proven(registry, sent, proof, dt.datetime.now(dt.UTC)):
        log.warning(
            "members row for %s sent by peer %s refused: %s",
            refused.node_id,
            address,
            refused.reason,
        )
    own = identity_from_cert(bytes(reply.node_cert_pem))
    if identity.node_id not in registry.members:  # a CA holder older than decision 0047
        cert = x509.load_pem_x509_certificate(bytes(reply.node_cert_pem))
        expires = cert.not_valid_after_utc if own.credential else None
        registry.add(
            Member.new(
                identity.public_key,
                own.role,
                dt.datetime.now(dt.UTC),
                expires=expires,
                credential=own.credential,
                cert=cert_text(cert),
            )
        )
    _store(home, reply, registry, tls_key_pem=pem_key(tls_key))
    return Joined(identity.node_id, mesh_id, reply.role, address, False)


def refuse_keys_from_git(
    home: NodeHome, doing: str, then: str, tracked: Sequence[str] | None = None
) -> None:
    """ConfigError when git tracks a file of ``.lifeline/mesh/`` (one `git ls-files`, unless
    the caller passes what it read, ``tracked``): a key there is known to whoever reads the
    repository, and its ``ca.pem`` names whom the node trusts. ``doing`` says what it would
    be used for, ``then`` what to run after."""
    mesh = home.relative(home.mesh_dir) + "/"
    keys = tracked_under(home, home.mesh_dir, tracked)
    if keys:
        raise ConfigError(
            f"git tracks {', '.join(keys[:3])}: a key in the repository is known to "
            f"whoever reads it (a clone carries its author's), and {doing}; run "
            f"`git rm -r --cached {mesh}` and move {mesh} away, then {then}"
        )


def join_request(token: Token, identity: NodeIdentity, mesh_id: str, csr: bytes) -> pb.JoinRequest:
    """The request: the CSR, proof of the node key, and the token proof bound to both."""
    return pb.JoinRequest(
        token_id=token.token_id,
        proof=join_proof(token.key, token.token_id, csr, identity.public_key),
        csr_der=csr,
        node_public_key=identity.public_key,
        node_signature=identity.sign(join_message(mesh_id, token.token_id, csr)),
    )


def _check_reply(reply: pb.JoinReply, ca_pem: bytes, node_id: str, mesh_id: str) -> None:
    ca = x509.load_pem_x509_certificate(ca_pem)
    if fingerprint(x509.load_pem_x509_certificate(reply.ca_cert_pem)) != fingerprint(ca):
        raise PeerError("the member returned a different CA than the pinned one; not stored")
    cert = x509.load_pem_x509_certificate(reply.node_cert_pem)
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError) as exc:
        raise PeerError(
            f"the certificate we received is not signed by the mesh CA ({exc})"
        ) from exc
    got = identity_from_cert(reply.node_cert_pem)
    if got.node_id != node_id or got.mesh_id != mesh_id:
        raise PeerError(f"the certificate we received names {got.node_id}, not us ({node_id})")


def _store(home: NodeHome, reply: pb.JoinReply, registry: Registry, tls_key_pem: bytes) -> None:
    files.write_atomic(home.tls_key_path, tls_key_pem, private=True)
    files.write_atomic(home.tls_cert_path, bytes(reply.node_cert_pem))
    # CA last: its presence is what marks this node as joined.
    files.write_atomic(home.ca_cert_path, bytes(reply.ca_cert_pem))
    home.documents.write(CA_CERT, bytes(reply.ca_cert_pem))  # a hub's other processes
    registry.save(home)
    import_revocations(home, reply.revocations_json.encode())
