"""A hub's lines as the viewer reads them: a copy in SQLite files of its own, kept up to date.

The viewer's reads (truth tables, history windows, the graph, search) are SQL on a line
file. On a hub process root the lines live in PostgreSQL (``home.lines``, decision 0060), so
the viewer keeps a copy of each line it shows in a private temporary folder — a cache, never
evidence, removed when the viewer stops — and before each page brings it up to date from
the database: the line's totals first (one row), and when they changed since the last
page, the rows past the last row number copied, in row order (parents before children),
a batch at a time. The first page of a line copies it that way too, in memory bounded by
a batch; :attr:`HubCopy.progress` says how far it is, for the page that waits on it
(ui/viewer.py). Only when the totals still differ after that (a stored entry's ts changed in
place, which moves no row number) are the two sides' ids compared, as a full pass. A
damaged row on the hub is left out of the copy, with its descendants (logged), never an
error page.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from lifeline.entry import Entry
from lifeline.errors import InvalidEntry, LifelineError
from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from lifeline.wording import count, noun

if TYPE_CHECKING:
    from lifeline.store.postgres import PgStore
    from lifeline.store.summary import SetTotals

__all__ = ["HubCopy", "LinePreparing"]

_BATCH = 2000
log = logging.getLogger(__name__)


class LinePreparing(LifelineError):
    """A line's first copy is still being made; how far it is."""

    def __init__(self, line: str, copied: int, total: int) -> None:
        self.line, self.copied, self.total = line, copied, total
        done = "starting"
        if total:
            entries = noun(total, "entry", "entries")
            done = f"{copied:,} of {total:,} {entries} ({copied * 100 // total}%)"
        super().__init__(
            f"copying line {line!r} from the hub's database: {done}. The viewer reads a copy"
            " of its own, made once (about a minute at a million entries); this page reloads"
            " itself until it is ready"
        )


class HubCopy:
    """The viewer's copies of ``home``'s lines (a hub's)."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self._copies: Home | None = None  # a private project in a temporary folder
        self._copied: dict[str, int] = {}  # each line's last row number copied
        self._seen: dict[str, SetTotals] = {}  # each line's totals at its last refresh
        self.full_passes = 0  # refreshes that compared every id (tests, figures)
        self.progress: dict[str, tuple[int, int]] = {}  # line: (entries copied, of how many)

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
        async with self.home.open_line(name) as opened:
            source: PgStore = opened  # type: ignore[assignment]  # a hub root's line
            theirs = await source.entry_totals()
            if self._seen.get(name) == theirs:
                return 0  # nothing written since the last page
            self.progress[name] = (0, theirs.count)
            for entry_id, line in (await source.externals()).items():
                await copy.declare_external(entry_id, line)
            added = await self._rows_after(name, source, copy)
            if theirs != await copy.entry_totals():
                added += await self._missing(source, copy)
            self._seen[name] = theirs
            return added

    async def _rows_after(self, name: str, source: PgStore, copy: SqliteStore) -> int:
        added = 0
        while True:
            last, entries = await source.rows_after(self._copied.get(name, 0), _BATCH)
            if last == self._copied.get(name, 0):
                return added
            added += await _append(copy, entries)
            self._copied[name] = last
            self.progress[name] = (added, self.progress[name][1])

    async def _missing(self, source: PgStore, copy: SqliteStore) -> int:
        """The entries the copy lacks, found by comparing every id (a full pass)."""
        self.full_passes += 1
        held = {entry_id for _h, entry_id in await copy.keys()}
        missing = [entry_id for _h, entry_id in await source.keys() if entry_id not in held]
        added = 0
        for k in range(0, len(missing), _BATCH):  # in key order: parents first
            added += await _append(copy, await source.get_many(missing[k : k + _BATCH]))
        return added

    def close(self) -> None:
        if self._copies is not None:
            shutil.rmtree(self._copies.root, ignore_errors=True)
            self._copies = None


async def _append(copy: SqliteStore, entries: list[Entry]) -> int:
    """``entries`` (parents first) into the copy; how many it added. A damaged row on the
    hub is left out of what the copy reads, and so are its descendants: they cannot be
    stored without it, as a sync leaves such orphans out (`lifeline-mesh verify` on the hub
    names the row)."""
    if not entries:
        return 0
    try:
        return (await copy.append_many(entries)).count
    except InvalidEntry:  # a parent neither held nor in the batch
        pass
    known = await copy.contains({p for e in entries for p in e.parents})
    known |= set(await copy.externals())
    kept = []
    for entry in entries:
        if all(p in known for p in entry.parents):
            kept.append(entry)
            known.add(entry.id)
    log.warning(
        "viewer: %s left out of the copy of line %r: a damaged row on the hub is"
        " an ancestor; `lifeline-mesh verify` there names it",
        count(len(entries) - len(kept), "entry", "entries"), copy.path.stem,
    )  # fmt: skip
    return (await copy.append_many(kept)).count if kept else 0
