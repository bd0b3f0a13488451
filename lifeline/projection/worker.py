"""One range of a line's projection rendered in a process of its own: a full render of a
large line on every core (``lifeline/projection/parallel.py`` starts one per core).

``python -m lifeline.projection.worker PATH FD TOP COUNT TOTAL OFFSET LIMIT`` opens the line
file read-only, checks that its read transaction sees the rows the parent's render sees
(the rows with ``seq <= TOP`` have the totals ``COUNT`` and ``TOTAL``, hex: a write that
landed since only added rows above ``TOP``), then renders the rows of the full render's
stream (``seq <= TOP`` in the order ``height, ts, id``) from position ``OFFSET``,
``LIMIT`` of them (-1: to the end), with the serial render's own code
(:func:`lifeline.store.rows.decode_fields`, :func:`lifeline.projection.markdown.block_of`), into the
file open as descriptor ``FD``.

Output on stdout: frames, each a 4-byte big-endian length and a ``marshal``'d record:
``("begin", same)`` (whether the snapshot is the parent's), then per page
``("n", blocks, size, problems)`` (``size``: bytes written and flushed so far; problems:
``(seq, id, detail)`` of the page's damaged rows, as the serial render words them), then
``("end", last)`` (the stream key of the range's last row, or None); on a SQLite error
``("error", text)`` and exit status 1.
"""

from __future__ import annotations

import marshal
import os
import sqlite3
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from lifeline.audit.worker import connect
from lifeline.projection.markdown import block_of
from lifeline.store.rows import Fields, decode_fields, last_key
from lifeline.store.sqlite_reads import COLUMNS
from lifeline.store.summary import ENTRIES_SET, entry_token, read_totals

__all__ = ["PAGE_ROWS", "main", "render_range", "same_snapshot"]

PAGE_ROWS = 2_000  # rows per page, as the serial render reads them
_MOD = 1 << 256
_RANGE = (
    f"SELECT height, {COLUMNS} FROM entries WHERE +seq <= ? ORDER BY height, ts, id "
    "LIMIT ? OFFSET ?"
)

Record = tuple[Any, ...]


def same_snapshot(conn: sqlite3.Connection, top: int, count: int, total: int) -> bool:
    """Whether the rows with ``seq <= top`` are the ones whose totals are ``count`` and
    ``total`` (this connection's totals, less the rows stored after ``top``)."""
    totals = read_totals(conn, ENTRIES_SET, "entries")
    if totals is None:
        return False
    added = conn.execute("SELECT id, ts FROM entries WHERE seq > ?", (top,)).fetchall()
    try:
        tokens = sum(entry_token(eid, ts) for eid, ts in added)
    except (ValueError, TypeError, UnicodeEncodeError):
        return False
    return totals.count - len(added) == count and (totals.total - tokens) % _MOD == total


def render_range(
    conn: sqlite3.Connection,
    out: BinaryIO,
    top: int,
    offset: int,
    limit: int,
    send: Callable[[Record], None],
) -> None:
    """Render the stream's rows ``offset .. offset + limit`` (``seq <= top``) into ``out``,
    telling ``send`` of each page written."""
    size = 0
    last: list[Any] | None = None
    cursor = conn.execute(_RANGE, (top, limit, offset))
    while rows := cursor.fetchmany(PAGE_ROWS):
        page: list[Fields] = []
        problems: list[tuple[int, str, str]] = []
        for row in rows:
            try:
                page.append(decode_fields(row[1:]))
            except (ValueError, TypeError) as exc:
                problems.append((int(row[1]), str(row[2])[:64], str(exc)))
        data = "".join([block_of(*fields) for fields in page]).encode("utf-8")
        out.write(data)
        out.flush()
        size += len(data)
        key = last_key(rows)
        if key is not None:
            last = list(key)
        send(("n", len(page), size, problems))
    send(("end", last))


def _frame(record: Record) -> None:
    data = marshal.dumps(record)
    out = sys.stdout.buffer
    out.write(len(data).to_bytes(4, "big") + data)
    out.flush()


def main(argv: Sequence[str] | None = None) -> int:
    path, fd, top, count, total, offset, limit = argv if argv is not None else sys.argv[1:]
    try:
        # connect's 4 MB page cache: 16 MB saves ~0.7 s of system time per 500,000 rows at
        # 1M (pages read again through the index) but costs 13 MB a worker, too much for
        # issue 21's 150 MB at 100k.
        conn = connect(Path(path))
        try:
            conn.execute("BEGIN")  # one snapshot for the check and the rows
            same = same_snapshot(conn, int(top), int(count), int(total, 16))
            _frame(("begin", same))
            if same:
                with os.fdopen(int(fd), "wb", buffering=1 << 20) as out:
                    render_range(conn, out, int(top), int(offset), int(limit), _frame)
            conn.execute("COMMIT")
        finally:
            conn.close()
    except sqlite3.Error as exc:
        _frame(("error", str(exc)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
