"""The members registry: ``<root>/.lifeline/mesh/members.json``.

One entry per node: ``{node_id, role, status: active|revoked, revoked_at, joined_at,
public_key}`` (public key in hex). The CA holder's copy is the authoritative one; joiners
get a copy with their certificate, and revocation statements (revocation.py) update every
copy. The notary reads signer status from here through :func:`signer_status`.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from lifeline.errors import ConfigError
from lifeline_mesh.identity import node_id_for, parse_node_id
from lifeline_mesh.membership import files

__all__ = ["ROLES", "Member", "Registry", "iso", "signer_status"]

ROLES = ("member", "reader")


def iso(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Member:
    node_id: str
    role: str
    status: str
    joined_at: str
    public_key: str
    revoked_at: str | None = None
    ca_holder: bool = False

    @classmethod
    def new(
        cls, public_key: bytes, role: str, now: dt.datetime, *, ca_holder: bool = False
    ) -> Member:
        if role not in ROLES:
            raise ConfigError(f"role {role!r} is not one of {', '.join(ROLES)}")
        return cls(
            node_id_for(public_key), role, "active", iso(now), public_key.hex(), None, ca_holder
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Member:
        try:
            member = cls(**{k: data[k] for k in data if k in cls.__dataclass_fields__})
            key = bytes.fromhex(member.public_key)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"members entry {data!r} is malformed ({exc})") from exc
        if len(key) != 32 or node_id_for(key) != parse_node_id(member.node_id):
            raise ConfigError(f"members entry {member.node_id}: node id does not match its key")
        return member


@dataclass
class Registry:
    mesh_id: str
    name: str = ""
    members: dict[str, Member] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path) -> Registry:
        path = files.path_of(root, files.MEMBERS)
        data = files.read_json(path, None)
        if data is None:
            raise ConfigError(
                f"no members registry at {path}; this node has not created or joined a mesh"
            )
        return cls.from_json(data)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Registry:
        if not isinstance(data, dict) or not isinstance(data.get("mesh_id"), str):
            raise ConfigError("members list has no mesh_id; restore it from another member")
        members = [Member.from_dict(m) for m in data.get("members", [])]
        return cls(data["mesh_id"], str(data.get("name", "")), {m.node_id: m for m in members})

    def to_json(self) -> dict[str, Any]:
        members = [asdict(self.members[k]) for k in sorted(self.members)]
        return {"mesh_id": self.mesh_id, "name": self.name, "members": members}

    def save(self, root: Path) -> None:
        text = json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"
        files.write_atomic(files.path_of(root, files.MEMBERS), text.encode())

    def add(self, member: Member) -> None:
        """Add or update a member; a revoked node stays revoked."""
        old = self.members.get(member.node_id)
        if old is not None and old.status == "revoked":
            member = replace(member, status="revoked", revoked_at=old.revoked_at)
        self.members[member.node_id] = member

    def merge(self, other: Registry) -> None:
        """Take members we do not know yet (a copy from a peer of the same mesh)."""
        if other.mesh_id != self.mesh_id:
            raise ConfigError(f"members list of mesh {other.mesh_id} is not ours ({self.mesh_id})")
        for node_id, member in other.members.items():
            if node_id not in self.members:
                self.members[node_id] = member

    def mark_revoked(self, node_id: str, revoked_at: str) -> None:
        old = self.members.get(node_id)
        if old is None:
            return  # the revocation list itself is what every check consults
        if old.revoked_at is None or revoked_at < old.revoked_at:
            self.members[node_id] = replace(old, status="revoked", revoked_at=revoked_at)


def signer_status(root: Path, node_id: str) -> tuple[str, str | None]:
    """``(status, revoked_at)`` of a signer: status is active, revoked or unknown."""
    from lifeline_mesh.membership.revocation import RevocationList  # revocation imports us

    revoked = RevocationList.load(root).revoked_at(node_id)
    if revoked is not None:
        return "revoked", revoked
    try:
        member = Registry.load(root).members.get(parse_node_id(node_id))
    except ConfigError:
        member = None
    if member is None:
        return "unknown", None
    return member.status, member.revoked_at
