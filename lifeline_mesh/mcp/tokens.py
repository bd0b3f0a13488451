"""Bearer tokens for the remote MCP server: issued by the node that serves them, stored hashed.

A token is ``lmt1_<node id>_<token id>_<secret>`` (about 85 characters): the node id of the
node that issued it (a token works only there), 8 random bytes naming it in the book, and
32 random bytes of secret. The node keeps, in its ``mcp-tokens.json`` document (a 0600
file, or a hub's database; written under the membership lock like the invite book), only
``sha256(secret)`` with the token's name, role, agent, expiry and revocation time -- never
the token itself, which is printed once. A token's role is ``reader`` (the read tools) or
``member`` (the write tools too, under the write policy, as the token's agent). Revoking
takes effect at the next request: the book is read on every check (a hub's, at most 2 s
old: home/pg_state.py).

Refusals name the rule: *not a token*, *issued by another node*, *unknown*, *does not
match*, *revoked at T*, *expired at T*; each says what to do.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from lifeline.errors import ConfigError, NotAuthenticated
from lifeline.validate import DEFAULT_LIMITS
from lifeline.wording import count
from lifeline_mesh.home.identity import parse_node_id
from lifeline_mesh.home.mesh_state import MCP_TOKENS, read_doc_json
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership import files
from lifeline_mesh.membership.registry import iso

__all__ = [
    "DEFAULT_TTL",
    "MAX_TTL",
    "ROLES",
    "Grant",
    "TokenBook",
    "TokenRecord",
    "TokenRefused",
    "TokenRow",
    "TokenSpec",
]

PREFIX = "lmt1_"
ROLES = ("reader", "member")
DEFAULT_TTL = dt.timedelta(days=30)
MAX_TTL = dt.timedelta(days=365)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_TOKEN = re.compile(r"lmt1_([a-z0-9]{18})_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")


Role = Literal["reader", "member"]
State = Literal["active", "revoked", "expired"]


class TokenRecord(BaseModel):
    """One token in the book: everything but the token itself (its secret's hash only)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    role: Role
    agent: str
    node_id: str  # the node that issued it: the only one that accepts it
    sha256: str
    created_at: str
    expires_at: str
    revoked_at: str | None = None

    def state(self, now: dt.datetime) -> State:
        if self.revoked_at is not None:
            return "revoked"
        if iso(now) >= self.expires_at:
            return "expired"
        return "active"


class TokenRow(BaseModel):
    """A token as `mcp token list` shows it: no hash, its state now."""

    name: str
    token_id: str
    role: Role
    agent: str
    state: State
    created_at: str
    expires_at: str
    revoked_at: str | None


_BOOK = TypeAdapter(dict[str, TokenRecord])


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


class TokenBook:
    """The tokens a node issued, by token id (one private JSON file)."""

    def __init__(self, home: NodeHome, node_id: str) -> None:
        self.home = home
        self.node_id = node_id
        self._checked: tuple[Any, dict[str, TokenRecord]] | None = None  # last document read

    def load(self) -> dict[str, TokenRecord]:
        """The book as stored now: read on every call (a revocation holds at the next
        request), validated again only when the document differs from the last one read."""
        data = read_doc_json(self.home, MCP_TOKENS, {})
        if self._checked is not None and self._checked[0] == data:
            return dict(self._checked[1])
        try:
            book = _BOOK.validate_python(data)
            self._checked = (data, book)
            return dict(book)
        except ValidationError as exc:
            where = self.home.documents.where(MCP_TOKENS)
            raise ConfigError(
                f"{where} is not a token book ({count(exc.error_count(), 'problem')}, first: "
                f"{exc.errors()[0]['msg']}); restore it from a backup, or move it away and "
                "issue new tokens"
            ) from exc

    def _save(self, data: dict[str, TokenRecord]) -> None:
        raw = _BOOK.dump_json(data, indent=2) + b"\n"
        self.home.documents.write(MCP_TOKENS, raw)

    def issue(self, spec: TokenSpec, now: dt.datetime | None = None) -> tuple[str, TokenRecord]:
        """A new token (printed once; only its hash is kept) and its book record."""
        spec.check()
        now = now or dt.datetime.now(dt.UTC)
        token_id = secrets.token_hex(8)
        secret = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode("ascii").rstrip("=")
        record = TokenRecord.model_validate(
            {
                "name": spec.name,
                "role": spec.role,
                "agent": spec.agent if spec.agent is not None else spec.name,
                "node_id": self.node_id,
                "sha256": _digest(secret),
                "created_at": iso(now),
                "expires_at": iso(now + spec.ttl),
            }
        )
        with files.exclusive(self.home):
            data = self.load()
            if any(r.name == spec.name and r.state(now) == "active" for r in data.values()):
                raise ConfigError(
                    f"an active MCP token named {spec.name!r} exists; revoke it first "
                    f"(`lifeline-mesh mcp token revoke {spec.name}`) or pick another name"
                )
            data[token_id] = record
            self._save(data)
        return f"{PREFIX}{_compact(self.node_id)}_{token_id}_{secret}", record

    def revoke(self, ref: str, now: dt.datetime | None = None) -> list[str]:
        """Revoke the unrevoked tokens named ``ref`` (or with that token id); their ids."""
        now = now or dt.datetime.now(dt.UTC)
        with files.exclusive(self.home):
            data = self.load()
            hits = [tid for tid, r in data.items() if ref in (r.name, tid) and r.revoked_at is None]
            if not hits:
                names = sorted({r.name for r in data.values()})
                raise ConfigError(
                    f"no unrevoked MCP token named {ref!r} on this node"
                    + (f" (known: {', '.join(names)})" if names else "")
                    + "; `lifeline-mesh mcp token list` shows them"
                )
            for tid in hits:
                data[tid] = data[tid].model_copy(update={"revoked_at": iso(now)})
            self._save(data)
        return hits

    def rows(self, now: dt.datetime | None = None) -> list[TokenRow]:
        """Every token issued here with its state, newest first (no secrets, no hashes)."""
        now = now or dt.datetime.now(dt.UTC)
        out = [
            TokenRow(
                name=r.name,
                token_id=tid,
                role=r.role,
                agent=r.agent,
                state=r.state(now),
                created_at=r.created_at,
                expires_at=r.expires_at,
                revoked_at=r.revoked_at,
            )
            for tid, r in self.load().items()
        ]
        return sorted(out, key=lambda r: (r.created_at, r.token_id), reverse=True)

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
        record = self.load().get(token_id)
        if record is None or record.node_id != self.node_id:
            raise TokenRefused(
                f"token {token_id} is unknown here (not issued by this node's book); "
                "issue a new one with `lifeline-mesh mcp token issue NAME`"
            )
        if not hmac.compare_digest(record.sha256, _digest(secret)):
            raise TokenRefused(
                f"token {token_id} ({record.name}) does not match (altered or mistyped); "
                "paste the whole token again"
            )
        if record.revoked_at is not None:
            raise TokenRefused(
                f"token {record.name!r} was revoked at {record.revoked_at}; "
                "ask the node's owner for a new one"
            )
        if record.state(now) == "expired":
            raise TokenRefused(
                f"token {record.name!r} expired at {record.expires_at}; issue a new one "
                f"(`lifeline-mesh mcp token issue {record.name}`) and update the client"
            )
        return Grant(token_id, record.name, record.role, record.agent, record.expires_at)


def _spelled(compact: str) -> str:
    """The node id as `lifeline-mesh id` prints it, when it is one."""
    try:
        return parse_node_id(compact)
    except ConfigError:
        return compact
