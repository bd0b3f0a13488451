"""The folded state of a line: the facts the current truth is derived from.

Every field is a function of the *set* of entries folded, not of their order: maps keyed by
id, sorted lists, counters and a bounded top-K. So folding the same set in any order (or in
several increments) gives the same state, and :meth:`State.to_json` gives the same bytes.
Derived views (what is superseded, what is in force) live in :mod:`lifeline.truth.views`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["RECENT_KEEP", "STATE_VERSION", "Item", "OlderSnapshot", "State"]

STATE_VERSION = 2  # 2: rewords
RECENT_KEEP = 64  # newest entries kept for the Recent section (some may be superseded)


class OlderSnapshot(ValueError):
    """A snapshot written by another version of the state: fold the line again (expected
    once after an upgrade, not a problem)."""


# A tracked item: [kind, ts, summary, why excerpt, thread or ""].
Item = list[str]


@dataclass
class State:
    """Order-independent accumulators; see the module docstring."""

    count: int = 0
    digest: int = 0  # sum of the ids as integers mod 2**256: a set fingerprint
    items: dict[str, Item] = field(default_factory=dict)
    corrections: dict[str, list[str]] = field(default_factory=dict)  # id -> targets
    rewords: list[str] = field(default_factory=list)  # corrections saying "status: open", sorted
    pins: dict[str, str] = field(default_factory=dict)  # pin note id -> pinned id
    checkpoints: dict[str, list[list[str]]] = field(default_factory=dict)  # thread -> [ts,id]
    threads: dict[str, list[list[str]]] = field(default_factory=dict)  # thread -> [ts,id]
    contributors: dict[str, int] = field(default_factory=dict)  # "provider/model" -> n
    kinds: dict[str, int] = field(default_factory=dict)
    recent: list[list[str]] = field(default_factory=list)  # newest [ts, id], sorted
    integrity: dict[str, str] = field(default_factory=dict)  # bad id -> what its content hashes to

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["digest"] = f"{self.digest:064x}"
        out["version"] = STATE_VERSION
        return out

    def to_json(self) -> str:
        """Canonical bytes of the state: key-sorted, compact."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> State:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            raise OlderSnapshot("state snapshot has another version")
        data.pop("version")
        data["digest"] = int(data["digest"], 16)
        return cls(**data)

    @property
    def head(self) -> str:
        """A short fingerprint of the set of entries (same set, same head)."""
        return f"{self.digest:064x}"[:16]
