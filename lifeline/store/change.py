"""Change tokens: a small value that moves whenever a line's entries change, whoever wrote.

A reader that keeps what it computed from a line (:class:`~lifeline.truth.memo.LineMemo`)
asks for the line's token before each use: the same token means the same entries, so the
kept answer is still the answer. Writes by other processes count as much as our own — a
``serve`` syncing into the same file, a ``lifeline log`` in a terminal, another hub process.

SQLite (:class:`SqliteChangeProbe`): a connection of the probe's own, which never writes,
asks ``PRAGMA data_version`` (a counter that moves when any *other* connection commits,
answered from the WAL index) and only then reads the content token: ``max(seq)`` of the
entries (rows only ever get a higher one), ``truth_generation`` (bumped by a trigger on any
UPDATE or DELETE of an entry: a lowered ts, a rewritten row; and by a rebuild of the truth
tables, after `verify` found a row that lies) and the set summary (count and sum of tokens,
kept by every write). A commit that leaves the entries alone (the truth
tables caught up, attestations stored) therefore keeps the token. A line file replaced by
another (a recovery, a restore) has another inode: the probe reconnects and the token moves.

PostgreSQL: :meth:`~lifeline.store.postgres.PgStore.change_token`, the line's ``lines``
row, which every write updates in its transaction (``version``, ``next_seq``, ``n`` and
the sum of tokens).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
from collections.abc import Hashable
from pathlib import Path
from urllib.parse import quote

__all__ = ["CONTENT_SQL", "SqliteChangeProbe", "content_sql"]

log = logging.getLogger(__name__)

_SUMMARY = "(SELECT {} FROM set_summaries WHERE name = 'entries')"
# What the entries are, in a few primary-key reads (see the module docstring).
CONTENT_SQL = (
    "SELECT (SELECT max(seq) FROM entries), "
    + ", ".join(_SUMMARY.format(c) for c in ("count", "total", "mark"))
    + ", (SELECT n FROM truth_generation)"
)
_WITHOUT_GENERATION = CONTENT_SQL.replace("(SELECT n FROM truth_generation)", "NULL")


def content_sql(conn: sqlite3.Connection) -> str:
    """The content query for ``conn``'s line: with ``truth_generation`` when the line has
    it (its truth tables may be added by a migration while a probe is open: asked again
    after every commit)."""
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'truth_generation'"
    ).fetchone()
    return CONTENT_SQL if found else _WITHOUT_GENERATION


class SqliteChangeProbe:
    """The change token of one SQLite line file, read through a connection of its own.

    :meth:`token` takes a few microseconds (a pragma, and after a commit three primary-key
    reads) but may wait up to ``timeout`` for a lock: call it from a worker thread.
    :meth:`unchanged` is its fast half, for the event loop. None means "cannot tell" (the
    file is gone, locked past the timeout, or not a line): the caller must not reuse
    anything.
    """

    def __init__(self, path: Path, *, timeout: float = 0.5) -> None:
        self.path = path
        self._timeout = timeout
        self._conn: sqlite3.Connection | None = None
        self._file: tuple[int, int] | None = None  # (device, inode) the connection reads
        self._version: int | None = None
        self._token: Hashable | None = None
        self._lock = threading.Lock()
        self.reads = 0  # content reads so far (after a commit): for tests and benchmarks

    def token(self) -> Hashable | None:
        with self._lock:
            try:
                return self._read()
            except (OSError, sqlite3.Error) as exc:
                log.debug("change token of %s unknown: %s", self.path, exc)
                self._drop()
                return None

    def unchanged(self) -> Hashable | None:
        """The last token, when no commit happened since (a stat and a pragma, answered
        from the WAL index); None when it must be read again by :meth:`token`."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            if self._conn is None or self._token is None:
                return None
            info = os.stat(self.path)
            if (info.st_dev, info.st_ino) != self._file:
                return None
            version = int(self._conn.execute("PRAGMA data_version").fetchone()[0])
            return self._token if version == self._version else None
        except (OSError, sqlite3.Error):
            return None
        finally:
            self._lock.release()

    def _read(self) -> Hashable:
        info = os.stat(self.path)
        file = (info.st_dev, info.st_ino)
        if self._conn is None or file != self._file:
            self._connect(file)
        assert self._conn is not None
        version = int(self._conn.execute("PRAGMA data_version").fetchone()[0])
        if version != self._version or self._token is None:
            row = self._conn.execute(content_sql(self._conn)).fetchone()
            self.reads += 1
            self._token = (file, tuple(row))
            self._version = version
        return self._token

    def _connect(self, file: tuple[int, int]) -> None:
        self._drop()
        # mode=rw: never create a line file that is not there; this connection only reads.
        conn = sqlite3.connect(
            f"file:{quote(str(self.path))}?mode=rw",  # a `#` or `?` of a folder stays a name
            uri=True,
            isolation_level=None,
            check_same_thread=False,
            timeout=self._timeout,
        )
        self._conn, self._file = conn, file

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = self._file = self._version = self._token = None

    def close(self) -> None:
        with self._lock:
            self._drop()


class SqliteChangeWatch:
    """A line file's change token (:class:`SqliteChangeProbe`): on the event loop while
    nothing was committed (a stat and a pragma), else off it (three primary-key reads)."""

    def __init__(self, path: Path) -> None:
        self._probe = SqliteChangeProbe(path)

    async def token(self) -> Hashable | None:
        same = self._probe.unchanged()
        return same if same is not None else await asyncio.to_thread(self._probe.token)

    def close(self) -> None:
        self._probe.close()
