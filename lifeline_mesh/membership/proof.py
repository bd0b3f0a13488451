"""Membership is only what the CA signed: checking the rows of a members list.

A members row is believed only when it carries its proof, the node certificate the mesh CA
issued (``cert``, base64 DER), and that certificate names the row's node id (which is bound
to the row's ed25519 key by hash), this mesh, the row's role, its CI credential and, for an
ephemeral runner, its expiry. A legacy ``retired`` row needs the certificate of an ephemeral
runner that has expired — so no row can retire a permanent member such as the CA holder.
Status is never taken from a row: it comes from the CA-signed revocations (revocation.py).

* :class:`RowProof` — the checks against one CA certificate, and which proven rows a caller
  limited to some lines is shown (decision 0125);
* :func:`merge_proven` — what a list from a peer adds to ours: proven rows only, each refusal
  returned with its reason (the caller logs it with the peer that sent it);
* :func:`attach_proofs` — put certificates this node holds itself (its own, or a caller's
  verified by mutual TLS) on rows that lack one: how rows written before decision 0047
  gain their proof.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import functools
from dataclasses import dataclass, replace

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from lifeline.errors import ConfigError, PeerError
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership import files
from lifeline_mesh.membership.certs import CertIdentity, identity_from_cert, mesh_id_of
from lifeline_mesh.membership.registry import Member, Registry, Retired, iso

__all__ = [
    "Refused",
    "RowProof",
    "attach_proofs",
    "merge_proven",
    "own_certificate",
    "record_proofs",
]


MAX_CERT_TEXT = 4096  # a node certificate is about 820 characters of base64


@dataclass(frozen=True, slots=True)
class Refused:
    node_id: str
    reason: str


@functools.lru_cache(maxsize=4096)
def _certified(cert_b64: str, ca_der: bytes) -> tuple[CertIdentity, str] | str:
    """``(identity, notAfter)`` of a certificate the CA signed, or why it is not one. A
    pure function of its bytes, remembered: every session checks the same rows."""
    try:
        der = base64.b64decode(cert_b64, validate=True)
        cert = x509.load_der_x509_certificate(der)
        cert.verify_directly_issued_by(x509.load_der_x509_certificate(ca_der))
        who = identity_from_cert(cert.public_bytes(serialization.Encoding.PEM))
    except (ValueError, TypeError, binascii.Error, PeerError) as exc:
        return f"its certificate is not one the mesh CA issued ({exc})"
    return who, iso(cert.not_valid_after_utc)


class RowProof:
    """Checks members rows against the mesh CA certificate."""

    def __init__(self, ca_cert: x509.Certificate) -> None:
        self._ca_der = ca_cert.public_bytes(serialization.Encoding.DER)
        self.mesh_id = mesh_id_of(ca_cert)

    def identity(self, cert_b64: str | None, node_id: str) -> tuple[CertIdentity, str] | str:
        """The certificate's identity and expiry if it is this mesh's CA's for ``node_id``."""
        if not cert_b64:
            return "it carries no certificate from the mesh CA"
        if not isinstance(cert_b64, str) or len(cert_b64) > MAX_CERT_TEXT:
            return "its certificate is not a base64 text of at most 4 KiB"
        found = _certified(cert_b64, self._ca_der)
        if isinstance(found, str):
            return found
        who, _ = found
        if who.mesh_id != self.mesh_id:
            return f"its certificate is for mesh {who.mesh_id}, not ours ({self.mesh_id})"
        if who.node_id != node_id:
            return f"its certificate names node {who.node_id}"
        return found

    def member(self, member: Member) -> str | None:
        """Why ``member`` is not proven, or None when its certificate proves every fact."""
        found = self.identity(member.cert, member.node_id)
        if isinstance(found, str):
            return found
        who, not_after = found
        if who.role != member.role:
            return f"its certificate grants role {who.role.value}, the row says {member.role}"
        if who.credential != member.credential:
            return f"its certificate names credential {who.credential}, the row {member.credential}"
        if member.expires_at is not None and member.expires_at != not_after:
            return f"its certificate expires at {not_after}, the row says {member.expires_at}"
        return None

    def retired(self, row: Retired, now: dt.datetime) -> str | None:
        """Why a retired row is not proven: it must be an expired runner's certificate."""
        found = self.identity(row.cert, row.node_id)
        if isinstance(found, str):
            return found
        who, not_after = found
        if who.credential is None or who.credential != row.credential:
            return "its certificate is not an ephemeral runner's; only runners retire"
        if not_after != row.expires_at or not_after > iso(now):
            return f"its certificate expires at {not_after}; a runner retires once it expired"
        return None

    def shown_to(self, lines: tuple[str, ...], cert_b64: str | None, node_id: str) -> bool:
        """Whether the row of ``node_id``, proven by ``cert_b64``, goes to a caller limited to
        ``lines`` (a CI runner, decision 0120; empty: a caller of every line): only the rows
        of nodes that may use one of them, whose signatures its lines can hold (decision
        0125) — every member and unlimited runner, and the runners sharing one of its lines.
        """
        if not lines:
            return True
        found = self.identity(cert_b64, node_id)
        return not isinstance(found, str) and any(found[0].may_use(line) for line in lines)

    def believed(self, member: Member) -> Member:
        """A proven row as a receiver keeps it: active (the revocations say otherwise),
        the CA holder only when its certificate says so."""
        found = self.identity(member.cert, member.node_id)
        holder = not isinstance(found, str) and found[0].ca_holder
        joined = member.joined_at
        if not (isinstance(joined, str) and len(joined) <= 32):  # a peer's text, shown
            joined = "-"
        return replace(member, status="active", revoked_at=None, ca_holder=holder, joined_at=joined)


def merge_proven(
    ours: Registry, theirs: Registry, proof: RowProof, now: dt.datetime
) -> list[Refused]:
    """Add to ``ours`` what ``theirs`` proves: members we lack, certificates for our rows
    that have none, and retired runners. Everything unproven is refused and returned."""
    refused: list[Refused] = []
    if theirs.mesh_id != ours.mesh_id:
        return [Refused("*", f"the list is of mesh {theirs.mesh_id}, not ours ({ours.mesh_id})")]
    for node_id, member in theirs.members.items():
        reason = proof.member(member)
        if reason is not None:
            refused.append(Refused(node_id, reason))
            continue
        old = ours.members.get(node_id)
        if node_id in ours.retired:
            continue
        if old is None:
            ours.members[node_id] = proof.believed(member)
        elif proof.member(old) is not None and old.public_key == member.public_key:
            new = proof.believed(member)  # our row gains its proof; our status stays
            ours.members[node_id] = replace(
                new,
                status=old.status,
                revoked_at=old.revoked_at,
                joined_at=old.joined_at,
                ca_holder=old.ca_holder or new.ca_holder,
            )
    for node_id, retired in theirs.retired.items():
        reason = proof.retired(retired, now)
        if reason is not None:
            refused.append(Refused(node_id, f"retired row refused: {reason}"))
            continue
        if node_id not in ours.retired or proof.retired(ours.retired[node_id], now) is not None:
            ours.retired[node_id] = retired
        ours.members.pop(node_id, None)
    return refused


def attach_proofs(registry: Registry, certs: list[bytes], proof: RowProof) -> bool:
    """Put each PEM certificate of ``certs`` (this node's own, or a caller's that mutual TLS
    verified) on its node's row when that row lacks a valid proof; True if a row changed."""
    changed = False
    for pem in certs:
        try:
            cert = x509.load_pem_x509_certificate(pem)
            node_id = identity_from_cert(pem).node_id
        except (ValueError, PeerError):
            continue
        old = registry.members.get(node_id)
        if old is None or proof.member(old) is None:
            continue
        text = base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode("ascii")
        found = proof.identity(text, node_id)
        if isinstance(found, str):
            continue
        who, not_after = found  # the CA's word on role and credential beats the row's
        expires = not_after if who.credential is not None else old.expires_at
        registry.members[node_id] = replace(
            old, cert=text, role=who.role, credential=who.credential, expires_at=expires
        )
        changed = True
    return changed


def own_certificate(home: NodeHome) -> list[bytes]:
    """This node's certificate (PEM) as a one-item list, or none before it joined."""
    path = home.tls_cert_path
    return [path.read_bytes()] if path.exists() else []


def record_proofs(home: NodeHome, certs: list[bytes], proof: RowProof) -> bool:
    """:func:`attach_proofs` on the stored list, under the membership lock; written only
    when a row gained its proof (so, once per row)."""
    try:
        if not attach_proofs(Registry.load(home), certs, proof):
            return False  # the usual case, decided without the lock
    except ConfigError:
        return False
    with files.exclusive(home):
        try:
            registry = Registry.load(home)
        except ConfigError:
            return False
        if not attach_proofs(registry, certs, proof):
            return False
        registry.save(home)
    return True
