"""Proposals: drafts an agent may not write directly, kept aside until a human decides.

They live in ``NodeHome.proposals_path`` (not in a line: a proposal is never
synced and never part of the truth). Two tables:

* ``proposals`` -- one row per draft, immutable once written;
* ``decisions`` -- the audit trail: one row per approve/reject, append-only. SQLite
  triggers refuse UPDATE and DELETE on both tables, a proposal can be decided only once
  (UNIQUE), and each decision row carries the sha256 of the previous one, so a rewrite done
  behind our back (e.g. with the triggers dropped) shows up in :meth:`ProposalBook.check_trail`.

Synchronous and small; async callers run it in a thread.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from lifeline.errors import AmbiguousPrefix, ConfigError, NotFound, StoreError
from lifeline.fsutil import create_private
from lifeline.ledger import Draft
from lifeline.store.sqlite_open import enter_wal
from lifeline_mesh.home.node_home import NodeHome

__all__ = ["Decision", "Proposal", "ProposalBook"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS proposals (
    id         TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    line       TEXT NOT NULL,
    draft      TEXT NOT NULL,
    idem_key   TEXT,
    UNIQUE (line, idem_key)
);
CREATE TABLE IF NOT EXISTS decisions (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    proposal_id TEXT NOT NULL UNIQUE REFERENCES proposals(id),
    verdict     TEXT NOT NULL CHECK (verdict IN ('approved', 'rejected')),
    decided_at  TEXT NOT NULL,
    decided_by  TEXT NOT NULL,
    reason      TEXT NOT NULL,
    entry_id    TEXT,
    prev_digest TEXT NOT NULL,
    digest      TEXT NOT NULL
);
CREATE TRIGGER IF NOT EXISTS proposals_immutable BEFORE UPDATE ON proposals
BEGIN SELECT RAISE(ABORT, 'proposals are immutable'); END;
CREATE TRIGGER IF NOT EXISTS proposals_kept BEFORE DELETE ON proposals
BEGIN SELECT RAISE(ABORT, 'proposals are never deleted'); END;
CREATE TRIGGER IF NOT EXISTS decisions_immutable BEFORE UPDATE ON decisions
BEGIN SELECT RAISE(ABORT, 'the decision trail is append-only'); END;
CREATE TRIGGER IF NOT EXISTS decisions_kept BEFORE DELETE ON decisions
BEGIN SELECT RAISE(ABORT, 'the decision trail is append-only'); END;
"""
GENESIS = "0" * 64


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: str  # approved | rejected
    decided_at: str
    decided_by: str
    reason: str
    entry_id: str | None


@dataclass(frozen=True, slots=True)
class Proposal:
    id: str
    created_at: str
    line: str
    draft: Draft
    idem_key: str | None
    decision: Decision | None = None

    @property
    def status(self) -> str:
        return "pending" if self.decision is None else self.decision.verdict

    def to_dict(self) -> dict[str, Any]:
        """The proposal as JSON data (``lifeline-mesh proposals --json``; the MCP tools
        answer the same fields, typed: :class:`~lifeline_mesh.mcp.shapes.ProposalView`)."""
        out: dict[str, Any] = {
            "id": self.id,
            "created_at": self.created_at,
            "line": self.line,
            "status": self.status,
            "idempotency_key": self.idem_key,
            "draft": _draft_dict(self.draft),
        }
        if self.decision is not None:
            d = self.decision
            out["decision"] = {
                "verdict": d.verdict,
                "decided_at": d.decided_at,
                "decided_by": d.decided_by,
                "reason": d.reason,
                "entry_id": d.entry_id,
            }
        return out


def _draft_dict(draft: Draft) -> dict[str, Any]:
    return {
        "kind": draft.kind,
        "summary": draft.summary,
        "body": draft.body,
        "author": draft.author,
        "agent": draft.agent,
        "provider": draft.provider,
        "model": draft.model,
        "parents": None if draft.parents is None else list(draft.parents),
        "dedup_key": draft.dedup_key,
    }


def _draft_from(text: str) -> Draft:
    data = json.loads(text)
    parents = data.pop("parents")
    return Draft(**data, parents=None if parents is None else tuple(parents))


def _digest(prev: str, row: tuple[Any, ...]) -> str:
    payload = json.dumps([prev, *row], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ProposalBook:
    """The node's proposals and their decision trail (one SQLite file)."""

    def __init__(self, home: NodeHome) -> None:
        self.path = home.proposals_path

    @contextmanager
    def _connect(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            create_private(self.path)  # drafts of entries, as private as a line
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open proposals file {self.path}: {exc}") from exc
        try:
            enter_wal(conn, 30.0)
            conn.executescript(_SCHEMA)
            if write:
                conn.execute("BEGIN IMMEDIATE")
            yield conn
            if write:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise StoreError(f"proposals file {self.path}: {exc}") from exc
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()

    def add(self, line: str, draft: Draft, created_at: str) -> tuple[Proposal, bool]:
        """Keep a draft. A draft whose idempotency key is already proposed on this line
        returns the earlier proposal (and False), so a retried call proposes once."""
        key = draft.dedup_key
        body = json.dumps(_draft_dict(draft), ensure_ascii=False, sort_keys=True)
        pid = hashlib.sha256(f"{line}\n{created_at}\n{body}".encode()).hexdigest()[:16]
        with self._connect(write=True) as conn:
            if key is not None:
                row = conn.execute(
                    "SELECT id FROM proposals WHERE line = ? AND idem_key = ?", (line, key)
                ).fetchone()
                if row:
                    return self._load(conn, row[0]), False
            conn.execute(
                "INSERT INTO proposals VALUES (?, ?, ?, ?, ?)", (pid, created_at, line, body, key)
            )
            return self._load(conn, pid), True

    def get(self, prefix: str) -> Proposal:
        if not self.path.exists():
            raise NotFound(f"no proposal {prefix!r}: this node has no proposals yet")
        with self._connect(write=False) as conn:
            return self._load(conn, self._resolve(conn, prefix))

    def find(self, *, status: str | None = None) -> list[Proposal]:
        """Every proposal (or those with ``status``), oldest first."""
        if not self.path.exists():  # reading never creates the file
            return []
        with self._connect(write=False) as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM proposals ORDER BY created_at, id")]
            found = [self._load(conn, pid) for pid in ids]
        return [p for p in found if status is None or p.status == status]

    def decide(
        self,
        prefix: str,
        verdict: str,
        *,
        decided_at: str,
        decided_by: str,
        reason: str = "",
        entry_id: str | None = None,
    ) -> Proposal:
        """Record the one decision on a pending proposal (append-only)."""
        if verdict not in ("approved", "rejected"):
            raise ConfigError(f"verdict {verdict!r} is not approved or rejected")
        with self._connect(write=True) as conn:
            pid = self._resolve(conn, prefix)
            current = self._load(conn, pid)
            if current.decision is not None:
                d = current.decision
                raise ConfigError(
                    f"proposal {pid} was already {d.verdict} at {d.decided_at} by "
                    f"{d.decided_by}; a decision is final (propose again to change it)"
                )
            last = conn.execute("SELECT digest FROM decisions ORDER BY seq DESC LIMIT 1").fetchone()
            prev = last[0] if last else GENESIS
            row = (pid, verdict, decided_at, decided_by, reason, entry_id)
            conn.execute(
                "INSERT INTO decisions (proposal_id, verdict, decided_at, decided_by, reason,"
                " entry_id, prev_digest, digest) VALUES (?,?,?,?,?,?,?,?)",
                (*row, prev, _digest(prev, row)),
            )
            return self._load(conn, pid)

    def check_trail(self) -> list[str]:
        """Problems in the decision chain (empty when intact)."""
        problems: list[str] = []
        prev = GENESIS
        if not self.path.exists():
            return problems
        with self._connect(write=False) as conn:
            for seq, *row, prev_digest, digest in conn.execute(
                "SELECT seq, proposal_id, verdict, decided_at, decided_by, reason, entry_id,"
                " prev_digest, digest FROM decisions ORDER BY seq"
            ):
                if prev_digest != prev or digest != _digest(prev, tuple(row)):
                    problems.append(f"decision #{seq} on proposal {row[0]} was altered or removed")
                prev = digest
        return problems

    @staticmethod
    def _resolve(conn: sqlite3.Connection, prefix: str) -> str:
        text = prefix.strip().lower()
        if not text or any(c not in "0123456789abcdef" for c in text):
            raise NotFound(f"{prefix!r} is not a proposal id; `lifeline-mesh proposals` lists them")
        rows = conn.execute(
            "SELECT id FROM proposals WHERE id >= ? AND id < ? ORDER BY id LIMIT 2",
            (text, text + "g"),
        ).fetchall()
        if not rows:
            raise NotFound(f"no proposal {prefix!r}; `lifeline-mesh proposals` lists them")
        if len(rows) > 1:
            raise AmbiguousPrefix(f"proposal prefix {prefix!r} matches several; type more")
        return str(rows[0][0])

    @staticmethod
    def _load(conn: sqlite3.Connection, pid: str) -> Proposal:
        pid_, created_at, line, draft, key = conn.execute(
            "SELECT id, created_at, line, draft, idem_key FROM proposals WHERE id = ?", (pid,)
        ).fetchone()
        row = conn.execute(
            "SELECT verdict, decided_at, decided_by, reason, entry_id FROM decisions"
            " WHERE proposal_id = ?",
            (pid,),
        ).fetchone()
        decision = Decision(*row) if row else None
        return Proposal(pid_, created_at, line, _draft_from(draft), key, decision)
