"""The sessions index of a hub's line: a file in the user's cache, caught up by row number.

A line file keeps its sessions index in a file beside it (decision 0070). A hub's line has
no folder of its own, and its index used to be built in memory from the whole line on each
read: every `sessions list`, `search` or `usage` on a hub root read every session entry,
with its body, into memory. Now the index is a file in the user's cache folder
(``$XDG_CACHE_HOME/lifeline/hub-sessions/``, else ``~/.cache/…``; the file is the owner's
only, as a line file's index is), one per database line, brought up to date exactly as a
line file's is: the session entries past the last row number indexed, a batch at a time,
and from nothing when the row at that number is another entry (the line was replaced).
It is a cache: deleting it costs the next read a rebuild. When the folder cannot be
written, or is not this user's alone (other users could write into it or read the file),
the index is made in memory, the same way.

The index works in a thread (SQLite); its reads of the database go back to the event loop
that owns the pool.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import sqlite3
import stat
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from lifeline.entry import Entry
from lifeline.errors import InvalidEntry
from lifeline.sessions.caps import KIND_HEADER, KIND_PART, KIND_STATUS
from lifeline.sessions.index import Row, SessionIndex

if TYPE_CHECKING:
    from lifeline.store.postgres import PgStore

__all__ = ["PgRows", "hub_index", "hub_index_path"]

log = logging.getLogger(__name__)
T = TypeVar("T")
_KINDS = frozenset({KIND_HEADER, KIND_PART, KIND_STATUS})


def hub_index_path(store: PgStore) -> Path:
    """Where the index of ``store``'s line is kept: a name derived from the database, the
    line's number and name (no part of the URL is written in clear)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    key = f"{store.db.plain_dsn}\0{store.line_id}\0{store.name}".encode()
    name = hashlib.sha256(key).hexdigest()[:32] + ".db"  # in the user's cache, not a home's
    return Path(base) / "lifeline" / "hub-sessions" / name


class PgRows:
    """A hub line's rows as the index reads them, from the index's thread (``loop``: the
    event loop whose pool the store uses)."""

    def __init__(self, store: PgStore, loop: asyncio.AbstractEventLoop) -> None:
        self.store, self.loop = store, loop

    def _wait(self, work: Awaitable[T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result()  # type: ignore[arg-type]

    def top(self) -> int:
        rows = self._wait(
            self.store.fetch_line("SELECT next_seq - 1 FROM lines WHERE line_id = $1")
        )
        return int(rows[0][0]) if rows else 0

    def id_at(self, seq: int) -> str | None:
        rows = self._wait(
            self.store.fetch_line("SELECT id FROM entries WHERE line_id = $1 AND seq = $2", seq)
        )
        return bytes(rows[0][0]).hex() if rows else None

    def rows(self, after: int, top: int, limit: int) -> tuple[list[Row], int | None]:
        found = self._wait(
            self.store.fetch_line(
                "SELECT seq, doc FROM entries WHERE line_id = $1 AND seq > $2 AND seq <= $3"
                " ORDER BY seq LIMIT $4",
                after,
                top,
                limit,
            )
        )
        if not found:
            return [], None
        out: list[Row] = []
        for seq, doc in found:
            try:
                e = Entry.from_json(doc, check=False)
            except InvalidEntry as exc:  # the stream's rule for a stored row
                log.warning("sessions index: skipping undecodable row %s: %s", seq, exc)
                continue
            if e.kind in _KINDS:
                out.append((e.id, e.ts, e.kind, e.body, e.parents))
        return out, int(found[-1][0])

    def fetch(self, eid: str) -> tuple[str, tuple[str, ...], str] | None:
        found = self._wait(self.store.get_many([eid]))
        return (found[0].kind, found[0].parents, found[0].body) if found else None


def _ours(path: Path) -> bool:
    """Whether ``path`` (if it exists) is this user's and no one else's: a cache folder
    other users could write into (``XDG_CACHE_HOME`` on a shared folder) could hand this
    process an index of theirs, or read what it writes."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return True
    return (
        found.st_uid == os.geteuid()
        and not found.st_mode & 0o022
        and not (stat.S_ISREG(found.st_mode) and found.st_mode & 0o077)
    )


async def hub_index(store: PgStore) -> SessionIndex:
    """The index of a hub's line, brought up to date (see the module docstring)."""
    path = hub_index_path(store)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not (_ours(path.parent) and _ours(path)):
            raise PermissionError(f"{path} is not this user's alone")
        index = SessionIndex(path)
    except (OSError, sqlite3.Error) as exc:  # no cache folder of our own: in memory
        log.warning("sessions index of line %s kept in memory: %s", store.name, exc)
        index = SessionIndex(None)
    rows = PgRows(store, asyncio.get_running_loop())

    def catch_up() -> int:
        return index.catch_up(rows) if index.behind(rows) else 0

    try:
        await asyncio.to_thread(catch_up)
    except BaseException:
        index.close()
        raise
    return index
