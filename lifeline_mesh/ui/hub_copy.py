"""A hub's lines as the viewer reads them: a copy in SQLite files of its own, kept up to date.

The viewer's reads (truth tables, history windows, the graph, search) are SQL on a line
file. On a hub process root the lines live in PostgreSQL (``home.lines``, decision 0060), so
the viewer keeps a copy of each line it shows in a private temporary folder — a cache, never
evidence, removed when the viewer stops — and before each page brings it up to date from
the database: the line's totals compared first (one row each side), then only the entries
the copy lacks, parents first, in batches.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore

__all__ = ["HubCopy"]

_BATCH = 2000


class HubCopy:
    """The viewer's copies of ``home``'s lines (a hub's)."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self._copies: Home | None = None  # a private project in a temporary folder

    async def open(self, name: str) -> SqliteStore:
        """The copy of line ``name``, up to date (NotFound when the hub has no such line)."""
        self.home.require_line(name)
        if self._copies is None:
            self._copies = Home(Path(tempfile.mkdtemp(prefix="lifeline-viewer-")))
            self._copies.prepare()
        store = await SqliteStore.open(self._copies.line_path(name), create=True)
        await self.refresh(name, store)
        return store

    async def refresh(self, name: str, copy: SqliteStore) -> int:
        """Add what the database holds and the copy lacks; how many entries were added."""
        async with self.home.open_line(name) as source:
            theirs = await source.entry_totals()  # type: ignore[attr-defined]
            if theirs == await copy.entry_totals():
                return 0
            held = {entry_id for _h, entry_id in await copy.keys()}
            missing = [entry_id for _h, entry_id in await source.keys() if entry_id not in held]
            for entry_id, line in (await source.externals()).items():
                await copy.declare_external(entry_id, line)
            added = 0
            for k in range(0, len(missing), _BATCH):
                batch = await source.get_many(missing[k : k + _BATCH])
                added += (await copy.append_many(batch)).count
            return added

    def close(self) -> None:
        if self._copies is not None:
            shutil.rmtree(self._copies.root, ignore_errors=True)
            self._copies = None
