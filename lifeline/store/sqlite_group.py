"""Write transactions of a bulk pull grouped: several writes committed as one.

A pull stores each received batch in a transaction of its own. At a million entries a
batch's random ids land on thousands of pages of each index on a random key, and each
commit writes every page it dirtied to the WAL, and the checkpoints copy them again:
the pull wrote 18 GB for a 1.6 GB file. Committing ten or thirty batches together writes
such a page once for all of them; SQLite keeps its page cache at its size meanwhile (the
pages it must let go of go to the WAL, and are overwritten there if dirtied again). A
probe of the store alone took 27 s instead of 51 s for a million entries and their
signatures, at the same memory (``bench/store_indexes.py --commit-every``; decision 0107).

Inside :func:`lifeline.store.grouped.grouped`, each write transaction of the store runs
inside one open transaction, committed once :data:`GROUP_CHANGES` rows have changed or it
has been open :data:`GROUP_SECONDS`, after :data:`GROUP_IDLE_S` without a write (a session
waiting on the network holds no lock), before the node signs what the line holds
(:func:`~lifeline.store.grouped.commit_group`), and when the group ends. A write that
fails, or a COMMIT that fails, rolls back the writes since the last commit with it: every
later write, and the end of the group, raise so, and the caller (a `sync`) fails with that
error instead of reporting what is not stored. The next `sync` fetches them again. Nothing
committed before is touched.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

__all__ = [
    "GROUP_AUTOCHECKPOINT_PAGES",
    "GROUP_CHANGES",
    "GROUP_GAP_S",
    "GROUP_IDLE_S",
    "GROUP_SECONDS",
    "WriteGroup",
    "read_transaction",
]

T = TypeVar("T")

GROUP_CHANGES = 250_000  # rows changed (~40,000 entries with their signatures, links, tips)
GROUP_SECONDS = 5.0  # the longest another process's writer waits for a group
GROUP_IDLE_S = 0.5
# While a group is open the WAL grows to this many pages (~800 MB) before a commit
# checkpoints it, instead of the store's 10,000: a pull of a million entries checkpointed
# ~170 times, copying the same hot index pages into the file again each time; 4% faster and
# ~4 s of CPU less at 1M (decision 0145). A thread of its own copies it after each commit
# meanwhile (wal_copier.py, decision 0151): this is the bound should it fall behind. The
# session's end checkpoints and truncates it (lifeline_mesh/node/wal.py), and the store's
# interval comes back with the group's end.
GROUP_AUTOCHECKPOINT_PAGES = 200_000
# After a group committed because it was full or old, the line's lock is left free this
# long before the next write takes it, when a writer of another process (a `lifeline log`)
# says it waits (``others_wait``: lock_wait.py, decision 0151). It retries every 100 ms
# (SQLite's busy handler) and would mostly miss the moment between a commit and the next
# BEGIN: it waited for several groups, and with groups of 5 s could pass its 30 s busy
# timeout and fail. Left every time, a dozen times in a pull of a million entries: ~2 s.
GROUP_GAP_S = 0.15


class WriteGroup:
    """The open transaction of a group. Its methods run on the store's worker thread,
    holding the connection."""

    def __init__(
        self,
        changes: int | None = None,
        seconds: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.changes = GROUP_CHANGES if changes is None else changes
        self.seconds = GROUP_SECONDS if seconds is None else seconds
        self._clock = clock
        self._began = 0.0
        self._base = 0
        self.pending = False  # writes not yet committed
        self.writes = 0  # writes run in the group (the idle flush compares it)
        self.commits = 0
        self.lost: str | None = None  # why the group's uncommitted writes were lost
        self.after_commit: Callable[[], None] | None = None  # told of each commit
        # whether a writer of another process waits for the lock (without a way to
        # tell, one may: the gap is left after every commit)
        self.others_wait: Callable[[], bool] = lambda: True

    def run(self, conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(conn)`` as one write of the group; committed with the group."""
        if self.lost is not None:
            raise sqlite3.OperationalError(self.lost)
        if not conn.in_transaction:
            conn.execute("BEGIN IMMEDIATE")
            self._began, self._base = self._clock(), conn.total_changes
        try:
            result = fn(conn)
        except BaseException:
            self._undo(conn)
            raise
        self.pending = True
        self.writes += 1
        full = conn.total_changes - self._base >= self.changes
        if full or self._clock() - self._began >= self.seconds:
            self.commit(conn)
            if self.others_wait():
                time.sleep(GROUP_GAP_S)  # on the worker: the lock free for another process
        return result

    def commit(self, conn: sqlite3.Connection) -> None:
        """Commit the group's writes so far (nothing to do when there are none)."""
        if self.lost is not None:
            raise sqlite3.OperationalError(self.lost)
        if not conn.in_transaction:
            return
        try:
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if self.pending:
                self.lost = (
                    "a grouped commit failed: the writes of this sync since the last commit "
                    "are not stored"
                )
            raise
        self.pending = False
        self.commits += 1
        if self.after_commit is not None:
            self.after_commit()

    def _undo(self, conn: sqlite3.Connection) -> None:
        """A write failed: the whole transaction rolled back (a SAVEPOINT a write would
        keep the old content of every page it changes in memory: +50 MB and slower, at
        a million entries), so earlier writes of the group are lost if it held any."""
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if self.pending:
            self.lost = (
                "a write of this sync failed, and with it the writes since the last commit "
                "(they are committed together): they are not stored"
            )
            self.pending = False


@contextlib.contextmanager
def read_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One read transaction on ``conn`` (its reads agree with each other), or, inside a
    group's open transaction, that one: the same connection reads what it wrote."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")
