"""Invite tokens: a one-time, expiring, pasteable string that lets a newcomer join.

A token carries the role, the expiry, an 8-byte token id, a 16-byte random secret, the
SHA-256 fingerprint of the mesh CA certificate (the joiner pins the CA with it) and the
inviter's address(es); ``lm1_`` + base64url, about 110 characters. The inviter keeps, in
``invites.json`` (0600), ``sha256(secret)`` per token id and whether it was used. The joiner
never sends the secret: it sends an HMAC keyed by ``sha256(secret)`` over its request, and
only after TLS proved the server holds a key certified by the pinned CA.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import re
import secrets
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lifeline.errors import ConfigError, PermissionDenied
from lifeline_mesh.home.mesh_state import INVITES, read_doc_json
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership import files
from lifeline_mesh.membership.ca import MeshCA
from lifeline_mesh.membership.certs import fingerprint
from lifeline_mesh.membership.registry import ROLES, iso
from lifeline_mesh.transport.authz import MeshRole

__all__ = [
    "Grant",
    "InviteBook",
    "Token",
    "issue_invite",
    "join_proof",
    "parse_duration",
    "spend_credential",
]

PREFIX = "lm1_"
_HEAD = struct.Struct(">BBI8s16s32s")  # version, role, expiry (unix s), id, secret, CA fp
_VERSION = 1  # a one-time invite
_VERSION_CI = 2  # a CI credential (credential.py): reusable; the tail also names lines
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
MAX_TTL = dt.timedelta(days=365)  # an invite is for joining soon; it is not a credential
# Longer than any lifetime a caller takes (each checks its own cap after), and far inside
# what a timedelta and an expiry date can hold: past it a duration is refused here.
LONGEST_DURATION = dt.timedelta(days=36_500)


def parse_duration(text: str, option: str = "duration") -> dt.timedelta:
    """``90s``, ``10m``, ``2h``, ``7d``, ``1h30m`` → timedelta (at most
    :data:`LONGEST_DURATION`); ``option`` names it in a refusal (``--ttl``)."""
    parts = re.fullmatch(r"(?:[0-9]+[smhdw])+", text.strip().lower())
    if not parts:
        raise ConfigError(f"{option} {text[:40]!r} is not like 10m, 2h, 7d or 1h30m")
    found = re.findall(r"([0-9]+)([smhdw])", text.lower())
    longest = int(LONGEST_DURATION.total_seconds())
    # a number of more digits than that is over it already (int() refuses 4,300 digits)
    over = any(len(n.lstrip("0")) > len(str(longest)) for n, _u in found)
    seconds = longest + 1 if over else sum(int(n) * _UNITS[u] for n, u in found)
    if seconds <= 0:
        raise ConfigError(f"{option} {text!r} must be positive")
    if seconds > longest:
        raise ConfigError(
            f"{option} {text[:40]!r} is longer than {LONGEST_DURATION.days}d; "
            "give a shorter one, e.g. 30d"
        )
    return dt.timedelta(seconds=seconds)


def check_ttl(ttl: dt.timedelta) -> dt.timedelta:
    """An invite's lifetime: positive and at most :data:`MAX_TTL`."""
    if not dt.timedelta(0) < ttl <= MAX_TTL:
        raise ConfigError(
            f"an invite of {ttl.days} days is too long-lived; give --ttl up to "
            f"{MAX_TTL.days}d (an invite is for joining soon: make a new one when needed)"
        )
    return ttl


@dataclass(frozen=True, slots=True)
class Token:
    role: MeshRole
    expires: int  # unix seconds
    token_id: bytes
    secret: bytes
    ca_fingerprint: bytes
    addresses: tuple[str, ...]
    ci: bool = False  # a CI enrollment credential rather than a one-time invite
    sync_addresses: tuple[str, ...] = ()  # CI: the peer(s) a job pulls from and syncs to
    lines: tuple[str, ...] = ()  # CI: the lines a job pulls

    @property
    def kind(self) -> str:
        return "CI credential" if self.ci else "invite token"

    def encode(self) -> str:
        head = _HEAD.pack(
            _VERSION_CI if self.ci else _VERSION,
            ROLES.index(self.role),
            self.expires,
            self.token_id,
            self.secret,
            self.ca_fingerprint,
        )
        tail = [self.addresses, self.sync_addresses, self.lines] if self.ci else [self.addresses]
        raw = head + "\n".join(",".join(part) for part in tail).encode()
        return PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Token:
        hint = "paste the whole line printed by `lifeline-mesh invite`"
        text = text.strip()
        if not text.startswith(PREFIX):
            raise ConfigError(f"{text[:12]!r}… is not a lifeline-mesh invite token; {hint}")
        body = text[len(PREFIX) :]
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            version, role, expires, tid, secret, fp = _HEAD.unpack_from(raw)
            addresses = raw[_HEAD.size :].decode()
        except (ValueError, struct.error) as exc:
            raise ConfigError(f"invite token is damaged or truncated ({exc}); {hint}") from exc
        if version not in (_VERSION, _VERSION_CI) or role >= len(ROLES):
            raise ConfigError(f"invite token version {version} is not supported; {hint}")
        parts = [tuple(a for a in part.split(",") if a) for part in addresses.split("\n")]
        if len(parts) != (3 if version == _VERSION_CI else 1):
            raise ConfigError(f"invite token is damaged (its address list is malformed); {hint}")
        if version == _VERSION:
            return cls(ROLES[role], expires, tid, secret, fp, parts[0])
        return cls(ROLES[role], expires, tid, secret, fp, parts[0], True, parts[1], parts[2])

    @property
    def key(self) -> bytes:
        return hashlib.sha256(self.secret).digest()


@dataclass(frozen=True, slots=True)
class Grant:
    """What spending a token allows: a role and, for a CI runner, an expiry and a name."""

    role: MeshRole
    credential: str | None = None
    cert_expires: dt.datetime | None = None
    lines: tuple[str, ...] = ()  # a runner's only lines (its credential's); empty: every line


def join_proof(key: bytes, token_id: bytes, csr_der: bytes, node_public_key: bytes) -> bytes:
    """HMAC binding the token to this very request (a captured proof cannot be reused)."""
    msg = b"lifeline-mesh/join/v1\n" + token_id + hashlib.sha256(csr_der).digest() + node_public_key
    return hmac.new(key, msg, hashlib.sha256).digest()


class InviteBook:
    """The invites this node issued (``invites.json``): single use, expiry, proof check."""

    def __init__(self, home: NodeHome) -> None:
        self.home = home

    def load(self) -> dict[str, dict[str, Any]]:
        data: dict[str, dict[str, Any]] = read_doc_json(self.home, INVITES, {})
        return data

    def save(self, data: dict[str, dict[str, Any]]) -> None:
        text = json.dumps(data, indent=2, sort_keys=True) + "\n"
        self.home.documents.write(INVITES, text.encode())

    def record(self, token: Token, now: dt.datetime) -> None:
        with files.exclusive(self.home):
            self._record(token, now)

    def _record(self, token: Token, now: dt.datetime) -> None:
        data = self.load()
        data[token.token_id.hex()] = {
            "role": token.role,
            "expires_at": iso(dt.datetime.fromtimestamp(token.expires, dt.UTC)),
            "key": token.key.hex(),
            "created_at": iso(now),
            "used_at": None,
            "used_by": None,
        }
        self.save(data)

    def consume(
        self, token_id: bytes, check: Callable[[bytes], bool], node_id: str, now: dt.datetime
    ) -> MeshRole:
        """Check and spend an invite; returns its role. Refusals say which rule failed.

        Holds the membership lock from the read to the write, so two joins racing for one
        token — in one server process or in two on the same root — cannot both spend it.
        """
        with files.exclusive(self.home):
            return self.spend(token_id, check, node_id, now).role

    def spend(
        self, token_id: bytes, check: Callable[[bytes], bool], node_id: str, now: dt.datetime
    ) -> Grant:
        """:meth:`consume` for a caller that already holds the membership lock; a CI
        credential (credential.py issues it) is spent once per job, up to its number of uses
        (:func:`spend_credential`)."""
        data = self.load()
        entry = data.get(token_id.hex())
        if entry is None:
            raise PermissionDenied(
                "token was not issued by this node (or was altered); ask for a new one"
            )
        if entry.get("kind") == "ci":
            grant = spend_credential(entry, check, now)
        else:
            grant = Grant(self._spend_invite(entry, check, node_id, now))
        self.save(data)
        return grant

    def _spend_invite(
        self, entry: dict[str, Any], check: Callable[[bytes], bool], node_id: str, now: dt.datetime
    ) -> MeshRole:
        # The proof first: a caller holding only a token's id (no secret) learns nothing
        # of it, not whether it was used, by whom, or whether it is still good.
        if not check(bytes.fromhex(str(entry["key"]))):
            raise PermissionDenied("invite proof does not match the token; the token was altered")
        if entry["used_at"] is not None:
            raise PermissionDenied(
                f"invite token already used at {entry['used_at']} by {entry['used_by']}; "
                "a token works once — ask for a new invite"
            )
        if iso(now) >= str(entry["expires_at"]):
            raise PermissionDenied(
                f"invite token expired at {entry['expires_at']}; ask for a new invite"
            )
        entry.update(used_at=iso(now), used_by=node_id)
        return MeshRole.parse(str(entry["role"]))


def spend_credential(
    entry: dict[str, Any], check: Callable[[bytes], bool], now: dt.datetime
) -> Grant:
    """Check one enrollment against ``entry`` and count it (the caller holds the lock)."""
    name = entry["name"]
    if not check(bytes.fromhex(str(entry["key"]))):
        raise PermissionDenied(
            f"CI credential {name!r} refused: altered (the proof does not match the token); "
            "paste the whole token into the CI secret again"
        )
    if entry.get("revoked_at") is not None:
        raise PermissionDenied(
            f"CI credential {name!r} refused: revoked at {entry['revoked_at']}; "
            "ask the mesh's CA holder for a new one"
        )
    if entry.get("replaced_at") is not None:
        raise PermissionDenied(
            f"CI credential {name!r} refused: replaced by a rotation at {entry['replaced_at']}; "
            "store the new token in the CI secret"
        )
    if iso(now) >= str(entry["expires_at"]):
        raise PermissionDenied(
            f"CI credential {name!r} refused: expired at {entry['expires_at']}; "
            f"rotate it (`lifeline-mesh credentials rotate {name}`) and update the CI secret"
        )
    uses = entry.get("uses")
    if uses is not None and int(entry["used"]) >= int(uses):
        raise PermissionDenied(
            f"CI credential {name!r} refused: exhausted (all {uses} uses spent); "
            f"rotate it (`lifeline-mesh credentials rotate {name}`) for more"
        )
    entry.update(used=int(entry["used"]) + 1, last_used_at=iso(now))
    expires = dt.datetime.fromisoformat(str(entry["expires_at"]).replace("Z", "+00:00"))
    cert_expires = min(now + dt.timedelta(seconds=int(entry["job_ttl_s"])), expires)
    # The lines the jobs pull are the only ones their runners may use: a job pulls
    # ``ledger`` when its credential names none, so that is its line then.
    lines = tuple(str(line) for line in entry.get("lines") or ()) or ("ledger",)
    return Grant(MeshRole.parse(str(entry["role"])), name, cert_expires, lines)


def issue_invite(
    home: NodeHome,
    role: str,
    ttl: dt.timedelta,
    addresses: list[str],
    now: dt.datetime | None = None,
) -> Token:
    """Make and record a one-time invite (only the CA holder can complete a join)."""
    mesh_role = MeshRole.parse(role, what="--role")
    check_ttl(ttl)
    now = now or dt.datetime.now(dt.UTC)
    ca = MeshCA.load(home)
    token = Token(
        role=mesh_role,
        expires=int((now + ttl).timestamp()),
        token_id=secrets.token_bytes(8),
        secret=secrets.token_bytes(16),
        ca_fingerprint=fingerprint(ca.cert),
        addresses=tuple(addresses),
    )
    token.encode()  # anything that cannot be encoded fails here, before the book is written
    InviteBook(home).record(token, now)
    return token
