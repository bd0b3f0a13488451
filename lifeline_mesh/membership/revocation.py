"""Revocation statements: signed by the mesh CA key, stored per node, exchanged by sync.

A statement says "node X is revoked since T" (plus who revoked it and why) and carries an
ECDSA P-256 signature by the CA key, so every member can check it against the CA
certificate it already holds, whichever peer it came from. Every node keeps the statements
it knows in ``revocations.json``; each incoming connection is checked against it
(authz.py), and ``verify`` asks :meth:`RevocationList.revoked_at`. ``export_revocations`` /
``import_revocations`` are what the sync (or the Revocations RPC) carries.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from lifeline.entry import format_ts
from lifeline.errors import BadSignature, ConfigError
from lifeline_mesh.home.identity import NodeIdentity, parse_node_id
from lifeline_mesh.home.mesh_state import REVOCATIONS, read_doc_json
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership import files
from lifeline_mesh.membership.ca import MeshCA, load_ca_cert
from lifeline_mesh.membership.certs import mesh_id_of
from lifeline_mesh.membership.registry import Registry

__all__ = [
    "Revocation",
    "RevocationList",
    "export_revocations",
    "import_revocations",
    "revoke",
    "signer_status",
]

_DOMAIN = b"lifeline-mesh/revoke/v1\n"


@dataclass(frozen=True, slots=True)
class Revocation:
    mesh_id: str
    node_id: str
    revoked_at: str
    reason: str
    by: str
    signature: str = ""  # hex DER ECDSA-SHA256 by the CA key over signed_bytes()

    def signed_bytes(self) -> bytes:
        body = {k: v for k, v in asdict(self).items() if k != "signature"}
        return _DOMAIN + json.dumps(body, sort_keys=True, separators=(",", ":")).encode()

    def verify(self, ca_public: ec.EllipticCurvePublicKey) -> None:
        try:
            ca_public.verify(
                bytes.fromhex(self.signature), self.signed_bytes(), ec.ECDSA(hashes.SHA256())
            )
        except (InvalidSignature, ValueError) as exc:
            raise BadSignature(
                f"revocation of {self.node_id} is not signed by this mesh's CA; it was "
                "altered or comes from another mesh — ignore the peer that sent it"
            ) from exc

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Revocation:
        try:
            return cls(**{k: str(data[k]) for k in cls.__dataclass_fields__})
        except (KeyError, TypeError) as exc:
            raise BadSignature(f"revocation statement {data!r} lacks field {exc}") from exc


@dataclass
class RevocationList:
    statements: dict[str, Revocation]

    @classmethod
    def current(cls, home: NodeHome) -> RevocationList:
        """:meth:`load`, kept on ``home`` until the revocations change (``NodeHome.kept``):
        what a node asks at every dial. Read it, do not change it."""
        return home.kept("revocations", (REVOCATIONS,), lambda: cls.load(home))

    @classmethod
    def load(cls, home: NodeHome) -> RevocationList:
        data = read_doc_json(home, REVOCATIONS, {"statements": []})
        items = [Revocation.from_dict(d) for d in data.get("statements", [])]
        return cls({r.node_id: r for r in items})

    def save(self, home: NodeHome) -> None:
        items = [asdict(self.statements[k]) for k in sorted(self.statements)]
        text = json.dumps({"statements": items}, indent=2, sort_keys=True) + "\n"
        home.documents.write(REVOCATIONS, text.encode())

    def revoked_at(self, node_id: str) -> str | None:
        statement = self.statements.get(node_id)
        return statement.revoked_at if statement else None

    def add(self, statement: Revocation) -> bool:
        """Keep the earliest statement per node (a deterministic merge); True if new."""
        old = self.statements.get(statement.node_id)
        if old is not None and old.revoked_at <= statement.revoked_at:
            return False
        self.statements[statement.node_id] = statement
        return True


def revoke(
    home: NodeHome, node_id: str, reason: str = "", now: dt.datetime | None = None
) -> Revocation:
    """Sign and store a revocation of ``node_id`` (needs the CA key)."""
    target = parse_node_id(node_id)
    ca = MeshCA.load(home)
    me = NodeIdentity.of(home).node_id
    if target == me:
        raise ConfigError(f"{target} is this node (the CA holder); it cannot revoke itself")
    existing = RevocationList.load(home).statements.get(target)
    if existing is not None:
        return existing
    # Microseconds, like entry and attestation times: a signature made a moment before the
    # revocation must not look as if it came after it.
    when = format_ts(now or dt.datetime.now(dt.UTC))
    draft = Revocation(ca.mesh_id, target, when, reason, me)
    signature = ca.key.sign(draft.signed_bytes(), ec.ECDSA(hashes.SHA256()))
    statement = Revocation(**{**asdict(draft), "signature": signature.hex()})
    _store(home, [statement])
    return statement


def export_revocations(home: NodeHome) -> bytes:
    """Every statement this node knows, as JSON bytes for the wire."""
    statements = RevocationList.load(home).statements
    items = [asdict(statements[k]) for k in sorted(statements)]
    return json.dumps({"statements": items}, sort_keys=True, separators=(",", ":")).encode()


def import_revocations(home: NodeHome, data: bytes) -> list[Revocation]:
    """Verify statements from a peer against our CA and store the new ones.

    One bad statement refuses the whole batch (BadSignature), so a peer cannot slip forged
    statements in among good ones; nothing is stored in that case.
    """
    ca_cert = load_ca_cert(home)
    public = ca_cert.public_key()
    assert isinstance(public, ec.EllipticCurvePublicKey)
    try:
        raw = json.loads(data)["statements"]
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise BadSignature(f"revocations from peer are not valid JSON statements ({exc})") from exc
    statements = [Revocation.from_dict(item) for item in raw]
    for statement in statements:
        if statement.mesh_id != mesh_id_of(ca_cert):
            raise BadSignature(f"revocation for mesh {statement.mesh_id} is not for our mesh")
        statement.verify(public)
    return _store(home, statements)


def _store(home: NodeHome, statements: list[Revocation]) -> list[Revocation]:
    with files.exclusive(home):  # joins add members to the same registry meanwhile
        return _store_locked(home, statements)


def _store_locked(home: NodeHome, statements: list[Revocation]) -> list[Revocation]:
    current = RevocationList.load(home)
    new = [s for s in statements if current.add(s)]
    if new:
        current.save(home)
        try:
            registry = Registry.load(home)
        except ConfigError:
            return new
        for statement in new:
            registry.mark_revoked(statement.node_id, statement.revoked_at)
        registry.save(home)
    return new


def signer_status(home: NodeHome, node_id: str) -> tuple[str, str | None]:
    """``(status, revoked_at)`` of a signer: status is active, revoked or unknown."""
    revoked = RevocationList.load(home).revoked_at(node_id)
    if revoked is not None:
        return "revoked", revoked
    try:
        registry = Registry.load(home)
    except ConfigError:
        return "unknown", None
    member = registry.members.get(parse_node_id(node_id))
    if member is None:
        return (
            ("retired", None) if parse_node_id(node_id) in registry.retired else ("unknown", None)
        )
    return member.status, member.revoked_at
