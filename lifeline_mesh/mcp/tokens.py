"""Bearer tokens for the remote MCP server: issued by the node that serves them, stored hashed.

A token is ``lmt1_<node id>_<token id>_<secret>`` (about 85 characters): the node id of the
node that issued it (a token works only there), 8 random bytes naming it in the book, and
32 random bytes of secret. The node keeps, in ``.lifeline/mesh/mcp-tokens.json`` (0600,
written under the membership lock like the invite book), only ``sha256(secret)`` with the
token's name, role, agent, expiry and revocation time -- never the token itself, which is
printed once. A token's role is ``reader`` (the read tools) or ``member`` (the write tools
too, under the write policy, as the token's agent). Revoking takes effect at the next
request: the book is read on every check.

Refusals name the rule: *not a token*, *issued by another node*, *unknown*, *does not
match*, *revoked at T*, *expired at T*; each says what to do.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lifeline.errors import ConfigError, NotAuthenticated
from lifeline.validate import DEFAULT_LIMITS
from lifeline_mesh.home.identity import parse_node_id
from lifeline_mesh.membership import files
from lifeline_mesh.membership.registry import iso

__all__ = [
    "DEFAULT_TTL",
    "MAX_TTL",
    "ROLES",
    "TOKENS_FILE",
    "Grant",
    "TokenBook",
    "TokenRefused",
    "TokenSpec",
]

PREFIX = "lmt1_"
ROLES = ("reader", "member")
TOKENS_FILE = "mcp-tokens.json"
DEFAULT_TTL = dt.timedelta(days=30)
MAX_TTL = dt.timedelta(days=365)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_TOKEN = re.compile(r"lmt1_([a-z0-9]{18})_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")


class TokenRefused(NotAuthenticated):
    """A bearer token that does not grant access here; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class TokenSpec:
    """What ``mcp token issue`` asks for."""

    name: str
    role: str = "reader"
    ttl: dt.timedelta = DEFAULT_TTL
    agent: str | None = None  # the writes' agent name (default: the token's name)

    def check(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ConfigError(
                f"token name {self.name!r} must be 1-64 letters, digits, '.', '_' or '-' "
                "(e.g. ci-docs)"
            )
        if self.role not in ROLES:
            raise ConfigError(f"--role {self.role!r} is not one of {', '.join(ROLES)}")
        if not dt.timedelta(0) < self.ttl <= MAX_TTL:
            raise ConfigError(
                f"--ttl must be positive and at most {MAX_TTL.days}d; issue a new token "
                "when this one runs out"
            )
        agent = self.agent if self.agent is not None else self.name
        if not agent.strip() or len(agent.encode("utf-8")) > DEFAULT_LIMITS.field_bytes:
            raise ConfigError(
                f"--agent {agent!r} must be 1 to {DEFAULT_LIMITS.field_bytes} bytes; "
                "name the client, e.g. --agent ci"
            )


@dataclass(frozen=True, slots=True)
class Grant:
    """What a valid token grants: who writes (agent, author) and what (role)."""

    token_id: str
    name: str
    role: str
    agent: str
    expires_at: str

    @property
    def author(self) -> str:
        return f"token:{self.name}"


def _compact(node_id: str) -> str:
    return node_id.replace("-", "").lower()


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def _state(entry: dict[str, Any], now: dt.datetime) -> str:
    if entry.get("revoked_at") is not None:
        return "revoked"
    if iso(now) >= str(entry["expires_at"]):
        return "expired"
    return "active"


class TokenBook:
    """The tokens a node issued, by token id (one private JSON file)."""

    def __init__(self, root: Path, node_id: str) -> None:
        self.root = root
        self.node_id = node_id
        self.path = files.path_of(root, TOKENS_FILE)

    def load(self) -> dict[str, dict[str, Any]]:
        data = files.read_json(self.path, {}, private=True)
        if not isinstance(data, dict):
            raise ConfigError(f"{self.path} is not a JSON object; restore it from a backup")
        return data

    def _save(self, data: dict[str, dict[str, Any]]) -> None:
        text = json.dumps(data, indent=2, sort_keys=True) + "\n"
        files.write_atomic(self.path, text.encode("utf-8"), private=True)

    def issue(self, spec: TokenSpec, now: dt.datetime | None = None) -> tuple[str, dict[str, Any]]:
        """A new token (printed once; only its hash is kept) and its book row."""
        spec.check()
        now = now or dt.datetime.now(dt.UTC)
        token_id = secrets.token_hex(8)
        secret = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode("ascii").rstrip("=")
        entry: dict[str, Any] = {
            "name": spec.name,
            "role": spec.role,
            "agent": spec.agent if spec.agent is not None else spec.name,
            "node_id": self.node_id,
            "sha256": _digest(secret),
            "created_at": iso(now),
            "expires_at": iso(now + spec.ttl),
            "revoked_at": None,
        }
        with files.exclusive(self.root):
            data = self.load()
            live = [
                e for e in data.values() if e["name"] == spec.name and _state(e, now) == "active"
            ]
            if live:
                raise ConfigError(
                    f"an active MCP token named {spec.name!r} exists; revoke it first "
                    f"(`lifeline-mesh mcp token revoke {spec.name}`) or pick another name"
                )
            data[token_id] = entry
            self._save(data)
        return f"{PREFIX}{_compact(self.node_id)}_{token_id}_{secret}", entry

    def revoke(self, ref: str, now: dt.datetime | None = None) -> list[str]:
        """Revoke the live tokens named ``ref`` (or with that token id); their ids."""
        now = now or dt.datetime.now(dt.UTC)
        with files.exclusive(self.root):
            data = self.load()
            hits = [
                tid
                for tid, e in data.items()
                if (e["name"] == ref or tid == ref) and e.get("revoked_at") is None
            ]
            if not hits:
                names = sorted({str(e["name"]) for e in data.values()})
                raise ConfigError(
                    f"no unrevoked MCP token named {ref!r} on this node"
                    + (f" (known: {', '.join(names)})" if names else "")
                    + "; `lifeline-mesh mcp token list` shows them"
                )
            for tid in hits:
                data[tid]["revoked_at"] = iso(now)
            self._save(data)
        return hits

    def rows(self, now: dt.datetime | None = None) -> list[dict[str, Any]]:
        """Every token issued here with its state, newest first (no secrets, no hashes)."""
        now = now or dt.datetime.now(dt.UTC)
        out = [
            {
                "name": e["name"],
                "token_id": tid,
                "role": e["role"],
                "agent": e["agent"],
                "state": _state(e, now),
                "created_at": e["created_at"],
                "expires_at": e["expires_at"],
                "revoked_at": e.get("revoked_at"),
            }
            for tid, e in self.load().items()
        ]
        return sorted(out, key=lambda r: (r["created_at"], r["token_id"]), reverse=True)

    def check(self, token: str, now: dt.datetime | None = None) -> Grant:
        """The grant of ``token`` here, or :class:`TokenRefused` saying why."""
        now = now or dt.datetime.now(dt.UTC)
        found = _TOKEN.fullmatch(token.strip())
        if found is None:
            raise TokenRefused(
                "the bearer token is not an MCP token of lifeline-mesh (lmt1_...); "
                "issue one with `lifeline-mesh mcp token issue NAME` on the serving node"
            )
        node, token_id, secret = found.groups()
        if node != _compact(self.node_id):
            raise TokenRefused(
                f"the token was issued by node {_spelled(node)}, not by this node "
                f"({self.node_id}); ask this node's owner for a token"
            )
        entry = self.load().get(token_id)
        if entry is None or entry.get("node_id") != self.node_id:
            raise TokenRefused(
                f"token {token_id} is unknown here (not issued by this node's book); "
                "issue a new one with `lifeline-mesh mcp token issue NAME`"
            )
        if not hmac.compare_digest(str(entry["sha256"]), _digest(secret)):
            raise TokenRefused(
                f"token {token_id} ({entry['name']}) does not match (altered or mistyped); "
                "paste the whole token again"
            )
        if entry.get("revoked_at") is not None:
            raise TokenRefused(
                f"token {entry['name']!r} was revoked at {entry['revoked_at']}; "
                "ask the node's owner for a new one"
            )
        if iso(now) >= str(entry["expires_at"]):
            raise TokenRefused(
                f"token {entry['name']!r} expired at {entry['expires_at']}; issue a new one "
                f"(`lifeline-mesh mcp token issue {entry['name']}`) and update the client"
            )
        return Grant(token_id, entry["name"], entry["role"], entry["agent"], entry["expires_at"])


def _spelled(compact: str) -> str:
    """The node id as `lifeline-mesh id` prints it, when it is one."""
    try:
        return parse_node_id(compact)
    except ConfigError:
        return compact
