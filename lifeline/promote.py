"""Promotion between lines: a copy of an entry as a root of another line, anchored by an
``origin:`` block that names the source line and the full source id.

The copy has the shape lifeline-context 0.6.1's ``promote`` gave it (same fields, no parents,
the body followed by the block), so both tools give a copy the same id and promoting twice
stores it once. Its ts is the moment of promotion — a signed copy claims when it was written
here, never the source's older time (docs/truth.md). Pure, except :func:`copies_in`.
"""

from __future__ import annotations

import re
import sqlite3

from lifeline.entry import Entry
from lifeline.errors import InvalidEntry
from lifeline.ledger import Draft
from lifeline.store.backend import FileOrEntries, on_backend
from lifeline.store.port import Store

__all__ = ["copies_in", "origin_body", "origin_of", "promotion_draft"]

_ORIGIN = re.compile(r"(?:^|\n)origin:\n  line: (\S+)\n  id: ([0-9a-f]{64})\s*$")


def origin_body(line: str, entry_id: str) -> str:
    return f"origin:\n  line: {line}\n  id: {entry_id}"


def origin_of(body: str) -> tuple[str, str] | None:
    """(source line, source id) of a promoted copy, or None."""
    found = _ORIGIN.search(body)
    return (found.group(1), found.group(2)) if found else None


def promotion_draft(entry: Entry, source_line: str) -> Draft:
    """The draft of ``entry``'s copy: a root whose body ends with its origin."""
    if entry.kind == "correction":
        raise InvalidEntry(
            f"{entry.id[:12]} is a correction: it supersedes its parents and means nothing "
            "without them; promote the entry it replaced into force instead"
        )
    body = entry.body.strip()
    return Draft(
        kind=entry.kind,
        summary=entry.summary,
        body=(f"{body}\n\n" if body else "") + origin_body(source_line, entry.id),
        author=entry.author,
        agent=entry.agent,
        provider=entry.provider,
        model=entry.model,
        parents=(),
    )


async def copies_in(store: Store, entry_id: str) -> list[str]:
    """Ids of the entries of ``store`` whose origin block names ``entry_id``: found by SQL
    in a line file, the entries read once elsewhere (a hub's line)."""

    def names_it(body: str) -> bool:
        return (origin_of(body) or ("", ""))[1] == entry_id

    def read(conn: sqlite3.Connection) -> list[str]:
        rows = conn.execute(
            "SELECT id, body FROM entries WHERE instr(body, ?) ORDER BY seq",
            (f"\n  id: {entry_id}",),
        ).fetchall()
        return [i for i, body in rows if names_it(body)]

    async def streamed(store: Store) -> list[str]:
        return [e.id async for e in store.stream() if names_it(e.body)]

    return await on_backend(
        store, FileOrEntries(file=lambda sql: sql.run_read(read), entries=streamed)
    )
