"""The members registry: ``<root>/.lifeline/mesh/members.json``.

One entry per node: ``{node_id, role, status: active|revoked, revoked_at, joined_at,
public_key, cert}`` (public key in hex), plus ``expires_at`` and ``credential`` for an
ephemeral CI runner. ``cert`` is the row's evidence: the node certificate the mesh CA issued
(base64 DER; it names the node id, mesh, role, credential and expiry). The file is a cache
of those certificates and of the CA-signed revocations (revocation.py), never evidence by
itself: what a peer sends is kept only when its certificate verifies (proof.py, decision
0047), and status comes from the revocation statements, not from a row. The notary reads
signer status from here (:func:`~lifeline_mesh.membership.revocation.signer_status`
adds the revocation list).

Ephemeral runners do not stay members: once a runner's certificate has expired,
:meth:`Registry.prune` drops it, leaving nothing behind — its membership travels with its
signatures instead (the ``enrolled`` statement, decision 0024), so this list is bounded by
the members and the runners running at once, not by the jobs ever run. ``retired`` holds
the compact ``[node_id, expires_at, credential, cert]`` rows of runners enrolled before that
change (their lines carry no enrollment; ``carried`` is false): read, merged and kept, and
added to only by those runners, so it stops growing once they have expired.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from lifeline.errors import ConfigError
from lifeline_mesh.home.identity import node_id_for, parse_node_id
from lifeline_mesh.home.mesh_state import MEMBERS, read_doc_json
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.transport.authz import MeshRole

__all__ = ["ROLES", "Member", "Registry", "Retired", "iso", "member_ids"]

ROLES = tuple(MeshRole)  # in the order invite tokens number them


def iso(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Member:
    node_id: str
    role: MeshRole
    status: str
    joined_at: str
    public_key: str
    revoked_at: str | None = None
    ca_holder: bool = False
    expires_at: str | None = None  # an ephemeral runner's certificate expiry
    credential: str | None = None  # the CI credential that enrolled it
    # Its certificate travels in the lines it signs in (decision 0024): at expiry it leaves
    # no row. False for a runner enrolled before that change: it retires to a legacy row.
    carried: bool = False
    cert: str | None = None  # the CA's certificate of this node, base64 DER (proof.py)

    @classmethod
    def new(
        cls,
        public_key: bytes,
        role: str,
        now: dt.datetime,
        *,
        ca_holder: bool = False,
        expires: dt.datetime | None = None,
        credential: str | None = None,
        cert: str | None = None,
    ) -> Member:
        key_hex, expires_at = public_key.hex(), iso(expires) if expires else None
        node_id = node_id_for(public_key)
        return cls(
            node_id,
            MeshRole.parse(role),
            "active",
            iso(now),
            key_hex,
            None,
            ca_holder,
            expires_at,
            credential,
            carried=credential is not None,
            cert=cert,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Member:
        try:
            member = cls(**{k: data[k] for k in data if k in cls.__dataclass_fields__})
            member = replace(member, role=MeshRole(member.role))
            wrong = [k for k, kind in _TYPES.items() if not isinstance(getattr(member, k), kind)]
            if wrong:  # a peer's row: "node_id": 5 crashed `members --pull` and `sync`
                raise TypeError(f"{', '.join(wrong)} of the wrong type")
            key = bytes.fromhex(member.public_key)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"members entry {str(data)[:300]} is malformed ({exc})") from exc
        if len(key) != 32 or node_id_for(key) != parse_node_id(member.node_id):
            raise ConfigError(f"members entry {member.node_id}: node id does not match its key")
        return member


# The fields read here, by type, in a row from a file or a peer (the certificate and the
# rest are the proof's to judge: a bad one refuses its row alone, membership/proof.py).
_TYPES: dict[str, type] = {"node_id": str, "public_key": str}


@dataclass(frozen=True, slots=True)
class Retired:
    """A runner that expired before decision 0024: a signer, no longer a member (legacy).
    ``cert`` is its certificate (the proof, decision 0047); rows written before carry none."""

    node_id: str
    expires_at: str
    credential: str
    cert: str | None = None

    def row(self) -> list[str]:
        base = [self.node_id, self.expires_at, self.credential]
        return base if self.cert is None else [*base, self.cert]

    @classmethod
    def from_row(cls, row: Any) -> Retired:
        if not (
            isinstance(row, list) and len(row) in (3, 4) and all(isinstance(x, str) for x in row)
        ):
            raise ConfigError(
                f"retired entry {row!r} is not [node_id, expires_at, credential, cert]"
            )
        return cls(parse_node_id(row[0]), row[1], row[2], row[3] if len(row) == 4 else None)


@dataclass
class Registry:
    mesh_id: str
    name: str = ""
    members: dict[str, Member] = field(default_factory=dict)
    retired: dict[str, Retired] = field(default_factory=dict)

    @classmethod
    def load(cls, home: NodeHome) -> Registry:
        data = read_doc_json(home, MEMBERS, None)
        if data is None:
            where = home.documents.where(MEMBERS)
            raise ConfigError(
                f"no members registry at {where}; this node has not created or joined a mesh"
            )
        return cls.from_json(data)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Registry:
        if not isinstance(data, dict) or not isinstance(data.get("mesh_id"), str):
            raise ConfigError("members list has no mesh_id; restore it from another member")
        members = [Member.from_dict(m) for m in data.get("members", [])]
        retired = [Retired.from_row(r) for r in data.get("retired", [])]
        return cls(
            data["mesh_id"],
            str(data.get("name", "")),
            {m.node_id: m for m in members},
            {r.node_id: r for r in retired},
        )

    def to_json(self) -> dict[str, Any]:
        members = [_compact(self.members[k]) for k in sorted(self.members)]
        out: dict[str, Any] = {"mesh_id": self.mesh_id, "name": self.name, "members": members}
        if self.retired:
            out["retired"] = [self.retired[k].row() for k in sorted(self.retired)]
        return out

    def save(self, home: NodeHome) -> None:
        text = json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"
        home.documents.write(MEMBERS, text.encode())

    def add(self, member: Member) -> None:
        """Add or update a member; a revoked node stays revoked."""
        old = self.members.get(member.node_id)
        if old is not None and old.status == "revoked":
            member = replace(member, status="revoked", revoked_at=old.revoked_at)
        self.members[member.node_id] = member

    def prune(self, now: dt.datetime) -> list[Member]:
        """Drop the ephemeral runners whose certificates have expired; returns them. One
        enrolled before decision 0024 (its lines carry no enrollment) retires to a row."""
        cutoff = iso(now)
        gone = [
            m for m in self.members.values() if m.expires_at is not None and m.expires_at <= cutoff
        ]
        for member in gone:
            del self.members[member.node_id]
            if not member.carried and member.expires_at is not None:
                row = Retired(
                    member.node_id, member.expires_at, member.credential or "", member.cert
                )
                self.retired[member.node_id] = row
        return gone

    def mark_revoked(self, node_id: str, revoked_at: str) -> None:
        old = self.members.get(node_id)
        if old is None:
            return  # the revocation list itself is what every check consults
        if old.revoked_at is None or revoked_at < old.revoked_at:
            self.members[node_id] = replace(old, status="revoked", revoked_at=revoked_at)


def _compact(member: Member) -> dict[str, Any]:
    """A member as JSON, without the two runner fields when they are empty (older readers
    and the synced list stay as they were for permanent members)."""
    data = asdict(member)
    for name in ("expires_at", "credential", "cert"):
        if data[name] is None:
            del data[name]
    if not data["carried"]:
        del data["carried"]
    return data


def member_ids(home: NodeHome) -> frozenset[str] | None:
    """The node ids of the members list, read again only when it changes (what LAN
    discovery asks of every name it hears, decision 0121); None when the node keeps none
    or cannot read it."""

    def load() -> frozenset[str] | None:
        try:
            return frozenset(Registry.load(home).members)
        except (ConfigError, KeyError, TypeError, ValueError):
            return None

    return home.kept("member ids", (MEMBERS,), load)
