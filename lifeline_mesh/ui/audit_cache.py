"""``verify``'s findings for the Mesh page, computed in the background and kept.

An audit reads every entry and signature of a line (seconds at 100k entries), so no page
waits for one: the page shows the last finished report with its age and asks for a new one
when a line changed since (new rows or a new head). The static export waits for a fresh one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lifeline.errors import LifelineError
from lifeline.lines import line_names, line_path
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.identity import NodeIdentity, key_path
from lifeline_mesh.notary.audit import audit_line
from lifeline_mesh.notary.rules import Policy
from lifeline_mesh.notary.signers import FileSigners

__all__ = ["AuditCache", "LineAudit"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LineAudit:
    line: str
    key: tuple[int, int]  # (rows, highest row) when it ran
    finished_at: float
    report: dict[str, Any]


def _key(conn: Any) -> tuple[int, int]:
    count, top = conn.execute("SELECT count(*), coalesce(max(seq), 0) FROM entries").fetchone()
    return int(count), int(top)


class AuditCache:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.results: dict[str, LineAudit] = {}
        self.error: str | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def refresh(self) -> None:
        """Start an audit of the lines that changed, unless one is already running."""
        if not self.running:
            self._task = asyncio.get_running_loop().create_task(self.run())

    async def run(self) -> None:
        """Audit every line whose rows changed since its last audit."""
        try:
            path = key_path(self.root)
            local = NodeIdentity.load(path).node_id if path.exists() else None
            signers = FileSigners.load(self.root, local)
            for name in line_names(self.root):
                await self._audit(name, signers, Policy(local))
            self.error = None
        except LifelineError as exc:
            self.error = str(exc)
            log.warning("viewer: audit failed: %s", exc)

    async def _audit(self, name: str, signers: FileSigners, policy: Policy) -> None:
        async with await SqliteStore.open(line_path(self.root, name), create=False) as store:
            key = await store.run_read(_key)
            held = self.results.get(name)
            if held is not None and held.key == key:
                return
            report = await audit_line(store, name, signers, policy)
        self.results[name] = LineAudit(name, key, time.time(), report.to_dict())

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
