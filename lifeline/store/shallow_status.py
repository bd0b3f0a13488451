"""Whether an open line is shallow, and what to tell its user (decision 0063).

The boundary itself is :mod:`lifeline.store.shallow`'s, in a line file's SQL; a line of
another backend (a hub's, filled by sessions and pushes) is never shallow. Apart from that
module because the write path imports it, and this one asks which backend a line is on
(:func:`~lifeline.store.backend.on_backend`, which imports the adapters).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from lifeline.store.backend import FileOrEntries, on_backend
from lifeline.store.port import Store
from lifeline.store.shallow import boundary_size, read_source
from lifeline.store.tiers import SqlLine
from lifeline.wording import count

__all__ = ["shallow_note", "shallow_origin"]


def _origin(conn: sqlite3.Connection) -> tuple[int, str | None]:
    size = boundary_size(conn)
    source = read_source(conn) if size else None
    peer = None if source is None else source.get("peer")
    return size, peer if isinstance(peer, str) else None


async def shallow_origin(store: Store) -> tuple[int, str | None]:
    """How many absent parents ``store``'s line names (0: complete), and the address its
    shallow part came from (None: not recorded, e.g. taken before decision 0082)."""
    return await on_backend(store, FileOrEntries(file=_file_origin, entries=_complete))


async def _file_origin(store: SqlLine) -> tuple[int, str | None]:
    return await store.run_read(_origin)


async def _complete(_store: Store) -> tuple[int, str | None]:
    return 0, None  # a hub's line is filled by sessions and pushes: never shallow


def _note(conn: sqlite3.Connection) -> tuple[int, dict[str, Any] | None]:
    size = boundary_size(conn)
    return size, read_source(conn) if size else None


async def shallow_note(store: Store, line: str) -> str | None:
    """One sentence saying ``line`` is shallow and what that means (None: it is not)."""
    size, source = await on_backend(store, FileOrEntries(file=_file_note, entries=_no_note))
    if not size:
        return None
    held = await store.count()
    origin = ""
    if source is not None:
        fields = dict(r.split(": ", 1) for r in str(source["head"]).splitlines()[1:6])
        origin = (
            f" (a shallow sync from node {fields.get('node', '?')}, which held "
            f"{fields.get('count', '?')} at {fields.get('ts', '?')})"
        )
    return (
        f"line {line!r} is shallow: {count(held, 'entry', 'entries')} here{origin}; the older "
        f"history is not here ({count(size, 'absent parent')}); `lifeline-mesh serve` deepens "
        "it in the background, or `lifeline-mesh sync PEER` at once"
    )


async def _file_note(store: SqlLine) -> tuple[int, dict[str, Any] | None]:
    return await store.run_read(_note)


async def _no_note(_store: Store) -> tuple[int, dict[str, Any] | None]:
    return 0, None  # a hub's line: never shallow
