"""CI enrollment credentials: one stored secret, one ephemeral runner per job.

A credential is a token like an invite (``lm1_…``, version 2) that a CI system keeps as a
secret. Each job spends one use of it to enroll a fresh node, whose certificate lives for
the job (``--job-ttl``, default 6 h) and never past the credential itself. The CA holder
keeps it in ``invites.json`` beside the invites, under the same membership lock, so
enrollment is atomic across processes: a credential of ``--uses N`` enrolls N runners, not
one more, however many jobs race for it.

Refusals name the rule: *expired*, *exhausted*, *revoked*, *replaced by a rotation*, or
*altered* (the proof does not match). Revoking a credential refuses it from then on and
revokes every runner it enrolled whose certificate has not expired yet; rotating it issues
a new secret under the same name and refuses the old one (its runners finish their jobs).
"""

from __future__ import annotations

import datetime as dt
import re
import secrets
from dataclasses import dataclass
from typing import Any

from lifeline.errors import ConfigError
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership import files
from lifeline_mesh.membership.ca import MeshCA
from lifeline_mesh.membership.certs import fingerprint
from lifeline_mesh.membership.invite import InviteBook, Token
from lifeline_mesh.membership.registry import Registry, iso
from lifeline_mesh.membership.revocation import Revocation, revoke
from lifeline_mesh.transport.authz import MeshRole

__all__ = [
    "DEFAULT_JOB_TTL",
    "CredentialSpec",
    "credential_rows",
    "issue_credential",
    "revoke_credential",
    "rotate_credential",
]

DEFAULT_JOB_TTL = dt.timedelta(hours=6)
MAX_CREDENTIAL_TTL = dt.timedelta(days=400)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True, slots=True)
class CredentialSpec:
    name: str
    role: str = "member"
    ttl: dt.timedelta = dt.timedelta(days=90)
    uses: int | None = None  # None: unlimited
    job_ttl: dt.timedelta = DEFAULT_JOB_TTL
    lines: tuple[str, ...] = ()
    addresses: tuple[str, ...] = ()  # join port(s)
    sync_addresses: tuple[str, ...] = ()  # where jobs pull and sync back

    def check(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ConfigError(
                f"credential name {self.name!r} must be 1-64 letters, digits, '.', '_' or '-'"
            )
        MeshRole.parse(self.role, what="--role")
        if not dt.timedelta(0) < self.ttl <= MAX_CREDENTIAL_TTL:
            raise ConfigError(f"--ttl must be positive and at most {MAX_CREDENTIAL_TTL.days}d")
        if self.uses is not None and self.uses < 1:
            raise ConfigError("--uses must be a whole number >= 1, or 'unlimited'")
        if not dt.timedelta(minutes=1) <= self.job_ttl <= dt.timedelta(days=7):
            raise ConfigError("--job-ttl must be between 1m and 7d (how long one job runs)")


def _live(entry: dict[str, Any]) -> bool:
    return entry.get("revoked_at") is None and entry.get("replaced_at") is None


def _current(data: dict[str, dict[str, Any]], name: str) -> tuple[str, dict[str, Any]] | None:
    for token_id, entry in data.items():
        if entry.get("kind") == "ci" and entry.get("name") == name and _live(entry):
            return token_id, entry
    return None


def _mint(home: NodeHome, spec: CredentialSpec, now: dt.datetime) -> tuple[Token, dict[str, Any]]:
    ca = MeshCA.load(home)
    token = Token(
        role=MeshRole.parse(spec.role, what="--role"),
        expires=int((now + spec.ttl).timestamp()),
        token_id=secrets.token_bytes(8),
        secret=secrets.token_bytes(16),
        ca_fingerprint=fingerprint(ca.cert),
        addresses=spec.addresses,
        ci=True,
        sync_addresses=spec.sync_addresses,
        lines=spec.lines,
    )
    token.encode()  # anything that cannot be encoded fails here, before the book is written
    entry = {
        "kind": "ci",
        "name": spec.name,
        "role": spec.role,
        "expires_at": iso(dt.datetime.fromtimestamp(token.expires, dt.UTC)),
        "key": token.key.hex(),
        "created_at": iso(now),
        "uses": spec.uses,
        "used": 0,
        "last_used_at": None,
        "job_ttl_s": int(spec.job_ttl.total_seconds()),
        "ttl_s": int(spec.ttl.total_seconds()),
        "lines": list(spec.lines),
        "addresses": list(spec.addresses),
        "sync_addresses": list(spec.sync_addresses),
        "revoked_at": None,
        "replaced_at": None,
    }
    return token, entry


def issue_credential(home: NodeHome, spec: CredentialSpec, now: dt.datetime | None = None) -> Token:
    """Make and record a CI credential; a live one of the same name must be rotated."""
    spec.check()
    now = now or dt.datetime.now(dt.UTC)
    book = InviteBook(home)
    with files.exclusive(home):
        data = book.load()
        if _current(data, spec.name) is not None:
            raise ConfigError(
                f"a CI credential named {spec.name!r} exists; rotate it "
                f"(`lifeline-mesh credentials rotate {spec.name}`) or revoke it first"
            )
        token, entry = _mint(home, spec, now)
        data[token.token_id.hex()] = entry
        book.save(data)
    return token


def credential_rows(home: NodeHome, now: dt.datetime | None = None) -> list[dict[str, Any]]:
    """Every CI credential this node issued, newest first, with its state and runners."""
    now = now or dt.datetime.now(dt.UTC)
    try:
        registry: Registry | None = Registry.load(home)
    except ConfigError:
        registry = None
    rows = []
    for token_id, entry in InviteBook(home).load().items():
        if entry.get("kind") != "ci":
            continue
        name = entry["name"]
        running = (
            sum(1 for m in registry.members.values() if m.credential == name) if registry else 0
        )
        rows.append(
            {
                "name": name,
                "token_id": token_id,
                "state": _state(entry, now),
                "role": entry["role"],
                "expires_at": entry["expires_at"],
                "uses": entry["uses"],
                "used": entry["used"],
                "last_used_at": entry["last_used_at"],
                "job_ttl_s": entry["job_ttl_s"],
                "lines": entry["lines"],
                "runners": running if _live(entry) else 0,
                "created_at": entry["created_at"],
            }
        )
    return sorted(rows, key=lambda r: (r["name"], r["created_at"]), reverse=True)


def _state(entry: dict[str, Any], now: dt.datetime) -> str:
    if entry.get("revoked_at") is not None:
        return "revoked"
    if entry.get("replaced_at") is not None:
        return "rotated"
    if iso(now) >= str(entry["expires_at"]):
        return "expired"
    uses = entry.get("uses")
    if uses is not None and int(entry["used"]) >= int(uses):
        return "exhausted"
    return "active"


def _find(data: dict[str, dict[str, Any]], name: str) -> tuple[str, dict[str, Any]]:
    found = _current(data, name)
    if found is None:
        names = sorted({str(e["name"]) for e in data.values() if e.get("kind") == "ci"})
        raise ConfigError(
            f"no live CI credential named {name!r} on this node"
            + (f" (known: {', '.join(names)})" if names else "")
            + "; `lifeline-mesh credentials list` shows them"
        )
    return found


def rotate_credential(home: NodeHome, name: str, now: dt.datetime | None = None) -> Token:
    """A new secret under ``name``, same settings and lifetime; the old token is refused."""
    now = now or dt.datetime.now(dt.UTC)
    book = InviteBook(home)
    with files.exclusive(home):
        data = book.load()
        _, old = _find(data, name)
        spec = CredentialSpec(
            name=name,
            role=old["role"],
            ttl=dt.timedelta(seconds=int(old["ttl_s"])),
            uses=old["uses"],
            job_ttl=dt.timedelta(seconds=int(old["job_ttl_s"])),
            lines=tuple(old["lines"]),
            addresses=tuple(old["addresses"]),
            sync_addresses=tuple(old["sync_addresses"]),
        )
        token, entry = _mint(home, spec, now)
        old["replaced_at"] = iso(now)
        data[token.token_id.hex()] = entry
        book.save(data)
    return token


def revoke_credential(
    home: NodeHome, name: str, reason: str = "", now: dt.datetime | None = None
) -> list[Revocation]:
    """Refuse ``name`` from now on and revoke every runner it enrolled that still runs.

    The credential is marked in the same locked step in which a join spends it and adds
    its runner, so a runner is either in the list revoked here or refused."""
    now = now or dt.datetime.now(dt.UTC)
    book = InviteBook(home)
    with files.exclusive(home):
        data = book.load()
        _find(data, name)
        for entry in data.values():
            if entry.get("kind") == "ci" and entry.get("name") == name and _live(entry):
                entry["revoked_at"] = iso(now)
        book.save(data)
        registry = Registry.load(home)
        registry.prune(now)
        runners = sorted(m.node_id for m in registry.members.values() if m.credential == name)
    why = reason or f"CI credential {name} revoked"
    return [revoke(home, node_id, why, now) for node_id in runners]
