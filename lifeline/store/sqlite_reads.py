"""Reading entry rows of a line's SQLite file: the columns, pages in stream order, rows by
id (skipping damaged ones, which ``lifeline verify`` reports in full), and decoding with
the one-line error that names the file."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from lifeline.entry import Entry
from lifeline.errors import CorruptRow
from lifeline.store.order import newest_first
from lifeline.store.rows import decode_row
from lifeline.store.sqlite_writes import id_chunks

__all__ = [
    "COLUMNS",
    "NEWEST_TIPS",
    "STREAM_CHUNK",
    "decode_or_raise",
    "decoded_by_id",
    "page",
    "pages",
    "tips_for_write",
]

log = logging.getLogger(__name__)

COLUMNS = "seq, id, ts, kind, author, agent, provider, model, summary, body, parents, dedup_key"
STREAM_CHUNK = 2_000

# The tips newest first in stream order (height, ts, id descending). CROSS JOIN keeps the
# tips as the outer loop: with a plain JOIN the planner walks every entry by the order
# index and probes the tips, O(line) per write.
_TIPS = "SELECT e.id, {body}, e.height, e.ts FROM tips t CROSS JOIN entries e ON e.id = t.id"
_NEWEST = " ORDER BY e.height DESC, e.ts DESC, e.id DESC"
NEWEST_TIPS = _TIPS.format(body="''") + _NEWEST + " LIMIT ?"
_NAMING = _TIPS.format(body="e.body") + " WHERE instr(e.body, ?) > 0"


def tips_for_write(
    conn: sqlite3.Connection, thread: str | None, cap: int
) -> list[tuple[str, str, str]]:
    """The tips a local write chooses its parents from (lifeline.ledger.choose_parents),
    newest first, as ``(id, body, ts)``: the newest ``cap + 1`` without their bodies, and,
    when there are more and the write is in ``thread``, every tip whose body holds that
    name, with its body. ``choose_parents`` chooses from these what it would from every
    tip with its body, without a line of many tips (a rogue member can push 20,000 a
    call) read whole, bodies and all, on every write."""
    rows: list[Sequence[Any]] = conn.execute(NEWEST_TIPS, (cap + 1,)).fetchall()
    if thread is not None and len(rows) > cap:
        rows = newest_first(rows, conn.execute(_NAMING, (thread,)))
    return [(r[0], r[1], r[3]) for r in rows]


def page(
    conn: sqlite3.Connection, after: tuple[int, str, str] | None, columns: str = COLUMNS
) -> list[tuple[Any, ...]]:
    """The next ``STREAM_CHUNK`` rows after ``after`` (height, ts, id), height first;
    each row is ``(height, <columns>)``, whose first three are ``seq, id, ts`` or
    ``id, ts, ...``."""
    sql = f"SELECT height, {columns} FROM entries"
    params: tuple[Any, ...] = ()
    if after is not None:
        sql += " WHERE (height, ts, id) > (?, ?, ?)"
        params = after
    sql += f" ORDER BY height, ts, id LIMIT {STREAM_CHUNK}"
    return conn.execute(sql, params).fetchall()


Rows = list[tuple[Any, ...]]
RunRead = Callable[[Callable[[sqlite3.Connection], Rows]], Awaitable[Rows]]


async def pages(run_read: RunRead) -> AsyncIterator[Rows]:
    """Every page of rows in stream order. The next page is read on the store's worker
    thread (SQLite releases the GIL) while the caller decodes this one, so a whole-line
    read uses both cores; two pages are held at most."""
    async for rows in _prefetched(run_read, COLUMNS, 2):
        yield rows


async def _prefetched(run_read: RunRead, columns: str, id_at: int) -> AsyncIterator[Rows]:
    pending: asyncio.Future[Rows] | None = asyncio.ensure_future(
        run_read(partial(page, after=None, columns=columns))
    )
    try:
        while pending is not None:
            rows = await pending
            pending = None
            if len(rows) == STREAM_CHUNK:
                tail = rows[-1]
                after = (tail[0], tail[id_at + 1], tail[id_at])
                pending = asyncio.ensure_future(
                    run_read(partial(page, after=after, columns=columns))
                )
            if rows:
                yield rows
    finally:
        if pending is not None:  # the caller stopped early (e.g. `history | head`)
            pending.cancel()


def decode_or_raise(path: Path, row: tuple[Any, ...]) -> Entry:
    try:
        return decode_row(row)
    except (ValueError, TypeError) as exc:
        raise CorruptRow(
            f"entry {str(row[1])[:12]} is stored in {path.name} but its row cannot be "
            f"decoded ({exc}); `lifeline verify` lists the damaged rows"
        ) from exc


def decoded_by_id(path: Path, conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, Entry]:
    """The stored entries among ``ids``; damaged rows are skipped (with a log line)."""
    found: dict[str, Entry] = {}
    for chunk in id_chunks(list(ids), 500):
        marks = ",".join("?" * len(chunk))
        try:
            rows = conn.execute(
                f"SELECT {COLUMNS} FROM entries WHERE id IN ({marks})", chunk
            ).fetchall()
        except sqlite3.OperationalError as exc:
            if "decode" not in str(exc):
                raise
            rows = _one_by_one(path, conn, chunk)  # text that is not UTF-8
        for row in rows:
            try:
                entry = decode_row(row)
            except (ValueError, TypeError) as exc:
                # get() turns a miss on a stored row into CorruptRow; verify reports it in full
                log.debug("skipping undecodable row %s in %s: %s", row[0], path, exc)
                continue
            found[entry.id] = entry
    return found


def _one_by_one(path: Path, conn: sqlite3.Connection, ids: Sequence[str]) -> list[Any]:
    rows: list[Any] = []
    for entry_id in ids:
        try:
            sql = f"SELECT {COLUMNS} FROM entries WHERE id = ?"
            rows += conn.execute(sql, (entry_id,)).fetchall()
        except sqlite3.OperationalError as exc:
            log.debug("skipping undecodable row %s in %s: %s", entry_id, path, exc)
    return rows
