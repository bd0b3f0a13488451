"""TLS for gRPC: mutual-TLS credentials from the node's files, target names, the CA fetch.

Every connection is mutual TLS with certificates issued by the mesh CA. The server reads
its key, chain and trusted root through a certificate-config fetcher, so a renewed
certificate or a new CA file is picked up by the next handshake without a restart. The
chain sent to peers includes the CA certificate, which is how a joiner, holding only the
CA fingerprint from its invite, gets the CA (see :func:`fetch_ca_pem`).
"""

from __future__ import annotations

import os
import socket
import ssl
from pathlib import Path
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from lifeline.errors import ConfigError, PeerError
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership import files
from lifeline_mesh.membership.certs import (
    TARGET_NAME,
    CertIdentity,
    fingerprint,
    identity_from_cert,
    node_dns_name,
)
from lifeline_mesh.transport.addresses import split_address

__all__ = [
    "MAX_MESSAGE",
    "channel_credentials",
    "channel_options",
    "demands_client_certificate",
    "fetch_ca_pem",
    "join_server_credentials",
    "server_credentials",
    "serving_node",
]

MAX_MESSAGE = 4 * 1024 * 1024
FETCH_TIMEOUT = 10.0


def _read(path: Path, *, private: bool = False) -> bytes:
    if not path.exists():
        raise ConfigError(
            f"{path} is missing; this node has no mesh certificate — "
            "run `lifeline-mesh join -` (or `init --new-mesh NAME` for a new mesh)"
        )
    return files.read_private(path) if private else path.read_bytes()


def _mtimes(home: NodeHome) -> tuple[int, ...]:
    paths = (home.tls_key_path, home.tls_cert_path, home.ca_cert_path)
    return tuple(os.stat(p).st_mtime_ns for p in paths)


def _server_config(home: NodeHome, client_auth: bool) -> Any:
    chain = _read(home.tls_cert_path) + _read(home.ca_cert_path)
    return grpc.ssl_server_certificate_configuration(
        [(_read(home.tls_key_path, private=True), chain)],
        root_certificates=_read(home.ca_cert_path) if client_auth else None,
    )


def _credentials(home: NodeHome, client_auth: bool) -> grpc.ServerCredentials:
    seen = [_mtimes(home)]

    def fetch() -> Any:
        # Called by gRPC before each handshake: return a new config only when files changed.
        try:
            now = _mtimes(home)
            if now == seen[0]:
                return None
            config = _server_config(home, client_auth)
        except (OSError, ConfigError):
            return None  # keep serving with what we have; a half-written file is retried
        seen[0] = now
        return config

    return grpc.dynamic_ssl_server_credentials(
        _server_config(home, client_auth), fetch, require_client_authentication=client_auth
    )


def server_credentials(home: NodeHome) -> grpc.ServerCredentials:
    """Mutual TLS: the client must present a certificate from our mesh CA."""
    return _credentials(home, client_auth=True)


def join_server_credentials(home: NodeHome) -> grpc.ServerCredentials:
    """Server-authenticated TLS for the join port (a joiner has no certificate yet)."""
    return _credentials(home, client_auth=False)


def channel_credentials(home: NodeHome) -> grpc.ChannelCredentials:
    """Client side of mutual TLS: trust only our mesh CA, present our node certificate."""
    return grpc.ssl_channel_credentials(
        root_certificates=_read(home.ca_cert_path),
        private_key=_read(home.tls_key_path, private=True),
        certificate_chain=_read(home.tls_cert_path),
    )


def channel_options(node_id: str | None = None) -> list[tuple[str, Any]]:
    """Certificates name nodes, not IP addresses: check the expected node's DNS SAN, or
    the name every mesh certificate carries when any member will do."""
    target = node_dns_name(node_id) if node_id else TARGET_NAME
    return [
        ("grpc.ssl_target_name_override", target),
        ("grpc.max_receive_message_length", MAX_MESSAGE),
        ("grpc.max_send_message_length", MAX_MESSAGE),
    ]


def serving_node(home: NodeHome, address: str, timeout: float = FETCH_TIMEOUT) -> CertIdentity:
    """Who serves at ``address``: the node its certificate names, verified against our CA.

    grpcio shows a client nothing of the server's certificate, so a node that must know
    whom it is about to send to (a static peer address may now be served by a revoked
    node) asks with one mutual-TLS handshake of its own, then dials with
    ``channel_options(node_id)``: the gRPC channel's own handshake must present that same
    node's certificate, so the answer cannot change between the two.
    """
    host, port = split_address(address)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False  # certificates name nodes, not addresses: read below
    context.load_verify_locations(cadata=_read(home.ca_cert_path).decode())
    context.load_cert_chain(home.tls_cert_path, home.tls_key_path)
    context.set_alpn_protocols(["h2"])
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=TARGET_NAME) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
    except ssl.SSLError as exc:
        raise PeerError(
            f"the TLS handshake with {address} failed ({exc.reason or exc}): it is not a "
            "member of this mesh, or it holds a certificate of another mesh"
        ) from exc
    except OSError as exc:
        raise PeerError(f"cannot reach {address} ({exc})") from exc
    if der is None:
        raise PeerError(f"{address} presented no certificate")
    pem = x509.load_der_x509_certificate(der).public_bytes(serialization.Encoding.PEM)
    return identity_from_cert(pem)


def fetch_ca_pem(address: str, pinned: bytes, timeout: float = FETCH_TIMEOUT) -> bytes:
    """Get the mesh CA certificate from a member's TLS chain and check it against the pin.

    The handshake here is not verified (we have no CA yet); what makes the result
    trustworthy is the SHA-256 fingerprint from the invite. The real channel is then
    verified against this CA, so a server that sends the right CA but does not hold a
    certified key fails there.
    """
    host, port = split_address(address)
    context = _unverified_h2_context()
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=TARGET_NAME) as tls,
        ):
            chain = _unverified_chain(tls)
    except OSError as exc:
        raise PeerError(f"cannot reach {address} to fetch the mesh CA ({exc})") from exc
    for der in chain:
        try:
            cert = x509.load_der_x509_certificate(der)
        except ValueError:
            continue  # garbage in an untrusted chain: only the pinned one matters
        if fingerprint(cert) == pinned:
            return cert.public_bytes(serialization.Encoding.PEM)
    raise PeerError(
        f"{address} did not present the mesh CA pinned by the invite "
        f"(fingerprint {pinned.hex()[:16]}…); it is not a member of that mesh — check the "
        "address, or ask for a new invite"
    )


def _unverified_h2_context() -> ssl.SSLContext:
    """A client context that checks nothing (the caller checks what it learns by other
    means: the invite's pin, or only whether the server asks for a certificate)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    return context


_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def demands_client_certificate(address: str, timeout: float = FETCH_TIMEOUT) -> bool:
    """Whether ``address`` is a mutual-TLS port (a node's sync port) rather than a join port:
    after a TLS 1.3 handshake without a client certificate, a join port answers the HTTP/2
    preface with its settings, a mutual-TLS port ends the connection instead."""
    host, port = split_address(address)
    context = _unverified_h2_context()
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=TARGET_NAME) as tls,
        ):
            tls.sendall(_H2_PREFACE)
            return tls.recv(9) == b""  # an HTTP/2 server sends a 9-byte frame header first
    except ssl.SSLError:
        return True  # the server's alert: a certificate is required
    except OSError:
        return False  # unreachable, or a reset: nothing to say about the port


def _unverified_chain(tls: ssl.SSLSocket) -> list[bytes]:
    public = getattr(tls, "get_unverified_chain", None)  # Python >= 3.13
    if public is not None:
        return [bytes(c) for c in public()]
    sslobj: Any = getattr(tls, "_sslobj", None)  # 3.10-3.12 have it only privately
    certs = sslobj.get_unverified_chain() if sslobj is not None else None
    encoding: Any = getattr(ssl, "_ssl", None)
    return [c.public_bytes(encoding.ENCODING_DER) for c in certs or []]
