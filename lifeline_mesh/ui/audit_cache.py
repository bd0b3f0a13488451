"""Whole-line work for the viewer, computed in the background and kept per line: ``verify``'s
findings for the Mesh page (:class:`AuditCache`) and every entry's first witnesses for the
Entry page (:class:`WitnessCache`).

Both read every entry (and signature) of a line — seconds at 100k entries — so no page
waits for them: a page shows the last finished result with its age and asks for a new one
when a line changed since (new rows, a new head, new signed statements). The static export
waits for a fresh one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, Generic, TypeVar

from lifeline.errors import LifelineError
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.notary.audit import audit_line
from lifeline_mesh.notary.rules import Policy, verify_items
from lifeline_mesh.notary.signers import FileSigners, SignerState
from lifeline_mesh.notary.storage import NotaryStore
from lifeline_mesh.notary.witnessing import Mark, hand_down, marks_of, ranked

__all__ = [
    "FINDINGS_SHOWN",
    "AuditCache",
    "LineAudit",
    "LineWitnesses",
    "WitnessCache",
    "first_other",
]

log = logging.getLogger(__name__)

T = TypeVar("T")


FINDINGS_SHOWN = 100  # failures the Mesh page lists; it counts the rest


@dataclass(frozen=True, slots=True)
class LineAudit:
    """What the Mesh page shows of an audit: its counts, the first FINDINGS_SHOWN failures
    and the notes counted by check, not every finding (a note per unsigned entry is a
    million dicts, ~340 MB, at 1M entries)."""

    line: str
    key: tuple[int, ...]  # the line's state when it ran (see _key)
    finished_at: float
    report: dict[str, Any]  # LineReport.counts(): entries, signed, failures, ok...
    failures: list[dict[str, str]]  # the first FINDINGS_SHOWN failures
    notes: list[tuple[str, int]]  # (check, how many), by check


@dataclass(frozen=True, slots=True)
class LineWitnesses:
    line: str
    key: tuple[int, ...]
    finished_at: float
    marks: dict[str, list[Mark]]  # entry id → earliest (ts, node) of up to KEEP nodes


def line_key(conn: Any) -> tuple[int, ...]:
    """A line's state: the highest row of its entries and of its signed items (rows are only
    ever added, so a new row is a new state; reading three maxima costs microseconds)."""
    out: list[int] = []
    for table in ("entries", "attestations", "statements"):
        try:
            out.append(
                int(conn.execute(f"SELECT coalesce(max(seq), 0) FROM {table}").fetchone()[0])
            )
        except sqlite3.OperationalError:  # a line the notary never opened has no such table
            out.append(0)
    return tuple(out)


def _evidence(conn: sqlite3.Connection) -> list[bytes]:
    """The signed items that can witness (states, summaries, receipts), not the authors'
    signatures: those are most of a line's items and name no witness."""
    rows = conn.execute(
        "SELECT item FROM attestations WHERE role IN ('witness', 'summary')"
        " UNION ALL SELECT item FROM statements WHERE role = 'state'"
    ).fetchall()
    return [bytes(r[0]) for r in rows]


WALK_PAGE = 5_000  # entries (id and parents only) read at a time by the witness walk


def _walk_page(conn: sqlite3.Connection, after: tuple[Any, ...] | None) -> list[tuple[Any, ...]]:
    """The next WALK_PAGE entries, children before parents: newest first in the store's
    (height, ts, id) order, read from its index and rows (id and parents alone)."""
    bound = " WHERE (height, ts, id) < (?, ?, ?)" if after is not None else ""
    return conn.execute(
        f"SELECT height, ts, id, parents FROM entries{bound}"
        " ORDER BY height DESC, ts DESC, id DESC LIMIT ?",
        (*(after or ()), WALK_PAGE),
    ).fetchall()


async def walk_witnesses(store: SqliteStore, marks: dict[str, list[Mark]]) -> dict[str, list[Mark]]:
    """:func:`~lifeline_mesh.notary.witnessing.first_witnesses` over the line in pages: the
    same walk (children first, each entry's marks handed to its parents), holding a page of
    ids and parents rather than every entry of the line (1.2 GB more at 1M entries), and
    no walk at all when no statement names an entry."""
    best = ranked(marks)
    after: tuple[Any, ...] | None = None
    while best:
        rows = await store.run_read(lambda conn, a=after: _walk_page(conn, a))  # type: ignore[misc]
        for _height, _ts, entry_id, parents in rows:
            mine = best.get(entry_id)
            if mine:
                hand_down(best, mine, json.loads(parents))
        if len(rows) < WALK_PAGE:
            break
        after = tuple(rows[-1][:3])
    return best


def first_other(marks: Sequence[Mark], authors: set[str]) -> Mark | None:
    """The earliest witness that is not one of the entry's authors."""
    return next((m for m in marks if m[1] not in authors), None)


class _LineJobs(Generic[T]):
    """One background task at a time, redoing the lines whose state changed."""

    def __init__(self, home: NodeHome) -> None:
        self.home = home
        self.results: dict[str, T] = {}
        self.error: str | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def refresh(self) -> None:
        """Start a run over the lines that changed, unless one is already running."""
        if not self.running:
            self._task = asyncio.get_running_loop().create_task(self.run())

    async def run(self) -> None:
        files = self.home.lines.files
        if files is None:
            return  # a hub's lines: audited by `lifeline-mesh verify`, not beside a file
        try:
            identity = NodeIdentity.maybe_of(self.home)
            local = identity.node_id if identity is not None else None
            signers = FileSigners.load(self.home, local)
            for name in self.home.line_names():
                async with files.open(name) as store:
                    key = await store.run_read(line_key)
                    held = self.results.get(name)
                    if held is not None and getattr(held, "key", None) == key:
                        continue
                    self.results[name] = await self._compute(store, name, key, signers, local)
            self.error = None
        except LifelineError as exc:
            self.error = str(exc)
            log.warning("viewer: %s failed: %s", type(self).__name__, exc)

    async def _compute(
        self,
        store: SqliteStore,
        name: str,
        key: tuple[int, ...],
        signers: FileSigners,
        local: str | None,
    ) -> T:
        raise NotImplementedError

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class AuditCache(_LineJobs[LineAudit]):
    async def _compute(
        self,
        store: SqliteStore,
        name: str,
        key: tuple[int, ...],
        signers: FileSigners,
        local: str | None,
    ) -> LineAudit:
        report = await audit_line(store, name, signers, Policy(local))
        try:
            failures = [
                {"check": f.check, "subject": f.subject, "detail": f.detail}
                for f in islice(report.log.failures(), FINDINGS_SHOWN)
            ]
            notes = sorted(report.log.notes.items())
            return LineAudit(name, key, time.time(), report.counts(), failures, notes)
        finally:
            report.log.close()


class WitnessCache(_LineJobs[LineWitnesses]):
    """Every entry's first witnesses from the notary's one-pass computation (decision 0015):
    signed ``state`` statements and ``summary`` attestations over the line's tips, and
    first-wave witness receipts, from signers this node knows."""

    async def _compute(
        self,
        store: SqliteStore,
        name: str,
        key: tuple[int, ...],
        signers: FileSigners,
        local: str | None,
    ) -> LineWitnesses:
        await NotaryStore.attach(store)  # its tables exist from here on
        items = await store.run_read(_evidence)
        checked = await asyncio.to_thread(verify_items, items)
        trusted = [
            a for a in checked.valid if signers.status(a.node_id).state is not SignerState.UNKNOWN
        ]
        marks = await walk_witnesses(store, marks_of(trusted))
        return LineWitnesses(name, key, time.time(), marks)
