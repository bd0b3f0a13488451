"""Node identity: id derivation, typo checks, key file handling, signatures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lifeline.errors import BadSignature, ConfigError, NotFound
from lifeline_mesh.home.identity import NodeIdentity, parse_node_id, verify_signature
from lifeline_mesh.home.node_home import NodeHome


def test_node_id_is_short_typeable_and_checked() -> None:
    ident = NodeIdentity.generate()
    nid = ident.node_id
    assert len(nid) == 22 and nid.count("-") == 4
    assert parse_node_id(nid.upper().replace("-", "")) == nid
    body = nid.replace("-", "")
    swapped = (
        body[1] + body[0] + body[2:]
        if body[0] != body[1]
        else body[:2] + body[3] + body[2] + body[4:]
    )
    if swapped != body:
        with pytest.raises(ConfigError, match="typo"):
            parse_node_id(swapped)
    with pytest.raises(ConfigError, match="not a node id"):
        parse_node_id("hello")


def test_key_file_is_private_and_reloads(tmp_path: Path) -> None:
    ident, created = NodeIdentity.load_or_create(NodeHome(tmp_path))
    assert created
    path = NodeHome(tmp_path).key_path
    assert path.stat().st_mode & 0o777 == 0o600
    again, created = NodeIdentity.load_or_create(NodeHome(tmp_path))
    assert not created and again.node_id == ident.node_id
    assert ident.node_id in repr(ident) and path.read_text().strip() not in repr(ident)
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        NodeIdentity.load(path)


def test_missing_key_says_how_to_create(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="lifeline-mesh init"):
        NodeIdentity.load(NodeHome(tmp_path).key_path)


def test_signatures_verify_and_tampering_is_caught() -> None:
    ident = NodeIdentity.generate()
    sig = ident.sign(b"statement")
    verify_signature(ident.public_key, sig, b"statement")
    with pytest.raises(BadSignature):
        verify_signature(ident.public_key, sig, b"statemenT")
    with pytest.raises(BadSignature):
        verify_signature(NodeIdentity.generate().public_key, sig, b"statement")


@pytest.mark.parametrize("message", [b"", b"statement", bytes(range(256)) * 4])
def test_signatures_are_the_rfc_8032_bytes_of_the_key_file(message: bytes) -> None:
    # signing goes through libsodium; the key file and OpenSSL must agree byte for byte
    ident = NodeIdentity.generate()
    assert ident.sign(message) == ident.private_key.sign(message)
    assert len(ident.sign(message)) == 64
    verify_signature(ident.public_key, ident.sign(message), message)
