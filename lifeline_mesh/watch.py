"""LineWatcher: notice that entries were appended to a line, cheaply, from any process.

``lifeline log``, the MCP server and the sync writer each commit through their own SQLite
connection. A separate connection per line asks ``PRAGMA data_version`` — a counter that
moves only when *another* connection committed, answered from the WAL index without reading
the database — and, only then, ``max(seq)`` of the entries (a primary-key lookup). So an idle
line costs one tiny query per poll, whatever its size. Polling at a short interval is used
instead of inotify because it sees commits made over network file systems and in other
mount namespaces (containers) alike.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["CHANGE_POLL_S", "LineWatcher"]

log = logging.getLogger(__name__)

CHANGE_POLL_S = 0.2  # how soon an append made by another process is noticed


class _Probe:
    """One line file: its watcher connection and what it last saw."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn: sqlite3.Connection | None = None
        self.data_version: int | None = None
        self.mark: int | None = None

    def poll(self) -> int | None:
        """``max(seq)`` of the line (None when absent), re-read only after a commit."""
        if self.conn is None and not self.path.exists():
            return None
        try:
            if self.conn is None:
                # mode=rw: never create a line file that is not there.
                self.conn = sqlite3.connect(
                    f"file:{self.path}?mode=rw", uri=True, check_same_thread=False, timeout=5
                )
            version = int(self.conn.execute("PRAGMA data_version").fetchone()[0])
            if version != self.data_version:
                self.data_version = version
                row = self.conn.execute("SELECT max(seq) FROM entries").fetchone()
                self.mark = None if row[0] is None else int(row[0])
        except sqlite3.Error as exc:
            # Not migrated yet, or locked for longer than the timeout: try again next poll.
            log.debug("watch: cannot read %s yet: %s", self.path, exc)
            self.data_version = None
        return self.mark

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class LineWatcher:
    """Calls ``on_change()`` whenever new entries appear in one of the watched line files.

    ``paths`` is a list, or a callable asked at every poll (lines shared while the node runs
    are then watched from the next poll on; a line that appears counts as a change).
    """

    def __init__(
        self,
        paths: Sequence[Path] | Callable[[], Sequence[Path]],
        *,
        interval: float = CHANGE_POLL_S,
    ) -> None:
        self._paths = paths if callable(paths) else (lambda fixed=list(paths): fixed)
        self._probes: dict[Path, _Probe] = {}
        self._interval = interval
        # A cancelled poll keeps running in its thread: closing must wait for it.
        self._lock = threading.Lock()
        self._closed = False
        self.polls = 0  # polls done so far, the first being the baseline (for status and tests)

    def _poll(self) -> dict[Path, int | None]:
        with self._lock:
            if self._closed:
                return {}
            return self._poll_locked()

    def _poll_locked(self) -> dict[Path, int | None]:
        wanted = list(dict.fromkeys(self._paths()))
        for path in set(self._probes) - set(wanted):
            self._probes.pop(path).close()
        for path in wanted:
            if path not in self._probes:
                self._probes[path] = _Probe(path)
        return {path: self._probes[path].poll() for path in wanted}

    async def run(self, on_change: Callable[[], None]) -> None:
        """Poll until cancelled; the first poll is the baseline and reports nothing."""
        try:
            last = await asyncio.to_thread(self._poll)
            self.polls += 1
            while True:
                await asyncio.sleep(self._interval)
                current = await asyncio.to_thread(self._poll)
                self.polls += 1
                if any(current[p] != last.get(p) for p in current):
                    on_change()
                last = current
        finally:
            with self._lock:
                self._closed = True
                for probe in self._probes.values():
                    probe.close()
