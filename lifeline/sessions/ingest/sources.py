"""The per-source ingest ledger: what was read of each transcript file, and where to resume.

Its own SQLite file (``.lifeline/sessions-sources.sqlite``), apart from every line's schema:
it is local bookkeeping, never synced, and can be deleted at any time (the next ingest
reads everything again and writes nothing new — ids are content addresses).

A row per (line, tool, canonical path): the size and mtime seen, the byte offset and line
number of the last complete line read, a hash chain over the lines read (``prefix``), two
fingerprints (the first and the last 4 KiB before the offset) that detect a file rewritten
in place, and the parser's state and packing position to continue from.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lifeline.fsutil import create_private
from lifeline.sessions.pack import FORMAT
from lifeline.store.sqlite_open import enter_wal

__all__ = ["SourceLedger", "SourceRecord"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sources (
    line TEXT NOT NULL,
    tool TEXT NOT NULL,
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    line_no INTEGER NOT NULL,
    prefix TEXT NOT NULL,
    head TEXT NOT NULL,
    tail TEXT NOT NULL,
    session TEXT NOT NULL,
    resume TEXT NOT NULL,
    PRIMARY KEY (line, tool, path)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS formats (
    line TEXT PRIMARY KEY,
    format INTEGER NOT NULL
) WITHOUT ROWID;
"""


@dataclass(frozen=True, slots=True)
class SourceRecord:
    tool: str
    path: str  # canonical: absolute, symlinks resolved
    size: int
    mtime_ns: int
    offset: int  # bytes of complete lines read
    line_no: int
    prefix: str  # sha256 chain over the sha256 of each line read
    head: str  # sha256 of the first min(4 KiB, offset) bytes
    tail: str  # sha256 of the 4 KiB before offset
    session: str  # the header entry id
    resume: dict[str, Any]  # parser state, part index, tail and previous part ids


class SourceLedger:
    """A small synchronous store; one connection, used from one thread at a time."""

    def __init__(self, path: Path, line: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        create_private(path)  # which transcripts were read: the owner's business only
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA busy_timeout=10000")
        enter_wal(self._conn, 10.0)
        # bookkeeping that can be rebuilt: a commit lost in a power cut only means a re-read
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)
        self._line = line
        self._cache: dict[tuple[str, str], tuple[int, int]] | None = None
        self._check_format()

    def _check_format(self) -> None:
        """Rows written by another format of ingest are forgotten: every file is read again
        once and written in this format (what was written before stays in the line)."""
        row = self._conn.execute(
            "SELECT format FROM formats WHERE line = ?", (self._line,)
        ).fetchone()
        if row is not None and row[0] == FORMAT:
            return
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            self._conn.execute("DELETE FROM sources WHERE line = ?", (self._line,))
            self._conn.execute("INSERT OR REPLACE INTO formats VALUES (?, ?)", (self._line, FORMAT))
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self._conn.close()

    def unchanged(self, tool: str, path: str, size: int, mtime_ns: int) -> bool:
        """True when the file has the size and mtime recorded (one lookup, no file read)."""
        if self._cache is None:
            rows = self._conn.execute(
                "SELECT tool, path, size, mtime_ns FROM sources WHERE line = ?", (self._line,)
            )
            self._cache = {(t, p): (s, m) for t, p, s, m in rows}
        return self._cache.get((tool, path)) == (size, mtime_ns)

    def get(self, tool: str, path: str) -> SourceRecord | None:
        row = self._conn.execute(
            "SELECT tool, path, size, mtime_ns, offset, line_no, prefix, head, tail, session,"
            " resume FROM sources WHERE line = ? AND tool = ? AND path = ?",
            (self._line, tool, path),
        ).fetchone()
        if row is None:
            return None
        tool_, path_, size, mtime_ns, offset, line_no, prefix, head, tail, session, resume = row
        return SourceRecord(
            tool_,
            path_,
            size,
            mtime_ns,
            offset,
            line_no,
            prefix,
            head,
            tail,
            session,
            json.loads(resume),
        )

    def put(self, rec: SourceRecord) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO sources VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                self._line,
                rec.tool,
                rec.path,
                rec.size,
                rec.mtime_ns,
                rec.offset,
                rec.line_no,
                rec.prefix,
                rec.head,
                rec.tail,
                rec.session,
                json.dumps(rec.resume),
            ),
        )
        if self._cache is not None:
            self._cache[(rec.tool, rec.path)] = (rec.size, rec.mtime_ns)

    def touch(self, tool: str, path: str, size: int, mtime_ns: int) -> None:
        """The file's mtime moved but nothing new was read (e.g. touched, or a partial line);
        a file not seen before (an empty one) gets a row that says nothing was read."""
        self._conn.execute(
            "INSERT OR IGNORE INTO sources VALUES (?,?,?,?,?,0,0,'','','','','{}')",
            (self._line, tool, path, size, mtime_ns),
        )
        self._conn.execute(
            "UPDATE sources SET size = ?, mtime_ns = ? WHERE line = ? AND tool = ? AND path = ?",
            (size, mtime_ns, self._line, tool, path),
        )
        if self._cache is not None:
            self._cache[(tool, path)] = (size, mtime_ns)

    def forget(self) -> None:
        """Drop what was read into this line (it was emptied or replaced): read all again."""
        self._conn.execute("DELETE FROM sources WHERE line = ?", (self._line,))
        self._cache = None

    def count(self) -> int:
        row = self._conn.execute("SELECT count(*) FROM sources WHERE line = ?", (self._line,))
        return int(row.fetchone()[0])
