"""Who may sign: the ``KnownSigners`` interface and its default, file-based implementation.

:class:`FileSigners` knows the local node and the node ids listed in the members document
(``members.json``, kept by the membership layer: membership/registry.py), whose expected
shape is::

    {"members": [
        {"node_id": "k7q2-9fmx-ah3d-rt0e-5w"},
        {"node_id": "ab12-...-zz", "revoked_at": "2026-03-01T00:00:00Z"}
    ]}

A bare list of such objects, or of node id strings, is accepted too. Other keys (role,
name, certificate) are ignored here, except ``expires_at``: an ephemeral CI runner's
certificate expiry. Runners retired before decision 0024 are listed apart, in
``"retired": [[node_id, expires_at, credential], ...]``; they stay known signers, with that
expiry (newer runners are proven by the ``enrolled`` statement in the line: enrollment.py).
The signed revocations in ``revocations.json`` beside it mark their nodes revoked, members
or not (a revoked runner is no member any more).

On a node of a mesh (it holds the mesh CA certificate) the file is a cache, not evidence
(decision 0047): a row counts only when its ``cert`` is the mesh CA's certificate of that
node, role and credential (``membership/proof.py``); the others are listed in
:attr:`FileSigners.unproven`, which ``verify`` reports. Without a mesh the list is this
node's own configuration and is taken as written.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from cryptography import x509

from lifeline.entry import normalize_ts
from lifeline.errors import ConfigError, InvalidEntry
from lifeline_mesh.home.identity import parse_node_id
from lifeline_mesh.home.mesh_state import CA_CERT, MEMBERS, REVOCATIONS, MeshState
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.proof import RowProof
from lifeline_mesh.membership.registry import Member, Registry

__all__ = ["FileSigners", "KnownSigners", "SignerState", "SignerStatus"]


class SignerState(enum.Enum):
    KNOWN = "known"
    UNKNOWN = "unknown"
    REVOKED = "revoked"


@dataclass(frozen=True, slots=True)
class SignerStatus:
    state: SignerState
    revoked_at: str | None = None  # stored-form ts; signatures at or after it are flagged
    expires_at: str | None = None  # stored-form ts; an ephemeral runner's signatures after it


class KnownSigners(Protocol):
    def status(self, node_id: str) -> SignerStatus: ...


class FileSigners:
    """The local node plus the members listed in members.json (see module docstring)."""

    def __init__(
        self,
        local: Iterable[str],
        revoked: Mapping[str, str] | None = None,
        expires: Mapping[str, str] | None = None,
    ) -> None:
        self._known = set(local)
        self._revoked = dict(revoked or {})
        self._expires = dict(expires or {})
        self.unproven: list[tuple[str, str]] = []  # (node id, why) of rows not believed

    def status(self, node_id: str) -> SignerStatus:
        expires = self._expires.get(node_id)
        if node_id in self._revoked:
            return SignerStatus(SignerState.REVOKED, self._revoked[node_id], expires)
        if node_id in self._known:
            return SignerStatus(SignerState.KNOWN, None, expires)
        return SignerStatus(SignerState.UNKNOWN)

    @classmethod
    def current(cls, home: NodeHome, local_node_id: str | None) -> FileSigners:
        """:meth:`load`, kept on ``home`` until the members, the revocations or the CA
        certificate change (``NodeHome.kept``): what every session of a node asks."""
        return home.kept(
            f"signers {local_node_id}",
            (MEMBERS, REVOCATIONS, CA_CERT),
            lambda: cls.load(home, local_node_id),
        )

    @classmethod
    def load(cls, home: NodeHome, local_node_id: str | None) -> FileSigners:
        known: set[str] = {local_node_id} if local_node_id else set()
        revoked: dict[str, str] = {}
        expires: dict[str, str] = {}
        state = home.documents
        members = state.read(MEMBERS)
        unproven: list[tuple[str, str]] = []
        if members is not None:
            rows, unproven = _rows(state, members)
            for node_id, revoked_at, expires_at in rows:
                if revoked_at is None:
                    known.add(node_id)
                else:
                    revoked[node_id] = revoked_at
                if expires_at is not None:
                    expires[node_id] = expires_at
        revocations = state.read(REVOCATIONS)
        for node_id, revoked_at in _read_revocations(state.where(REVOCATIONS), revocations):
            if revoked_at < revoked.get(node_id, "~"):
                revoked[node_id] = revoked_at
        signers = cls(known, revoked, expires)
        signers.unproven = unproven
        return signers


Row = tuple[str, str | None, str | None]  # node id, revoked_at, expires_at


def _rows(state: MeshState, members: bytes) -> tuple[list[Row], list[tuple[str, str]]]:
    """The rows to believe and the unproven ones: with a mesh CA, only rows it certified."""
    path = state.where(MEMBERS)
    ca_pem = state.read(CA_CERT)
    if ca_pem is None:
        return _read_members(path, members), []
    try:
        registry = Registry.from_json(json.loads(members.decode("utf-8")))
        proof = RowProof(x509.load_pem_x509_certificate(ca_pem))
    except (ValueError, ConfigError) as exc:
        raise ConfigError(
            f"{path} is not a members list of this mesh ({exc}); restore it from another "
            "member with `lifeline-mesh members --pull HOST:PORT`"
        ) from exc
    rows: list[Row] = []
    unproven: list[tuple[str, str]] = []
    for member in registry.members.values():
        why = proof.member(member)
        if why is not None:
            unproven.append((member.node_id, why))
            continue
        when, end = (_ts(path, member.node_id, k, v) for k, v in _times(member))
        rows.append((member.node_id, when, end))
    now = dt.datetime.now(dt.UTC)
    for gone in registry.retired.values():
        why = proof.retired(gone, now)
        if why is not None:
            unproven.append((gone.node_id, f"retired row: {why}"))
            continue
        rows.append((gone.node_id, None, _ts(path, gone.node_id, "expires_at", gone.expires_at)))
    return rows, unproven


def _times(member: Member) -> tuple[tuple[str, str | None], tuple[str, str | None]]:
    return ("revoked_at", member.revoked_at), ("expires_at", member.expires_at)


def _read_members(path: str, text: bytes) -> list[tuple[str, str | None, str | None]]:
    try:
        data: Any = json.loads(text.decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} is not readable JSON ({exc}); fix or remove it") from exc
    rows = data.get("members") if isinstance(data, dict) else data
    if not isinstance(rows, list):
        raise ConfigError(f'{path} must hold {{"members": [...]}}; see docs/notary.md')
    retired = data.get("retired", []) if isinstance(data, dict) else []
    if not isinstance(retired, list):
        raise ConfigError(f"{path}: retired must be a list of [node_id, expires_at, credential]")
    rows = rows + [
        {"node_id": r[0], "expires_at": r[1]} if isinstance(r, list) and len(r) == 3 else r
        for r in retired
    ]
    out: list[tuple[str, str | None, str | None]] = []
    for row in rows:
        raw = row if isinstance(row, str) else row.get("node_id") if isinstance(row, dict) else None
        if not isinstance(raw, str):
            raise ConfigError(f"{path}: member {row!r} has no node_id string")
        get = row.get if isinstance(row, dict) else {}.get
        out.append(
            (
                parse_node_id(raw),
                _ts(path, raw, "revoked_at", get("revoked_at")),
                _ts(path, raw, "expires_at", get("expires_at")),
            )
        )
    return out


def _read_revocations(path: str, raw: bytes | None) -> list[tuple[str, str]]:
    """``(node id, revoked_at)`` of each statement (their CA signatures were checked when
    they were stored: membership/revocation.py)."""
    if raw is None:
        return []
    try:
        rows = json.loads(raw.decode("utf-8")).get("statements", [])
        pairs = [(str(r["node_id"]), str(r["revoked_at"])) for r in rows]
    except (OSError, ValueError, AttributeError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path} is not a revocation list ({exc}); restore it") from exc
    out = []
    for node_id, when in pairs:
        stamp = _ts(path, node_id, "revoked_at", when)
        if stamp is not None:
            out.append((parse_node_id(node_id), stamp))
    return out


def _ts(path: str, node_id: str, name: str, value: object) -> str | None:
    try:
        return normalize_ts(value) if isinstance(value, str) else None
    except InvalidEntry as exc:
        raise ConfigError(f"{path}: member {node_id}: {name} {exc}") from exc
