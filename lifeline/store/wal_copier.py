"""A write group's WAL copied into the line file on a thread of its own (decision 0151).

While a bulk pull's writes are grouped (sqlite_group.py), its WAL grows to
``GROUP_AUTOCHECKPOINT_PAGES`` before a commit copies it into the file (decision 0145).
That copy ran inside the commit, on the store's worker thread: at a million entries,
~400 MB read back and written again, several times, while the rest of the pull waited for
the store, the pull's slowest stage.

In WAL mode one connection may checkpoint while another writes: a ``PASSIVE`` checkpoint
copies the frames committed before it began, and the writer goes on appending after them.
Python's SQLite module gives up the interpreter lock for the whole statement, so the copy
runs on another core. So, while a group is open, a thread of its own with a connection of
its own copies the WAL after each of the group's commits; the writer's own checkpoints stay
as the bound, at a larger interval, should this thread fall behind.

The WAL starts again from its beginning only when a write begins after all of it was
copied, which a writer with work queued rarely lets happen: during a pull the WAL grows to
that bound (~800 MB at a million entries, against ~400 MB before). The group's end copies
and truncates it as before (grouped.py).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

__all__ = ["WalCopier"]

log = logging.getLogger(__name__)


class WalCopier:
    """Checkpoints the WAL of the line file at ``path`` whenever :meth:`committed` is
    called, on a thread and a connection of its own. Nothing it does is needed for
    correctness: when it cannot open the line or a checkpoint fails, the writer's own
    checkpoints copy the WAL instead."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="wal-copier", daemon=True)
        self._started = False
        self._starting = threading.Lock()  # a last commit racing the group's end

    def committed(self) -> None:
        """A commit landed in the WAL: copy it (at once, or after the copy in progress).
        The thread starts with the first: a group that commits nothing (a sync finding
        the two sides alike) costs no thread and no connection."""
        with self._starting:
            if not self._started and not self._stopping:
                self._thread.start()
                self._started = True
        self._wake.set()

    def stop(self) -> None:
        """End the thread once the checkpoint in progress is done. Blocks: call it off the
        event loop."""
        with self._starting:
            self._stopping = True
        self._wake.set()
        if self._started:
            self._thread.join()

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            log.debug("the WAL of %s is copied by its writer: %s", self._path, exc)
            return
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    return
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                except sqlite3.Error as exc:  # e.g. the line's folder taken away
                    log.debug("a checkpoint of %s failed: %s", self._path, exc)
        finally:
            conn.close()
