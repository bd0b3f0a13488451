"""The mesh CA: creating a mesh, and issuing P-256 node certificates from CSRs.

The CA private key is stored 0600 at the node that created the mesh. Any node holding it can
issue certificates and sign revocations, so only that node runs ``invite``, completes joins
and runs ``revoke`` (see docs/security.md for why no delegated keys).
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from lifeline.errors import BadSignature, ConfigError, NotFound
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.mesh_state import CA_CERT, CA_KEY
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership import files
from lifeline_mesh.membership.certs import (
    TARGET_NAME,
    URI_CA_HOLDER,
    URI_CREDENTIAL,
    URI_LINE,
    URI_MESH,
    URI_NODE,
    URI_ROLE,
    fingerprint,
    mesh_id_of,
    node_dns_name,
)
from lifeline_mesh.membership.registry import Member, Registry
from lifeline_mesh.transport.authz import MeshRole

__all__ = [
    "CA_VALID_DAYS",
    "NODE_VALID_DAYS",
    "MeshCA",
    "MeshInfo",
    "cert_text",
    "create_mesh",
    "load_ca_cert",
    "local_mesh_id",
    "make_csr",
    "new_tls_key",
    "pem_key",
]

CA_VALID_DAYS = 3650
NODE_VALID_DAYS = 365


@dataclass(frozen=True, slots=True)
class MeshInfo:
    name: str
    mesh_id: str
    node_id: str
    fingerprint_hex: str


def new_tls_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def make_csr(key: ec.EllipticCurvePrivateKey, node_id: str) -> bytes:
    """A DER certificate request for ``key``; the CA decides every field it signs."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, node_id)])
    csr = x509.CertificateSigningRequestBuilder().subject_name(name).sign(key, hashes.SHA256())
    return csr.public_bytes(serialization.Encoding.DER)


def load_ca_cert(home: NodeHome) -> x509.Certificate:
    path = home.ca_cert_path
    if not path.exists():
        raise NotFound(
            f"this node is not in a mesh (no {path}); create one with "
            "`lifeline-mesh init --new-mesh NAME` or join one with `lifeline-mesh join -`"
        )
    return x509.load_pem_x509_certificate(path.read_bytes())


def local_mesh_id(home: NodeHome) -> str | None:
    """The mesh this node belongs to (from its mesh CA certificate), None when in no mesh."""
    if not home.in_mesh():
        return None
    return mesh_id_of(load_ca_cert(home))


@dataclass(frozen=True)
class MeshCA:
    """The CA key and certificate, held only by the node that created the mesh."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @property
    def mesh_id(self) -> str:
        return mesh_id_of(self.cert)

    @classmethod
    def load(cls, home: NodeHome) -> MeshCA:
        state = home.documents
        where, pem = state.where(CA_KEY), state.read(CA_KEY)
        if pem is None:
            raise ConfigError(
                f"this node does not hold the mesh CA key ({where}); run this command on the "
                "node that created the mesh (`lifeline-mesh members` shows it as ca holder)"
            )
        key = serialization.load_pem_private_key(pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ConfigError(f"{where} does not hold a P-256 CA key; restore it from backup")
        return cls(key, load_ca_cert(home))

    @classmethod
    def generate(cls, name: str, now: dt.datetime) -> MeshCA:
        key = new_tls_key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"lifeline-mesh CA {name}")])
        ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=CA_VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_usage(cert_sign=True), critical=True)
            .add_extension(ski, critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(key, cert)

    @staticmethod
    def check_request(csr_der: bytes) -> ec.EllipticCurvePublicKey:
        """The P-256 key of a self-signed DER CSR; BadSignature for anything else."""
        try:
            csr = x509.load_der_x509_csr(csr_der)
            public = csr.public_key()
            valid = csr.is_signature_valid
        except (ValueError, TypeError) as exc:
            raise BadSignature(f"certificate request is not DER PKCS#10 ({exc})") from exc
        if not isinstance(public, ec.EllipticCurvePublicKey):
            raise BadSignature(f"TLS keys must be P-256, got {type(public).__name__}")
        if not isinstance(public.curve, ec.SECP256R1):
            raise BadSignature(f"TLS keys must be P-256, got {public.curve.name}")
        if not valid:
            raise BadSignature("certificate request is not self-signed by its key")
        return public

    def issue(
        self,
        csr_der: bytes,
        node_id: str,
        role: MeshRole,
        now: dt.datetime,
        not_after: dt.datetime | None = None,
        credential: str | None = None,
        *,
        ca_holder: bool = False,
        lines: Sequence[str] = (),
    ) -> x509.Certificate:
        """Sign a node certificate for the P-256 key in ``csr_der``; only the key is taken.

        ``not_after`` shortens it and ``credential`` names the CI credential that enrolled
        it (an ephemeral runner's: the certificate is then its membership, carried with
        what it signs — decision 0024); default NODE_VALID_DAYS. ``ca_holder`` marks the
        certificate of the node holding the CA key (what peers believe of that row);
        ``lines``, when any, the only lines the node may read or write (decision 0120)."""
        public = self.check_request(csr_der)
        names: list[x509.GeneralName] = [
            x509.DNSName(TARGET_NAME),
            x509.DNSName(node_dns_name(node_id)),
            x509.UniformResourceIdentifier(URI_NODE + node_id),
            x509.UniformResourceIdentifier(URI_MESH + self.mesh_id),
            x509.UniformResourceIdentifier(URI_ROLE + role),
        ]
        if credential is not None:
            names.append(x509.UniformResourceIdentifier(URI_CREDENTIAL + credential))
        names.extend(x509.UniformResourceIdentifier(URI_LINE + line) for line in lines)
        if ca_holder:
            names.append(x509.UniformResourceIdentifier(URI_CA_HOLDER))
        san = x509.SubjectAlternativeName(names)
        return (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, node_id)]))
            .issuer_name(self.cert.subject)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(not_after or now + dt.timedelta(days=NODE_VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_usage(cert_sign=False), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(san, critical=False)
            .sign(self.key, hashes.SHA256())
        )


def _usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not cert_sign,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=not cert_sign,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def create_mesh(home: NodeHome, name: str, now: dt.datetime | None = None) -> MeshInfo:
    """Create a mesh: its CA, and this node as its first member (role member)."""
    if not name.strip() or len(name) > 64:
        raise ConfigError(f"mesh name {name!r} must be 1-64 characters")
    if home.ca_cert_path.exists():
        raise ConfigError(
            f"this node already belongs to mesh {mesh_id_of(load_ca_cert(home))}; "
            "a node belongs to one mesh (use another --root for another mesh)"
        )
    now = now or dt.datetime.now(dt.UTC)
    identity, _ = NodeIdentity.load_or_create(home)
    ca = MeshCA.generate(name.strip(), now)
    tls_key = new_tls_key()
    csr = make_csr(tls_key, identity.node_id)
    cert = ca.issue(csr, identity.node_id, MeshRole.MEMBER, now, ca_holder=True)
    home.documents.write(CA_KEY, pem_key(ca.key))
    files.write_atomic(home.tls_key_path, pem_key(tls_key), private=True)
    files.write_atomic(home.tls_cert_path, _pem(cert))
    files.write_atomic(home.ca_cert_path, _pem(ca.cert))
    home.documents.write(CA_CERT, _pem(ca.cert))  # a hub's other processes read it there
    registry = Registry(mesh_id=ca.mesh_id, name=name.strip())
    registry.add(
        Member.new(identity.public_key, MeshRole.MEMBER, now, ca_holder=True, cert=cert_text(cert))
    )
    registry.save(home)
    return MeshInfo(name.strip(), ca.mesh_id, identity.node_id, fingerprint(ca.cert).hex())


def cert_text(cert: x509.Certificate) -> str:
    """A certificate as a members row carries it: base64 of its DER (decision 0047)."""
    return base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode("ascii")


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)
