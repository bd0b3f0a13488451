"""Membership without a network: tokens, durations, certificates, revocations, roles."""

from __future__ import annotations

import base64
import datetime as dt
import json
from dataclasses import asdict
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.serialization import Encoding

from lifeline.errors import BadSignature, ConfigError, NotAuthenticated, NotFound, PermissionDenied
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership import files
from lifeline_mesh.membership.authz import MeshAuthorizer, authorize
from lifeline_mesh.membership.ca import MeshCA, create_mesh, load_ca_cert, make_csr, new_tls_key
from lifeline_mesh.membership.certs import CertIdentity, fingerprint, identity_from_cert
from lifeline_mesh.membership.invite import InviteBook, Token, issue_invite, parse_duration
from lifeline_mesh.membership.proof import RowProof
from lifeline_mesh.membership.registry import Member, Registry
from lifeline_mesh.membership.revocation import (
    RevocationList,
    export_revocations,
    import_revocations,
    revoke,
    signer_status,
)
from lifeline_mesh.transport.addresses import require_loopback
from lifeline_mesh.transport.authz import ROLE_ACCESS, Access, MeshRole, PeerIdentity

NOW = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC)


def test_token_round_trip_is_short_and_damage_is_reported() -> None:
    token = Token("reader", 1_900_000_000, b"i" * 8, b"s" * 16, b"f" * 32, ("10.0.0.1:7431",))
    text = token.encode()
    assert len(text) < 140
    assert Token.decode(f"  {text}\n") == token
    with pytest.raises(ConfigError, match="damaged or truncated"):
        Token.decode(text[:30])
    with pytest.raises(ConfigError, match="not a lifeline-mesh invite token"):
        Token.decode("ghp_" + text[4:])


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("10m", 600), ("2h", 7200), ("1h30m", 5400), ("7d", 604800)]
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "10", "ten minutes", "0m", "-5m"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="duration"):
        parse_duration(text)


def test_create_mesh_writes_private_keys_and_first_member(tmp_path: Path) -> None:
    info = create_mesh(NodeHome(tmp_path), "team", NOW)
    home = NodeHome(tmp_path)
    for path in (home.ca_key_path, home.tls_key_path):
        assert path.stat().st_mode & 0o777 == 0o600
    registry = Registry.load(NodeHome(tmp_path))
    (me,) = registry.members.values()
    assert (me.node_id, me.role, me.status, me.ca_holder) == (
        info.node_id,
        "member",
        "active",
        True,
    )
    cert_pem = NodeHome(tmp_path).tls_cert_path.read_bytes()
    got = identity_from_cert(cert_pem)
    assert (got.node_id, got.mesh_id, got.role) == (info.node_id, info.mesh_id, "member")
    with pytest.raises(ConfigError, match="already belongs to mesh"):
        create_mesh(NodeHome(tmp_path), "again", NOW)


def test_ca_issues_only_for_p256_requests(tmp_path: Path) -> None:
    ca = MeshCA.generate("t", NOW)
    node = NodeIdentity.generate()
    cert = ca.issue(make_csr(new_tls_key(), node.node_id), node.node_id, "reader", NOW)
    cert.verify_directly_issued_by(ca.cert)
    other = ec.generate_private_key(ec.SECP384R1())
    name = x509.Name([])
    csr384 = x509.CertificateSigningRequestBuilder().subject_name(name).sign(other, hashes.SHA256())
    with pytest.raises(BadSignature, match="P-256"):
        ca.issue(csr384.public_bytes(Encoding.DER), node.node_id, "member", NOW)
    edkey = ed25519.Ed25519PrivateKey.generate()
    csr_ed = x509.CertificateSigningRequestBuilder().subject_name(name).sign(edkey, None)
    with pytest.raises(BadSignature, match="P-256"):
        ca.issue(csr_ed.public_bytes(Encoding.DER), node.node_id, "member", NOW)
    with pytest.raises(BadSignature, match="DER"):
        ca.issue(b"junk", node.node_id, "member", NOW)


def test_invite_needs_the_ca_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not hold the mesh CA key"):
        issue_invite(NodeHome(tmp_path), "member", parse_duration("1h"), [])


def test_invite_book_single_use_expiry_and_proof(tmp_path: Path) -> None:
    create_mesh(NodeHome(tmp_path), "team", NOW)
    token = issue_invite(NodeHome(tmp_path), "member", parse_duration("10m"), [], NOW)
    book = InviteBook(NodeHome(tmp_path))
    assert NodeHome(tmp_path).invites_path.stat().st_mode & 0o777 == 0o600
    with pytest.raises(PermissionDenied, match="does not match"):
        book.consume(token.token_id, lambda key: False, "n", NOW)
    later = NOW + dt.timedelta(minutes=11)
    with pytest.raises(PermissionDenied, match="expired at 2026-05-01T12:10:00Z"):
        book.consume(token.token_id, lambda key: key == token.key, "n", later)
    assert book.consume(token.token_id, lambda key: key == token.key, "n1", NOW) == "member"
    with pytest.raises(PermissionDenied, match=r"already used at .* by n1"):
        book.consume(token.token_id, lambda key: True, "n2", NOW)
    # without the secret, the token's id alone says nothing of its use or expiry
    for when in (NOW, later):
        with pytest.raises(PermissionDenied, match="does not match") as refused:
            book.consume(token.token_id, lambda key: False, "n3", when)
        assert "n1" not in str(refused.value) and "used" not in str(refused.value)
    with pytest.raises(PermissionDenied, match="not issued by this node"):
        book.consume(b"x" * 8, lambda key: True, "n2", NOW)


def test_roles_table() -> None:
    authorize("n", MeshRole.MEMBER, Access.WRITE)
    authorize("n", MeshRole.READER, Access.READ)
    with pytest.raises(PermissionDenied, match="role 'reader', which may not write"):
        authorize("n", MeshRole.READER, Access.WRITE)
    with pytest.raises(PermissionDenied, match="revoked at 2026"):
        authorize("n", MeshRole.MEMBER, Access.READ, revoked_at="2026-01-01T00:00:00Z")


def _second_member(ca_root: Path) -> str:
    """Register a member directly in the CA holder's registry (no network needed here)."""
    node = NodeIdentity.generate()
    registry = Registry.load(NodeHome(ca_root))
    registry.add(Member.new(node.public_key, "member", NOW))
    registry.save(NodeHome(ca_root))
    return node.node_id


def test_revocations_are_signed_exchanged_and_verified(tmp_path: Path) -> None:
    a, b, stranger = tmp_path / "a", tmp_path / "b", tmp_path / "s"
    for p in (a, b, stranger):
        p.mkdir()
    create_mesh(NodeHome(a), "team", NOW)
    victim = _second_member(a)
    statement = revoke(NodeHome(a), victim, "laptop stolen", NOW)
    assert signer_status(NodeHome(a), victim) == ("revoked", "2026-05-01T12:00:00.000000Z")
    assert Registry.load(NodeHome(a)).members[victim].status == "revoked"
    # A member holding only the CA certificate checks and imports the statement.
    files.write_atomic(NodeHome(b).ca_cert_path, NodeHome(a).ca_cert_path.read_bytes())
    data = export_revocations(NodeHome(a))
    assert [s.node_id for s in import_revocations(NodeHome(b), data)] == [victim]
    assert import_revocations(NodeHome(b), data) == []  # idempotent
    assert RevocationList.load(NodeHome(b)).revoked_at(victim) == statement.revoked_at
    # Tampered statement: refused, nothing stored.
    raw = json.loads(data)
    raw["statements"][0]["revoked_at"] = "2030-01-01T00:00:00Z"
    create_mesh(NodeHome(stranger), "other", NOW)
    with pytest.raises(BadSignature, match="is not for our mesh"):
        import_revocations(NodeHome(stranger), data)
    c = tmp_path / "c"
    files.write_atomic(NodeHome(c).ca_cert_path, NodeHome(a).ca_cert_path.read_bytes())
    with pytest.raises(BadSignature, match="not signed by this mesh's CA"):
        import_revocations(NodeHome(c), json.dumps(raw).encode())
    with pytest.raises(BadSignature, match="not valid JSON statements"):
        import_revocations(NodeHome(c), b'{"statements":' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    assert RevocationList.load(NodeHome(c)).statements == {}


def test_ca_holder_cannot_revoke_itself_and_unknown_status(tmp_path: Path) -> None:
    info = create_mesh(NodeHome(tmp_path), "team", NOW)
    with pytest.raises(ConfigError, match="cannot revoke itself"):
        revoke(NodeHome(tmp_path), info.node_id)
    assert signer_status(NodeHome(tmp_path), info.node_id) == ("active", None)
    assert signer_status(NodeHome(tmp_path), NodeIdentity.generate().node_id) == ("unknown", None)


def test_fingerprint_pins_the_ca(tmp_path: Path) -> None:
    one, two = MeshCA.generate("a", NOW), MeshCA.generate("a", NOW)
    assert fingerprint(one.cert) != fingerprint(two.cert) and len(fingerprint(one.cert)) == 32


def test_missing_ca_says_how_to_join(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="lifeline-mesh join -"):
        load_ca_cert(NodeHome(tmp_path))


@pytest.mark.parametrize("address", ["127.0.0.1:1", "[::1]:80", "localhost:9", "127.8.0.1:5"])
def test_insecure_allowed_on_loopback(address: str) -> None:
    assert require_loopback(address, tls=False, what="peer address")[1] > 0


@pytest.mark.parametrize("address", ["10.0.0.1:1", "0.0.0.0:80", "example.org:9", "[::]:5"])
def test_insecure_refused_elsewhere(address: str) -> None:
    with pytest.raises(ConfigError, match="not a loopback address, and without TLS"):
        require_loopback(address, tls=False, what="peer address")
    require_loopback(address, tls=True, what="peer address")  # with TLS any host will do


def test_authorizer_roles_only_narrow(tmp_path: Path) -> None:
    info = create_mesh(NodeHome(tmp_path), "team", NOW)
    node = NodeIdentity.generate()
    registry = Registry.load(NodeHome(tmp_path))
    registry.add(Member.new(node.public_key, "member", NOW))
    registry.save(NodeHome(tmp_path))
    auth = MeshAuthorizer(NodeHome(tmp_path), info.mesh_id)
    member, reader = MeshRole.MEMBER, MeshRole.READER
    # The certificate says reader: a members list saying member does not widen it.
    with pytest.raises(PermissionDenied, match="role 'reader', which may not write"):
        auth.check(CertIdentity(node.node_id, info.mesh_id, reader), Access.WRITE)
    assert auth.check(CertIdentity(node.node_id, info.mesh_id, reader), Access.READ).role is reader
    auth.check(CertIdentity(node.node_id, info.mesh_id, member), Access.WRITE)
    # The registry narrows a member to reader: refused at once (file change is seen).
    registry.add(Member.new(node.public_key, "reader", NOW))
    registry.save(NodeHome(tmp_path))
    with pytest.raises(PermissionDenied, match="may not write"):
        auth.check(CertIdentity(node.node_id, info.mesh_id, member), Access.WRITE)
    with pytest.raises(PermissionDenied, match="of mesh 0000, not ours"):
        auth.check(CertIdentity(node.node_id, "0000", member), Access.READ)


def test_authorizer_refuses_a_caller_without_a_certificate(tmp_path: Path) -> None:
    info = create_mesh(NodeHome(tmp_path), "team", NOW)
    auth = MeshAuthorizer(NodeHome(tmp_path), info.mesh_id)
    with pytest.raises(NotAuthenticated, match="no client certificate"):
        auth.caller(PeerIdentity("ipv4:127.0.0.1:5"), Access.READ)
    garbage = PeerIdentity("ipv4:127.0.0.1:5", {"x509_pem_cert": (b"not a certificate",)})
    with pytest.raises(NotAuthenticated, match="not a lifeline-mesh node certificate"):
        auth.caller(garbage, Access.READ)


def test_roles_parse_with_one_clear_error() -> None:
    assert MeshRole.parse("reader") is MeshRole.READER
    with pytest.raises(ConfigError, match="role 'admin' is not one of member, reader"):
        MeshRole.parse("admin")
    assert ROLE_ACCESS[MeshRole.READER] == {Access.READ}


@pytest.mark.parametrize("odd", [{"node_id": 5}, {"public_key": 5}, {"node_id": ["x"]}])
def test_a_members_row_of_the_wrong_types_is_malformed(odd: dict[str, object]) -> None:
    """A peer's list with such a row is malformed (the session says so), never an
    AttributeError out of `members --pull` or `sync`."""
    node = NodeIdentity.generate()
    row = asdict(Member.new(node.public_key, "member", NOW)) | odd
    with pytest.raises(ConfigError, match="malformed"):
        Member.from_dict(row)


def test_a_caller_limited_to_lines_is_shown_the_rows_of_nodes_of_its_lines() -> None:
    """Decision 0125: every member and every runner without a line limit may sign in any
    line; a runner limited to lines is shown to a caller sharing one of them only."""
    ca = MeshCA.generate("team", NOW)
    proof = RowProof(ca.cert)

    def row(credential: str | None, lines: tuple[str, ...]) -> tuple[str, str]:
        node_id = NodeIdentity.generate().node_id
        until = NOW + dt.timedelta(hours=1) if credential else None
        csr = make_csr(new_tls_key(), node_id)
        cert = ca.issue(csr, node_id, MeshRole.MEMBER, NOW, until, credential, lines=lines)
        return base64.b64encode(cert.public_bytes(Encoding.DER)).decode(), node_id

    rows = {
        "member": row(None, ()),
        "unlimited runner": row("before-0120", ()),
        "ledger runner": row("ci", ("ledger",)),
        "secret runner": row("ops", ("secret",)),
        "both runner": row("release", ("ledger", "secret")),
    }

    def shown(lines: tuple[str, ...]) -> set[str]:
        return {k for k, (cert, node_id) in rows.items() if proof.shown_to(lines, cert, node_id)}

    assert shown(()) == set(rows)
    assert shown(("ledger",)) == {"member", "unlimited runner", "ledger runner", "both runner"}
    assert shown(("secret", "ops")) == set(rows) - {"ledger runner"}
    ledger_cert, secret_id = rows["ledger runner"][0], rows["secret runner"][1]
    # A certificate that is not this row's proves nothing: not shown to a limited caller.
    assert not proof.shown_to(("ledger",), ledger_cert, secret_id)
    assert not proof.shown_to(("ledger",), None, secret_id)
