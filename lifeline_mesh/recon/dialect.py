"""How a side summarises ranges and names items in id lists: plain (v1) or compact.

*Plain*: fingerprints are ``sha256(sum ‖ count)`` cut to 16 bytes, id lists carry 16-byte
token prefixes. Every node speaks it; the opening turn always uses it, since the initiator
has not yet seen the responder's capabilities.

*Compact* (capability ``compact-ranges``): both sides put a random salt in their hello; the
session key is ``blake2b(initiator salt ‖ responder salt)``. Fingerprints are
``blake2b(sum ‖ count, key)`` cut to ``fingerprint_bytes`` (8 by default) and id lists carry
*short ids*, ``blake2b(token, key)`` cut to ``short_id_bytes`` (6 by default), as in
Bitcoin's compact blocks (BIP 152). The key is unknown until the session starts, so nobody
can craft, in advance, items whose short ids or fingerprints collide in that session; a
random collision only affects one session, and the next one uses another key. The argument
and the collision handling are in docs/protocol.md ("Compact ranges") and decision 0010.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from lifeline.errors import RemoteProtocolError
from lifeline_mesh.recon.frames import Hello, Recon
from lifeline_mesh.recon.sets import FINGERPRINT_BYTES, LIST_TOKEN_BYTES, Snapshot

__all__ = [
    "COMPACT_CAPABILITY",
    "PLAIN",
    "SALT_BYTES",
    "Dialect",
    "SessionForm",
    "compact",
    "frame_dialect",
    "session_key",
]

COMPACT_CAPABILITY = "compact-ranges"
SALT_BYTES = 8
FULL_TOKEN_BYTES = 32
_KEY_PERSON = b"lifeline-recon"
_ID_PERSON = b"short-id"
_FP_PERSON = b"fingerprint"
# A range split into parts of at most this many items gets keyed-sum fingerprints, which
# can reveal one missing item; larger parts get a keyed hash of the plain sum, which costs
# nothing per item (prefix sums). A range known to differ by exactly one item is answered
# with a keyed sum up to ECHO_LIMIT items. So a session hashes the items of small ranges and
# of ranges one item apart, not the whole set. Parts of up to 64 items: a split then hashes
# at most 16 × 64 items (a range of 6,250 split into parts of 390 used to hash all 6,250 on
# both sides — a third of a node's CPU at steady state); a part one apart that is larger
# costs one more message (its echo) instead.
SUM_LIMIT = 64
ECHO_LIMIT = 1 << 16
# A range one item apart and wider than NARROW_ABOVE is not echoed: it is split into parts
# of about NARROW_PART items (NARROW_BRANCH at most), keyed hashes of their plain sums, and
# the one part left one apart is echoed. At 100k items one new item then costs each side
# ~100 keyed tokens instead of ~6,250 (a node's CPU at steady state, decision 0040).
NARROW_ABOVE = 1024
NARROW_PART = 64
NARROW_BRANCH = 32


def session_key(initiator_salt: bytes, responder_salt: bytes) -> bytes:
    """The key of one session, from both sides' salts (each side contributes half)."""
    for salt in (initiator_salt, responder_salt):
        if len(salt) != SALT_BYTES:
            raise RemoteProtocolError(
                f"hello salt is {len(salt)} bytes, expected {SALT_BYTES} for {COMPACT_CAPABILITY}"
            )
    return hashlib.blake2b(
        initiator_salt + responder_salt, digest_size=32, person=_KEY_PERSON
    ).digest()


@dataclass(frozen=True, slots=True)
class Dialect:
    """Fingerprint and id-list naming for ranges sent (or received) in one form."""

    compact: bool
    fingerprint_bytes: int
    list_id_bytes: int  # plain: token prefix (16); compact: short id width
    key: bytes = b""

    def fingerprint(self, snap: Snapshot, lo: int, hi: int, summed: bool = False) -> bytes:
        """Our fingerprint of ``lo..hi``: plain; or compact, a keyed sum (``summed``) or a
        keyed hash of the plain 256-bit sum."""
        if not self.compact:
            return snap.fingerprint(lo, hi)
        if not summed:
            data = snap.range_sum(lo, hi) + (hi - lo).to_bytes(8, "little")
            return hashlib.blake2b(
                data, digest_size=self.fingerprint_bytes, key=self.key, person=_FP_PERSON
            ).digest()
        return self.keyed_sum(snap, lo, hi).to_bytes(self.fingerprint_bytes, "little")

    def keyed_sum(self, snap: Snapshot, lo: int, hi: int) -> int:
        return snap.keyed_sum(self.key, self.fingerprint_bytes, lo, hi)

    def keyed_token(self, snap: Snapshot, i: int) -> int:
        return snap.keyed_token(self.key, self.fingerprint_bytes, i)

    @property
    def mask(self) -> int:
        return (1 << (8 * self.fingerprint_bytes)) - 1

    def list_id(self, token: bytes) -> bytes:
        """How an item is named in an id list of this form (not a fallback list)."""
        if not self.compact:
            return token[:LIST_TOKEN_BYTES]
        return hashlib.blake2b(
            token, digest_size=self.list_id_bytes, key=self.key, person=_ID_PERSON
        ).digest()


PLAIN = Dialect(compact=False, fingerprint_bytes=FINGERPRINT_BYTES, list_id_bytes=LIST_TOKEN_BYTES)

MIN_FINGERPRINT_BYTES = 4
MAX_FINGERPRINT_BYTES = 8  # keyed tokens are kept in 64-bit words
MAX_SHORT_ID_BYTES = 12  # below 16 and 32: a short id never has the length of another name


def compact(key: bytes, fingerprint_bytes: int, short_id_bytes: int) -> Dialect:
    """The compact form with these widths; a width out of bounds is the peer's error."""
    if not MIN_FINGERPRINT_BYTES <= fingerprint_bytes <= MAX_FINGERPRINT_BYTES:
        raise RemoteProtocolError(
            f"fingerprint width {fingerprint_bytes} is outside "
            f"{MIN_FINGERPRINT_BYTES}..{MAX_FINGERPRINT_BYTES} bytes"
        )
    if not 1 <= short_id_bytes <= MAX_SHORT_ID_BYTES:
        raise RemoteProtocolError(
            f"short id width {short_id_bytes} is outside 1..{MAX_SHORT_ID_BYTES} bytes"
        )
    return Dialect(True, fingerprint_bytes, short_id_bytes, key)


def frame_dialect(
    key: bytes | None, compact_form: bool, fingerprint_bytes: int, short_id_bytes: int
) -> Dialect:
    """The form a peer's ranges are in: plain, or compact with the widths it used (``key``:
    the session's, None while compact ranges are not agreed)."""
    if not compact_form:
        return PLAIN
    if key is None:
        raise RemoteProtocolError(
            f"got compact ranges, but {COMPACT_CAPABILITY} was not agreed in the hellos"
        )
    return compact(key, fingerprint_bytes, short_id_bytes)


class SessionForm:
    """The form of one session's ranges. Ours stay plain until both hellos offer compact
    ranges; then the key takes both salts, the initiator's first. Our salt is fresh per
    session unless a test pins it."""

    def __init__(
        self,
        offered: bool,
        widths: tuple[int, int],
        initiator: bool,
        salt: bytes | None = None,
    ) -> None:
        """``offered``: this side offers compact ranges; ``widths``: the fingerprint and
        short-id widths of the ranges it sends in that form."""
        self.offered = offered
        self.salt = os.urandom(SALT_BYTES) if salt is None else salt
        self.key: bytes | None = None
        self.dialect = PLAIN
        self._widths = widths
        self._initiator = initiator

    @property
    def hello_salt(self) -> bytes:
        """Our share of the key, in our hello (none when we do not offer compact ranges)."""
        return self.salt if self.offered else b""

    def agree(self, hello: Hello) -> bool:
        """The peer's ``hello`` read: True when both sides offer compact ranges, which ours
        are from now on."""
        if not self.offered or COMPACT_CAPABILITY not in hello.capabilities:
            return False
        salts = (self.salt, hello.salt)
        self.key = session_key(*(salts if self._initiator else salts[::-1]))
        self.dialect = compact(self.key, *self._widths)
        return True

    def incoming(self, frame: Recon) -> Dialect:
        """The form of the peer's ranges in ``frame``."""
        widths = (frame.fingerprint_bytes, frame.short_id_bytes)
        return frame_dialect(self.key, frame.compact, *widths)
