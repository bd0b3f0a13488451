"""Node identity: the ed25519 key pair and the short, typeable node id derived from it.

The node id is the first 80 bits of ``sha256(public key)`` in Crockford base32, grouped in
fours, followed by two check characters: ``k7q2-9fmx-ah3d-rt0e-5w``. The check catches a
mistyped or swapped character. The private key file is mode 0600, never logged and never
synced; attestations carry the public key so anyone can check a signature, and the node id
is recomputed from that key.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from nacl.signing import SigningKey

from lifeline.errors import BadSignature, ConfigError, NotFound
from lifeline.fsutil import read_private
from lifeline.ignore import ensure_ignore_file
from lifeline_mesh.home.mesh_state import NODE_KEY
from lifeline_mesh.home.node_home import NodeHome

__all__ = [
    "NodeIdentity",
    "ensure_identity",
    "node_id_for",
    "parse_node_id",
    "verify_signature",
]

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lowercase
_TYPO = str.maketrans({"o": "0", "i": "1", "l": "1", "u": "v"})


def _b32(data: bytes, chars: int) -> str:
    value = int.from_bytes(data, "big")
    bits = len(data) * 8
    out = []
    for n in range(chars):
        shift = bits - 5 * (n + 1)
        out.append(
            _ALPHABET[(value >> shift) & 31] if shift >= 0 else _ALPHABET[(value << -shift) & 31]
        )
    return "".join(out)


def _check(body: str) -> str:
    return _b32(hashlib.sha256(body.encode("ascii")).digest()[:2], 2)


def node_id_for(public_key: bytes) -> str:
    """The node id of a raw 32-byte ed25519 public key."""
    if len(public_key) != 32:
        raise BadSignature(f"an ed25519 public key is 32 bytes, got {len(public_key)}")
    body = _b32(hashlib.sha256(public_key).digest()[:10], 16)
    groups = [body[i : i + 4] for i in range(0, 16, 4)]
    return "-".join([*groups, _check(body)])


def parse_node_id(text: str) -> str:
    """Normalise a typed node id (case, dashes, o/0 i/l/1) and check its check characters."""
    compact = text.strip().lower().replace("-", "").replace(" ", "").translate(_TYPO)
    if len(compact) != 18 or any(c not in _ALPHABET for c in compact):
        raise ConfigError(
            f"{text!r} is not a node id; it looks like xxxx-xxxx-xxxx-xxxx-cc "
            "(`lifeline-mesh id` prints it)"
        )
    body, check = compact[:16], compact[16:]
    if _check(body) != check:
        raise ConfigError(f"node id {text!r} has a typo (its check characters do not match)")
    return "-".join([body[i : i + 4] for i in range(0, 16, 4)] + [check])


def verify_signature(public_key: bytes, signature: bytes, message: bytes) -> None:
    """Raise BadSignature unless ``signature`` is ``public_key``'s over ``message``."""
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except (InvalidSignature, ValueError) as exc:
        raise BadSignature(
            f"signature by {node_id_for(public_key) if len(public_key) == 32 else '?'} "
            "does not verify; the signed statement or the signature was altered"
        ) from exc


@dataclass(frozen=True)
class NodeIdentity:
    """This node's signing key. Create with :meth:`generate`/:meth:`load_or_create`."""

    private_key: Ed25519PrivateKey

    @classmethod
    def generate(cls) -> NodeIdentity:
        return cls(Ed25519PrivateKey.generate())

    @cached_property
    def public_key(self) -> bytes:
        return self.private_key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )

    @cached_property
    def node_id(self) -> str:
        return node_id_for(self.public_key)

    @cached_property
    def _signer(self) -> SigningKey:
        # libsodium signs faster than OpenSSL here (bench/history/notary.md); ed25519
        # signatures are deterministic (RFC 8032), so both give the same bytes.
        return SigningKey(self._seed())

    def _seed(self) -> bytes:
        return self.private_key.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )

    def sign(self, message: bytes) -> bytes:
        return bytes(self._signer.sign(message).signature)

    def __repr__(self) -> str:  # never show key material
        return f"NodeIdentity({self.node_id})"

    # -- files ---------------------------------------------------------------------

    def save(self, path: Path) -> None:
        """Write the private key (raw 32 bytes, hex) to a new 0600 file."""
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        raw = self._seed()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(raw.hex() + "\n")

    def to_text(self) -> bytes:
        """The private key as stored: raw 32 bytes in hex, one line."""
        return (self._seed().hex() + "\n").encode("ascii")

    @classmethod
    def from_text(cls, data: bytes, where: str) -> NodeIdentity:
        try:
            raw = bytes.fromhex(data.decode("ascii").strip())
            return cls(Ed25519PrivateKey.from_private_bytes(raw))
        except ValueError as exc:  # also UnicodeDecodeError
            raise ConfigError(
                f"{where} does not hold an ed25519 key; restore it from backup"
            ) from exc

    @classmethod
    def load(cls, path: Path) -> NodeIdentity:
        if not path.exists():
            raise NotFound(f"no node identity at {path}; create one with `lifeline-mesh init`")
        return cls.from_text(read_private(path), str(path))

    @classmethod
    def maybe_of(cls, home: NodeHome) -> NodeIdentity | None:
        """The identity of ``home`` (its key file, or a hub's database), None without one."""
        state = home.documents
        data = state.read(NODE_KEY)
        return None if data is None else cls.from_text(data, state.where(NODE_KEY))

    @classmethod
    def of(cls, home: NodeHome) -> NodeIdentity:
        """The identity of ``home``; NotFound without one."""
        identity = cls.maybe_of(home)
        if identity is None:
            where = home.documents.where(NODE_KEY)
            raise NotFound(f"no node identity at {where}; create one with `lifeline-mesh init`")
        return identity

    @classmethod
    def load_or_create(cls, home: NodeHome) -> tuple[NodeIdentity, bool]:
        """The identity of ``home``, created when missing; keys never reach git (ignore.py)."""
        ensure_ignore_file(home)
        state = home.documents
        identity = cls.maybe_of(home)
        if identity is not None:
            return identity, False
        identity = cls.generate()
        if state.create(NODE_KEY, identity.to_text()):
            return identity, True
        return cls.of(home), False  # another process made it meanwhile


def ensure_identity(home: NodeHome) -> tuple[NodeIdentity, bool]:
    """The node identity of ``home``, created (mode 0600) when missing.

    Returns the identity and whether it was created now. ``lifeline-mesh init`` and the
    node's composition root both call this.
    """
    if not home.root.is_dir():
        raise ConfigError(f"--root {home.root} is not a directory; pass the project folder")
    return NodeIdentity.load_or_create(home)
