"""Runner enrollment carried with the evidence: who an ephemeral CI runner was, and until when.

An ephemeral runner (decision 0022) is not kept in the synced members list once it is gone
(decision 0024). Its membership travels instead with what it signs: the certificate the
mesh CA issued it (node id, role, the credential that enrolled it, expiry), in an
``enrolled`` statement it signs once in each line it writes to — in the same transaction
as its first author signature there. So a line grows with the runners that wrote in it,
and the membership state with nothing at all.

* :func:`enrollment_statement` — the runner's statement (deterministic: the ts is the
  certificate's start, and ed25519 signatures are deterministic, so every line gets the
  same item);
* :func:`check_enrollment` — a statement's certificate, verified against the mesh CA;
* :class:`EnrolledSigners` — known signers plus the runners proven so far (admission learns
  them in batch order, ``verify`` from the whole line);
* :func:`held_enrollments` / :func:`enrollments_of` — the statements a line holds, all or
  for given signers (a sender sends a runner's with its signatures).
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from lifeline.entry import format_ts
from lifeline.errors import BadSignature, InvalidEntry, PeerError
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.certs import identity_from_cert, mesh_id_of
from lifeline_mesh.notary.signers import KnownSigners, SignerState, SignerStatus
from lifeline_mesh.notary.statement import Attestation, Role, decode, sign

__all__ = [
    "EnrolledSigners",
    "LearningSigners",
    "Runner",
    "check_enrollment",
    "enrollment_statement",
    "enrollments_of",
    "held_enrollments",
    "learn_held",
    "runner_certificate",
    "seen_runners",
    "signer_ids",
]


@dataclass(frozen=True, slots=True)
class Runner:
    node_id: str
    role: str
    credential: str
    expires_at: str  # stored-form ts: the certificate's notAfter


@runtime_checkable
class LearningSigners(Protocol):
    """Known signers that accept proof of a runner's enrollment as it arrives."""

    def status(self, node_id: str) -> SignerStatus: ...

    def learn(self, att: Attestation) -> Runner: ...


def _ts(when: dt.datetime) -> str:
    return format_ts(when.astimezone(dt.UTC))


def runner_certificate(home: NodeHome) -> bytes | None:
    """This node's certificate (DER) when it is an ephemeral runner's, else None."""
    path = home.tls_cert_path
    if not path.exists():
        return None
    pem = path.read_bytes()
    try:
        if identity_from_cert(pem).credential is None:
            return None
    except PeerError:
        return None
    return x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)


def enrollment_statement(identity: NodeIdentity, cert_der: bytes) -> Attestation:
    """The runner's ``enrolled`` statement: its certificate, signed with its node key."""
    cert = x509.load_der_x509_certificate(cert_der)
    b64 = base64.urlsafe_b64encode(cert_der).decode("ascii").rstrip("=")
    return sign(identity, Role.ENROLLED, identity.node_id, _ts(cert.not_valid_before_utc), b64)


def check_enrollment(att: Attestation, ca_cert: x509.Certificate) -> Runner:
    """The runner an ``enrolled`` statement proves; BadSignature unless the certificate was
    issued by this mesh's CA to the very node that signed the statement, for a credential."""
    body = att.extras[0] if att.role is Role.ENROLLED and att.extras else ""
    try:
        cert = x509.load_der_x509_certificate(
            base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        )
        cert.verify_directly_issued_by(ca_cert)
        who = identity_from_cert(cert.public_bytes(serialization.Encoding.PEM))
    except (ValueError, TypeError, PeerError) as exc:
        raise BadSignature(
            f"enrolled statement by {att.node_id} carries no certificate of this mesh's CA "
            f"({exc}); refuse it"
        ) from exc
    if who.node_id != att.node_id or who.mesh_id != mesh_id_of(ca_cert) or not who.credential:
        raise BadSignature(
            f"enrolled statement by {att.node_id} carries the certificate of {who.node_id} "
            f"(mesh {who.mesh_id}, credential {who.credential}); refuse it"
        )
    return Runner(att.node_id, who.role, who.credential, _ts(cert.not_valid_after_utc))


class EnrolledSigners:
    """``base`` (members, revocations) plus the runners whose enrollment was proven."""

    def __init__(self, base: KnownSigners, ca_cert: x509.Certificate | None) -> None:
        self._base = base
        self._ca = ca_cert
        self.runners: dict[str, Runner] = {}
        self.loaded_held = False  # the line's own enrollments were read (storage.prepare)

    def learn(self, att: Attestation) -> Runner:
        runner = self.runners.get(att.node_id)
        if runner is None and self._ca is None:
            raise BadSignature(f"no mesh CA here to check the enrollment of {att.node_id}")
        if runner is None:
            assert self._ca is not None
            runner = self.runners[att.node_id] = check_enrollment(att, self._ca)
        return runner

    def status(self, node_id: str) -> SignerStatus:
        found = self._base.status(node_id)
        runner = self.runners.get(node_id)
        if runner is None or found.expires_at is not None:
            return found
        if found.state is SignerState.UNKNOWN:
            return SignerStatus(SignerState.KNOWN, None, runner.expires_at)
        return replace(found, expires_at=runner.expires_at)  # e.g. revoked while it ran


ENROLLED_SQL = "SELECT item FROM attestations WHERE role = 'enrolled'"


def held_enrollments(conn: sqlite3.Connection) -> list[Attestation]:
    """Every well-formed ``enrolled`` statement the line holds (a damaged row is skipped:
    ``verify`` reports it)."""
    out = []
    for (item,) in conn.execute(ENROLLED_SQL):
        try:
            out.append(decode(bytes(item)))
        except InvalidEntry:
            continue
    return out


def enrollments_of(conn: sqlite3.Connection, node_ids: Sequence[str]) -> dict[str, bytes]:
    """The ``enrolled`` statement held for each of ``node_ids`` that has one (runners)."""
    found: dict[str, bytes] = {}
    for start in range(0, len(node_ids), 500):
        chunk = list(node_ids[start : start + 500])
        marks = ",".join("?" * len(chunk))
        # the subject key, as migration 3 indexed it: the subject is the node id
        sql = f"{ENROLLED_SQL} AND substr(subject, 1, 16) IN ({marks}) AND node_id IN ({marks})"
        for (item,) in conn.execute(sql, [n[:16] for n in chunk] + chunk):
            att = decode(bytes(item))
            found.setdefault(att.node_id, bytes(item))
    return found


def signer_ids(raws: Iterable[bytes]) -> set[bytes]:
    """The distinct public keys that signed ``raws`` (an item ends key ‖ signature)."""
    return {bytes(raw[-96:-64]) for raw in raws}


async def learn_held(store: SqliteStore, signers: KnownSigners | None) -> bool:
    """Teach ``signers`` the runners this line's enrollments prove, once per session;
    True if that was done now (a caller then checks its batch again)."""
    if not isinstance(signers, EnrolledSigners) or signers.loaded_held:
        return False
    signers.loaded_held = True
    for att in await store.run_read(held_enrollments):
        try:
            signers.learn(att)
        except BadSignature:
            continue  # no evidence; `verify` reports the statement
    return True


def seen_runners(home: NodeHome, ca_cert: x509.Certificate) -> dict[str, Runner]:
    """The runners whose enrollment a line of this node holds (``members --all``): what the
    node has seen, read-only and without opening the lines for writing."""
    found: dict[str, Runner] = {}
    for name in home.line_names():
        uri = home.line_path(name).resolve().as_uri() + "?mode=ro"
        try:
            with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
                held = held_enrollments(conn)
        except sqlite3.Error:
            continue  # a line without the notary's tables (never signed in) or busy
        for att in held:
            try:
                found.setdefault(att.node_id, check_enrollment(att, ca_cert))
            except BadSignature:
                continue
    return found
