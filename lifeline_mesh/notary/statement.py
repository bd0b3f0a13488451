"""Attestations: signed statements about entries, as immutable, content-addressed items.

Pure: no I/O, no clock. An attestation's bytes (its *item*) are::

    item      = statement + public_key (32 bytes) + signature (64 bytes)
    statement = F("lifeline-mesh/attest/v1") + F(role) + F(subject) + F(ts) + F(node_id)
                + F(x1) + ... + F(xk)
    F(x)      = str(len(utf8(x))) + ":" + x + "\\n"          (the entry's framing, DESIGN §3)

The signature is ed25519 over ``statement``; the domain string keeps it from ever being
valid as a signature over anything else. Roles (docs/notary.md has the full table):

* ``author``  subject = entry id; no extra fields; ts = the entry's ts.
* ``witness`` subject = number of ids (decimal); extras = the received ids, sorted, unique;
  ts = the witness's own clock when it stored them.
* ``summary`` subject = line name; extras = entry count, fingerprint, tips (sorted, unique);
  ts = the signer's clock. (First wave; still verified and still evidence.)
* ``state``   subject = line name; extras = entry count, fingerprint, tip digest, part
  ``k/n``, tips (sorted, unique, at most MAX_STATE_TIPS); ts = the signer's clock. A state
  with more tips is signed as ``n`` parts that share count, fingerprint, digest and ts.
* ``imported`` subject = entry id; extras = the entry's ts; ts = the signer's clock: "this
  node held this unsigned entry, dated so, at ts" (custody, not authorship).
* ``enrolled`` subject = the signer's own node id; extras = its mesh certificate (DER,
  base64url); ts = the certificate's start: an ephemeral CI runner's membership, signed by
  the mesh CA, carried in each line it signs in (decision 0024). Once per runner and line.
* ``sealed``  subject = number of ids (decimal); extras = the ids of author signatures the
  signer made, sorted, unique, 1…MAX_SEAL_IDS; ts = the signer's clock: one signature that
  vouches for a batch of the signer's own author signatures, so a receiver need not check
  each (decision 0149). Kept beside the sets, never reconciled (lifeline_mesh/notary/seals.py).

``state`` and ``imported`` are the second wave's kinds: they travel in the ``statements``
set, which first-wave peers do not open (docs/decisions/0015-witness-statements.md).
``enrolled`` travels in the ``attestations`` set, beside the runner's author signatures it
vouches for (a sender sends it with them: decision 0024).

The item id is ``sha256(item)``; the sync sort key is the statement ts in microseconds
since the epoch (content-derived, so every node orders items alike).
"""

from __future__ import annotations

import enum
import functools
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property, lru_cache

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from lifeline.entry import ID_RE, normalize_ts
from lifeline.errors import BadSignature, ConfigError, EntryTooLarge, InvalidEntry
from lifeline.lines import validate_line_name
from lifeline_mesh.home.identity import NodeIdentity, node_id_for

__all__ = [
    "DOMAIN",
    "FIRST_WAVE",
    "IMPORTED_TS_FIELD",
    "IN_ATTESTATIONS",
    "MAX_CERT_CHARS",
    "MAX_ITEM_BYTES",
    "MAX_SEAL_IDS",
    "MAX_STATE_TIPS",
    "MAX_SUMMARY_TIPS",
    "MAX_WITNESS_IDS",
    "REORDER_WINDOW_S",
    "Attestation",
    "Role",
    "decode",
    "imported_ts",
    "made_together",
    "sign",
    "tips_digest",
    "ts_micros",
]

DOMAIN = "lifeline-mesh/attest/v1"
KEY_BYTES = 32
SIG_BYTES = 64
MAX_WITNESS_IDS = 1_000  # a sync batch of ~1 MiB holds about this many ~1 KB entries
MAX_SEAL_IDS = 1_000  # a seal of this many ids is ~68 KiB, under MAX_ITEM_BYTES
MAX_SUMMARY_TIPS = 256
MAX_STATE_TIPS = 1_000  # per part of a state statement: ~67 KiB, under MAX_ITEM_BYTES
MAX_ITEM_BYTES = 72 * 1024  # a full witness receipt is ~68 KiB
_TS_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z\Z")
_NODE_RE = re.compile(r"^[0-9a-z]{4}(-[0-9a-z]{4}){3}-[0-9a-z]{2}\Z")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# The exact bytes of an author statement (all but a few per cent of a line's items): one
# match instead of the general field loop. Anything it matches, the general parser reads
# as the same fields (each length prefix is the length its pattern allows), and every
# field check but the day of the month is in the pattern: the ts in stored form (as
# lifeline.entry's _CANONICAL_TS), the node id as _NODE_RE, the subject as ID_RE. What it
# does not match goes through the general parser and its checks, which word the refusal.
_AUTHOR_STATEMENT = re.compile(
    rb"23:lifeline-mesh/attest/v1\n6:author\n64:([0-9a-f]{64})\n"
    rb"27:([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    rb"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{6}Z)\n"
    rb"22:([0-9a-z]{4}(?:-[0-9a-z]{4}){3}-[0-9a-z]{2})\n"
)


class Role(enum.Enum):
    AUTHOR = "author"
    WITNESS = "witness"
    SUMMARY = "summary"
    STATE = "state"
    IMPORTED = "imported"
    ENROLLED = "enrolled"
    SEALED = "sealed"


# The kinds a first-wave peer knows (set ``attestations``); the others travel in the
# ``statements`` set, which only second-wave peers open.
FIRST_WAVE = frozenset({Role.AUTHOR, Role.WITNESS, Role.SUMMARY})
_STATES = frozenset({Role.SUMMARY, Role.STATE})  # statements of a whole line's state
# The kinds stored and reconciled in the ``attestations`` set: the first wave's, and a
# runner's enrollment, which must travel with the author signatures it vouches for.
IN_ATTESTATIONS = FIRST_WAVE | {Role.ENROLLED}
MAX_CERT_CHARS = 4096  # a runner certificate is ~700 base64 characters
_B64URL_RE = re.compile(r"^[A-Za-z0-9_-]+\Z")


def tips_digest(tips: Sequence[str]) -> str:
    """sha256 (hex) of the sorted, unique tips joined by newlines: names a whole tip set."""
    return hashlib.sha256("\n".join(sorted(set(tips))).encode("ascii")).hexdigest()


def _frame(value: str) -> bytes:
    raw = value.encode("utf-8")
    return str(len(raw)).encode("ascii") + b":" + raw + b"\n"


# Two statements by one node signed less than this apart may carry their counts in the
# wrong order (decision 0035): before 6b440fc, two sessions ending together read the time
# before waiting for the write lock. That is no rollback: losing entries and signing again
# takes a restart, never a fraction of a second.
REORDER_WINDOW_S = 1.0


def made_together(earlier: str, later: str) -> bool:
    """Were two stored-form times less than ``REORDER_WINDOW_S`` apart?"""
    return abs(ts_micros(later) - ts_micros(earlier)) < REORDER_WINDOW_S * 1_000_000


def ts_micros(ts: str) -> int:
    """Microseconds since the epoch of a stored-form ts (the sort key)."""
    # Fixed layout (checked by _TS_RE at decode): slicing is far cheaper than strptime,
    # which dominated the admission of large batches. Only the day goes through datetime,
    # cached: a line's statements share few days, but rarely a second.
    seconds = int(ts[11:13]) * 3600 + int(ts[14:16]) * 60 + int(ts[17:19])
    return (_epoch_day(ts[:10]) * 86_400 + seconds) * 1_000_000 + int(ts[20:26])


@lru_cache(maxsize=4096)
def _epoch_day(date: str) -> int:
    return (datetime(int(date[0:4]), int(date[5:7]), int(date[8:10]), tzinfo=UTC) - _EPOCH).days


@dataclass(frozen=True)
class Attestation:
    """One signed statement. Build with :func:`sign`, read with :func:`decode`."""

    role: Role
    subject: str
    ts: str
    node_id: str
    extras: tuple[str, ...]
    public_key: bytes
    signature: bytes

    @cached_property  # computed once: receipts carry up to 1,000 ids
    def statement(self) -> bytes:
        fields = (DOMAIN, self.role.value, self.subject, self.ts, self.node_id, *self.extras)
        if "".join(fields).isascii():  # a length in characters is then one in bytes
            return "".join([f"{len(f)}:{f}\n" for f in fields]).encode("ascii")
        return b"".join(_frame(f) for f in fields)

    @cached_property  # computed once: receipts carry up to 1,000 ids
    def item(self) -> bytes:
        return self.statement + self.public_key + self.signature

    @cached_property  # computed once: receipts carry up to 1,000 ids
    def id(self) -> bytes:
        return hashlib.sha256(self.item).digest()

    @cached_property  # computed once: receipts carry up to 1,000 ids
    def sort_key(self) -> int:
        return ts_micros(self.ts)

    def entry_ids(self) -> tuple[str, ...]:
        """The entry ids this statement is about (author, imported: one; witness: the batch)."""
        if self.role is Role.AUTHOR or self.role is Role.IMPORTED:
            return (self.subject,)
        if self.role is Role.WITNESS:
            return self.extras
        return ()

    @property
    def summary_count(self) -> int:
        """The entry count a summary or state statement claims (0 for other kinds)."""
        return int(self.extras[0]) if self.role in _STATES else 0

    @property
    def summary_tips(self) -> tuple[str, ...]:
        """The tips a summary or state statement (this part of it) names."""
        if self.role is Role.SUMMARY:
            return self.extras[2:]
        return self.extras[4:] if self.role is Role.STATE else ()

    @property
    def state_key(self) -> tuple[str, str, str]:
        """(count, fingerprint, tip digest): equal for every part of one signed state."""
        return (self.extras[0], self.extras[1], self.extras[2])

    @property
    def part(self) -> tuple[int, int]:
        """(k, n) of a state statement: part k of n."""
        k, _, n = self.extras[3].partition("/")
        return int(k), int(n)

    def verify(self, *, signature: bool = True) -> None:
        """Raise BadSignature unless the signer's key matches node_id and signed this.

        ``signature=False`` checks the key against node_id only, for a caller that has the
        signatures of a whole batch checked elsewhere (lifeline_mesh.notary.verifier).
        """
        node_id, key = _key(self.public_key)
        if node_id != self.node_id:
            raise BadSignature(
                f"{self.role.value} attestation claims node {self.node_id} but is signed by "
                f"the key of {node_id}; it was re-signed under another node's id — refuse it"
            )
        if not signature:
            return
        try:
            key.verify(self.statement, self.signature)
        except (BadSignatureError, ValueError) as exc:
            raise BadSignature(
                f"{self.role.value} attestation by {node_id} about {self.subject[:12]} does not "
                "verify; the signed statement or the signature was altered — refuse it"
            ) from exc


@functools.lru_cache(maxsize=4096)
def _key(public_key: bytes) -> tuple[str, VerifyKey]:
    # A mesh has few signers and many statements: parse each key and derive its id once.
    # Verification uses libsodium (PyNaCl): twice as fast as OpenSSL's ed25519 verify on
    # our benchmark (bench/history/notary.md), and verification is the sync hot path.
    try:
        return node_id_for(public_key), VerifyKey(public_key)
    except (ValueError, TypeError) as exc:
        raise BadSignature(f"attestation carries an invalid ed25519 public key ({exc})") from exc


def sign(identity: NodeIdentity, role: Role, subject: str, ts: str, *extras: str) -> Attestation:
    """A new attestation by ``identity``; its fields are checked as :func:`decode` would."""
    _check_fields(role, subject, ts, identity.node_id, extras)
    unsigned = Attestation(role, subject, ts, identity.node_id, extras, identity.public_key, b"")
    signed = Attestation(
        role, subject, ts, identity.node_id, extras, identity.public_key,
        identity.sign(unsigned.statement),
    )  # fmt: skip
    vars(signed)["statement"] = unsigned.statement  # a receipt frames 1,000 ids: once
    return signed


def _parse_frames(data: bytes, limit: int) -> list[str]:
    fields: list[str] = []
    pos = 0
    while pos < len(data):
        if len(fields) >= limit:
            raise EntryTooLarge(f"attestation has more than {limit} fields")
        colon = data.find(b":", pos, pos + 12)
        digits = data[pos:colon] if colon > 0 else b""
        if not digits.isdigit() or (len(digits) > 1 and digits[0:1] == b"0"):
            raise InvalidEntry(f"attestation field {len(fields)} has no valid length prefix")
        end = colon + 1 + int(digits)
        if end >= len(data) or data[end : end + 1] != b"\n":
            raise InvalidEntry(f"attestation field {len(fields)} overruns its frame")
        try:
            fields.append(data[colon + 1 : end].decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise InvalidEntry(f"attestation field {len(fields)} is not UTF-8") from exc
        pos = end + 1
    return fields


def decode(item: bytes) -> Attestation:
    """Parse and check an item's shape (not its signature: call ``verify``)."""
    if len(item) > MAX_ITEM_BYTES:
        raise EntryTooLarge(
            f"attestation is {len(item)} bytes, over the cap of {MAX_ITEM_BYTES}; refuse it"
        )
    if len(item) < KEY_BYTES + SIG_BYTES + len(DOMAIN):
        raise InvalidEntry(f"attestation of {len(item)} bytes is too short to hold a signature")
    item = bytes(item)
    body = item[: -(KEY_BYTES + SIG_BYTES)]
    key = item[-(KEY_BYTES + SIG_BYTES) : -SIG_BYTES]
    author = _AUTHOR_STATEMENT.fullmatch(body)
    if author is not None and _real_day(author[3], author[4]):
        # Every check of _check_fields for an author statement is in the pattern: build
        # it as the dataclass's own __init__ would, without its per-field setattr calls.
        att = object.__new__(Attestation)
        ts = author[2].decode("ascii")
        vars(att).update(
            role=Role.AUTHOR,
            subject=author[1].decode("ascii"),
            ts=ts,
            node_id=author[5].decode("ascii"),
            extras=(),
            public_key=key,
            signature=item[-SIG_BYTES:],
        )
    else:
        fields = _parse_frames(body, 5 + max(MAX_WITNESS_IDS, MAX_SEAL_IDS, MAX_STATE_TIPS + 4))
        if len(fields) < 5 or fields[0] != DOMAIN:
            raise InvalidEntry(f"not a {DOMAIN} attestation (first field {fields[:1]!r})")
        try:
            role = Role(fields[1])
        except ValueError:
            raise InvalidEntry(f"unknown attestation role {fields[1][:40]!r}") from None
        subject, ts, node_id, extras = fields[2], fields[3], fields[4], tuple(fields[5:])
        _check_fields(role, subject, ts, node_id, extras)
        att = Attestation(role, subject, ts, node_id, extras, key, item[-SIG_BYTES:])
    # Strict framing: the fields re-encode to exactly these bytes, so the statement and the
    # item need not be framed again (they are what verify, the id and storage read).
    # The sort key and the id are read for every received item: set here, they skip the
    # lock that functools.cached_property takes on a first read (Python 3.11).
    cached = vars(att)
    cached["statement"] = body
    cached["item"] = item
    cached["id"] = hashlib.sha256(item).digest()
    cached["sort_key"] = ts_micros(ts)
    return att


# Where an ``imported`` item keeps the ts it attests: its last field, F(ts) of a ts in
# stored form (27 characters, checked at decode), just before the key and the signature.
# (bytes from the item's end where the field starts, its length)
IMPORTED_TS_FIELD = (3 + 27 + 1 + KEY_BYTES + SIG_BYTES, 3 + 27 + 1)


def imported_ts(field: bytes) -> str | None:
    """The entry ts an admitted ``imported`` item attests, from its field (read at
    ``IMPORTED_TS_FIELD`` without decoding the item: a line received with a million imports
    would spend 14 s decoding them to check its entries). None when those bytes are no such
    field (a row edited outside lifeline-mesh, which ``verify`` reports)."""
    if len(field) != IMPORTED_TS_FIELD[1] or field[:3] != b"27:" or field[-1:] != b"\n":
        return None
    ts = field[3:-1].decode("ascii", "replace")
    return ts if _TS_RE.match(ts) else None


def _real_day(month: bytes, day: bytes) -> bool:
    """Whether day ``day`` (01-31) exists in month ``month`` (01-12) of every year it may
    fall in; February 29 is left to the general checks (normalize_ts), which know the year."""
    return day <= b"28" or (day <= b"30" and month != b"02") or month in _LONG_MONTHS


_LONG_MONTHS = frozenset({b"01", b"03", b"05", b"07", b"08", b"10", b"12"})


def _check_fields(role: Role, subject: str, ts: str, node_id: str, extras: tuple[str, ...]) -> None:
    if not _TS_RE.match(ts) or normalize_ts(ts) != ts:
        raise InvalidEntry(
            f"attestation ts {ts[:40]!r} is not in the form 2026-01-31T12:00:00.000000Z"
        )
    if not _NODE_RE.match(node_id):
        raise InvalidEntry(f"attestation node id {node_id[:40]!r} is not a node id")
    if role is Role.AUTHOR:
        if not ID_RE.match(subject) or extras:
            raise InvalidEntry(f"author attestation must name one entry id, got {subject[:70]!r}")
    elif role is Role.WITNESS:
        _check_ids(extras, MAX_WITNESS_IDS, "witness receipt")
        if subject != str(len(extras)) or not extras:
            raise InvalidEntry(f"witness receipt says {subject[:20]!r} ids but lists {len(extras)}")
    elif role is Role.SEALED:
        _check_ids(extras, MAX_SEAL_IDS, "seal")
        if subject != str(len(extras)) or not extras:
            raise InvalidEntry(f"seal says {subject[:20]!r} ids but lists {len(extras)}")
    elif role is Role.IMPORTED:
        if not ID_RE.match(subject) or len(extras) != 1 or not _TS_RE.match(extras[0]):
            raise InvalidEntry("imported attestation must name one entry id and its ts")
    elif role is Role.STATE:
        _check_state(subject, extras)
    elif role is Role.ENROLLED:
        if subject != node_id or len(extras) != 1:
            raise InvalidEntry("enrolled statement must name its signer and carry one certificate")
        if len(extras[0]) > MAX_CERT_CHARS or not _B64URL_RE.match(extras[0]):
            raise InvalidEntry("enrolled statement certificate is not base64url of its size")
    else:
        try:
            validate_line_name(subject)
        except ConfigError as exc:
            raise InvalidEntry(f"summary attestation: {exc}") from exc
        if len(extras) < 2 or not _COUNT_RE.match(extras[0]) or not _HEX32_RE.match(extras[1]):
            raise InvalidEntry("summary attestation needs count, fingerprint and tips")
        if str(int(extras[0])) != extras[0]:
            raise InvalidEntry(f"summary count {extras[0][:20]!r} is not canonical")
        _check_ids(extras[2:], MAX_SUMMARY_TIPS, "summary tips")


_PART_RE = re.compile(r"^([1-9][0-9]{0,6})/([1-9][0-9]{0,6})\Z")
# A count: ASCII digits only (str.isdigit takes "²", which int() refuses), and at most 18 of
# them, so that int() takes it and SQLite stores it.
_COUNT_RE = re.compile(r"^[0-9]{1,18}\Z")
_HEX32_RE = re.compile(r"^[0-9a-f]{32}\Z")
_HEX64_RE = re.compile(r"^[0-9a-f]{64}\Z")


def _check_state(line: str, extras: tuple[str, ...]) -> None:
    try:
        validate_line_name(line)
    except ConfigError as exc:
        raise InvalidEntry(f"state statement: {exc}") from exc
    if len(extras) < 4:
        raise InvalidEntry("state statement needs count, fingerprint, tip digest and part")
    count, fp, digest, part = extras[:4]
    if not _COUNT_RE.match(count) or str(int(count)) != count:
        raise InvalidEntry(f"state statement count {count[:20]!r} is not canonical")
    if not _HEX32_RE.match(fp) or not _HEX64_RE.match(digest):
        raise InvalidEntry("state statement fingerprint or tip digest is not hex of its size")
    parts = _PART_RE.match(part)
    if parts is None or int(parts[1]) > int(parts[2]):
        raise InvalidEntry(f"state statement part {part[:20]!r} is not k/n with 1 <= k <= n")
    tips = extras[4:]
    _check_ids(tips, MAX_STATE_TIPS, "state statement tips")
    if not tips and count != "0":
        raise InvalidEntry("state statement of a non-empty line names no tips")
    if parts[2] == "1" and tips_digest(tips) != digest:
        raise InvalidEntry("state statement tip digest does not match its tips")


def _check_ids(ids: tuple[str, ...], cap: int, what: str) -> None:
    if len(ids) > cap:
        raise EntryTooLarge(f"{what} lists {len(ids)} ids, over the cap of {cap}; split it")
    for n, entry_id in enumerate(ids):
        if not ID_RE.match(entry_id):
            raise InvalidEntry(f"{what} id {entry_id[:70]!r} is not a 64-hex entry id")
        if n and ids[n - 1] >= entry_id:
            raise InvalidEntry(f"{what} ids must be sorted and unique (at {entry_id[:12]})")
