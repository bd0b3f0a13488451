"""A serving node folds its line files' read models after large loads (decision 0103).

A line file's truth tables and recall index are brought up to date by their first reader
(decision 0006). After a session that admitted a million entries (a new node's full sync, a
shallow line deepening under `serve`), that reader is the next `context`, `recall`, MCP
call or shallow snapshot, and it waits ~12 s. While `serve` runs, :class:`ReadUpkeep` does
that fold itself once a line has taken ``FOLD_AFTER`` rows and then been quiet for
``QUIET_S``, in short parts (lifeline/truth/upkeep.py) so that sessions keep writing; and,
when `serve` starts and every ``SWEEP_S`` after, for every shared line that is that far
behind (lines loaded by other processes: a `sync`, an import, `lifeline sessions`, `serve
--sessions`' watcher). A hub's lines need none: its truth is folded as rows are written
(decision 0077).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager

from lifeline.errors import LifelineError, NotFound
from lifeline.store.sqlite import SqliteStore
from lifeline.truth.upkeep import fold_line, rows_behind

__all__ = ["FOLD_AFTER", "QUIET_S", "SWEEP_S", "ReadUpkeep"]

log = logging.getLogger(__name__)

FOLD_AFTER = 5_000  # rows past the marks before the node folds them (a reader's ~60 ms)
QUIET_S = 1.0  # seconds without a session admitting rows to the line before it folds
SWEEP_S = 60.0  # every shared line looked at this often (rows other processes wrote)


class ReadUpkeep:
    """The background folds of one node's line files (see the module docstring)."""

    def __init__(
        self,
        open_line: Callable[[str], AbstractAsyncContextManager[SqliteStore]],
        *,
        threshold: int = FOLD_AFTER,
        quiet_s: float = QUIET_S,
    ) -> None:
        self._open = open_line
        self.threshold, self.quiet_s = threshold, quiet_s
        self._admitted: dict[str, int] = {}  # rows admitted since the line's last fold
        self._last: dict[str, float] = {}  # when a session last admitted rows
        self._running: dict[str, asyncio.Task[None]] = {}
        self._one = asyncio.Semaphore(1)  # one fold at a time: many lines do not pile up
        self._sweeper: asyncio.Task[None] | None = None
        self.runs: list[tuple[str, int, float]] = []  # (line, rows folded, seconds)

    def admitted(self, line: str, count: int) -> bool:
        """A session admitted ``count`` entries into ``line``: fold once the line has
        taken enough and is quiet. Returns whether a fold is due."""
        if count <= 0:
            return False
        self._admitted[line] = self._admitted.get(line, 0) + count
        self._last[line] = time.monotonic()
        if self._admitted[line] < self.threshold:
            return False
        self._start(line)
        return True

    def check(self, lines: Iterable[str]) -> None:
        """Fold each of ``lines`` that is at least ``threshold`` rows behind."""
        for line in lines:
            self._start(line)

    def sweep(self, lines: Callable[[], Iterable[str]], every_s: float = SWEEP_S) -> None:
        """:meth:`check` ``lines()`` now and every ``every_s`` until :meth:`close`: rows
        that other processes wrote are folded too, ``every_s`` after at the latest."""

        async def run() -> None:
            while True:
                try:
                    self.check(lines())
                except LifelineError as exc:  # e.g. the config being rewritten: next time
                    log.warning("could not list the lines to fold: %s", exc)
                await asyncio.sleep(every_s)

        self._sweeper = asyncio.get_running_loop().create_task(run(), name="fold sweep")

    def _start(self, line: str) -> None:
        if line not in self._running:
            self._running[line] = asyncio.get_running_loop().create_task(
                self._run(line), name=f"fold line {line}"
            )

    async def _run(self, line: str) -> None:
        try:
            while True:
                while (wait := self._last.get(line, 0.0) + self.quiet_s - time.monotonic()) > 0:
                    await asyncio.sleep(wait)  # sessions still loading it: fold once after
                self._admitted.pop(line, None)
                if not await self._fold(line):
                    return
                if self._admitted.get(line, 0) < self.threshold:
                    return
        finally:
            self._running.pop(line, None)

    async def _fold(self, line: str) -> bool:
        """Fold ``line`` if it is far enough behind; False when it could not be read."""
        async with self._one:
            started = time.monotonic()
            try:
                async with self._open(line) as store:
                    if store.read_only or await rows_behind(store) < self.threshold:
                        return True  # a read-only copy: its readers fold in memory
                    rows = await fold_line(store)
            except NotFound:
                return False  # a shared line not made yet: its first session makes it
            except (LifelineError, sqlite3.Error) as exc:  # upkeep only: readers fold instead
                extra = {"line": line}
                log.warning(
                    "line %s: truth and recall index not folded: %s", line, exc, extra=extra
                )
                return False
        seconds = time.monotonic() - started
        self.runs.append((line, rows, seconds))
        log.info(
            "line %s: truth and recall index folded past %d rows in %.2f s",
            line,
            rows,
            seconds,
            extra={"line": line},
        )
        return True

    async def idle(self) -> None:
        """Until every fold asked for so far has finished (tests, shutdown)."""
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def close(self) -> None:
        """Stop: a fold in progress keeps the parts it committed; readers fold the rest."""
        tasks = list(self._running.values()) + [t for t in [self._sweeper] if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
