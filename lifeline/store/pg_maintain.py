"""Statistics for a line's partition after a large load, off the request path (a hub).

Right after an initial sync of tens of thousands of entries, the line's partition has no
statistics and is full of rows autovacuum has not looked at yet: range queries then took
13–16 ms instead of 0.2–1.5 ms, and autovacuum competed with sessions for the CPU
(research: docs/hub.md, "Maintenance"). So once a session admitted at least
:data:`ANALYZE_AFTER` entries into a line, the hub process runs ``VACUUM (ANALYZE)`` on that
line's partition, and ``ANALYZE`` on the shared ``links``/``tips``/``fp_buckets`` tables,
in a background task on a pooled connection: the session that loaded the rows has already
answered. Then the installed components' steps after a load (entry-point group
``lifeline.pg_after_load``: recall's index built and the truth tables folded, decision
0109), so that the first reader after the load does not pay for them. One run per line at
a time; a load that arrives while one runs asks for one more run after it. A failure is
logged and changes nothing (autovacuum still runs; readers catch up what a step left).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["ANALYZE_AFTER", "LoadStep", "Maintenance"]

log = logging.getLogger(__name__)

ANALYZE_AFTER = 5000  # entries admitted by one session into one line
LoadStep = Callable[[Any, int], Awaitable[None]]  # (a pooled connection, line_id)


class Maintenance:
    """The background upkeep of one database's lines (owned by ``PgDatabase``)."""

    def __init__(self, pool: Any, *, threshold: int = ANALYZE_AFTER) -> None:
        self._pool = pool
        self.threshold = threshold
        self.steps: tuple[LoadStep, ...] = ()  # set by PgDatabase.connect (after_load)
        self._running: dict[int, asyncio.Task[None]] = {}
        self._again: set[int] = set()
        self.runs: list[tuple[int, float]] = []  # (line_id, seconds) of each finished run

    def admitted(self, line_id: int, count: int) -> bool:
        """A session admitted ``count`` entries into the line: schedule its upkeep when the
        load was large. Returns whether a run was asked for."""
        if count < self.threshold:
            return False
        if line_id in self._running:
            self._again.add(line_id)
        else:
            self._running[line_id] = asyncio.get_running_loop().create_task(
                self._run(line_id), name=f"vacuum analyze line {line_id}"
            )
        return True

    async def _run(self, line_id: int) -> None:
        try:
            while True:
                self._again.discard(line_id)
                started = time.monotonic()
                try:
                    async with self._pool.acquire() as conn:
                        await conn.execute(f"VACUUM (ANALYZE) entries_{int(line_id)}")
                        await conn.execute("ANALYZE links, tips, fp_buckets")
                except Exception as exc:  # upkeep only: autovacuum still comes
                    log.warning("VACUUM ANALYZE of line %s failed: %s", line_id, exc)
                    return
                await self._steps(line_id)
                seconds = time.monotonic() - started
                self.runs.append((line_id, seconds))
                log.info("line %s: upkeep after a large load, %.2f s", line_id, seconds)
                if line_id not in self._again:
                    return
        finally:
            self._running.pop(line_id, None)

    async def _steps(self, line_id: int) -> None:
        for step in self.steps:
            try:
                async with self._pool.acquire() as conn:
                    await step(conn, line_id)
            except Exception as exc:  # upkeep only: the next reader does it instead
                log.warning("upkeep of line %s after a large load failed: %s", line_id, exc)

    async def idle(self) -> None:
        """Until every run asked for so far has finished (tests, shutdown)."""
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._running.values()):
            task.cancel()
        for task in list(self._running.values()):
            with contextlib.suppress(asyncio.CancelledError):
                await task
