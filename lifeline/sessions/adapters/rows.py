"""Reading the SQLite databases some tools keep their sessions in (Cursor, Forge).

Read-only and never in the tool's way: a database is opened ``mode=ro`` (no journal
written, no lock held beyond a read), and, when the tool holds it locked, ``immutable=1``
(a read of what is on disk, as a copy would give). Records become :class:`RawLine` s —
numbered from 1, their bytes the record's compact JSON — so the ingest's redaction,
packing and provenance apply to them as to a transcript's lines.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlparse

from lifeline.sessions.adapters.port import RawLine

__all__ = [
    "file_uri_path",
    "iso_of",
    "ms_to_iso",
    "open_readonly",
    "record_lines",
    "tables_of",
]

_BUSY_MS = 2000


@contextmanager
def open_readonly(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to ``path``; ``immutable=1`` when the tool has it locked."""
    uri = f"file:{quote(str(path.absolute()))}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=_BUSY_MS / 1000, check_same_thread=False)
    try:
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.OperationalError as exc:
        conn.close()
        if "locked" not in str(exc) and "busy" not in str(exc):
            raise
        conn = sqlite3.connect(f"{uri}&immutable=1", uri=True, check_same_thread=False)
    with closing(conn):
        yield conn


def tables_of(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """The tables of the database and their columns."""
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {
        name: {str(r[1]) for r in conn.execute(f'PRAGMA table_info("{name}")')} for name in names
    }


def record_lines(records: Iterable[Any]) -> Iterator[RawLine]:
    """Each record as a line: its compact JSON, numbered from 1, offsets cumulative."""
    offset = 0
    for number, record in enumerate(records, start=1):
        raw = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode(
            "utf-8", "surrogatepass"
        )
        yield RawLine(number, offset, offset + len(raw), raw, record)
        offset += len(raw)


def ms_to_iso(value: Any) -> str | None:
    """A Unix time in milliseconds as ISO 8601 UTC (``…Z``), or None."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        return None
    try:
        moment = datetime.fromtimestamp(value / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_of(value: Any) -> str | None:
    """A SQLite ``TIMESTAMP`` text (``2026-05-02 09:58:15.741021507``, UTC) or an ISO
    string, as ISO 8601 UTC; None when it is neither."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip().replace(" ", "T", 1)
    if text.endswith("Z"):
        text = text[:-1]
    head, dot, frac = text.partition(".")
    frac = frac[:6]  # Python parses microseconds; SQLite may hold nanoseconds
    try:
        moment = datetime.fromisoformat(head + (dot + frac if frac else ""))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def file_uri_path(uri: Any) -> str | None:
    """The local path of a ``file://`` URI (``workspace.json``'s ``folder``), or None."""
    if not isinstance(uri, str) or not uri.startswith("file://"):
        return None
    parsed = urlparse(uri)
    path = unquote(parsed.path)
    if len(path) > 2 and path[0] == "/" and path[2] == ":":  # file:///c:/Users/…
        path = path[1:]
    return path or None
