"""Importing lifeline-context 0.6 databases as a stream: memory bounded at any size.

Each ``.db`` file is read read-only, in row order, a page at a time (the next page is read
on a thread while this one is checked and stored). Every row is decoded and checked as
:func:`lifeline.migration.importer.read_lc_db` does (same ids, ts, parents, the same refusals), then
stored in batches once its parents are known:

- in the same batch, already stored in our line (an earlier batch, an earlier import), or
  declared there as a cross-line parent;
- in another of the project's databases, checked the same way: then declared a cross-line
  parent before the child is stored (looked up by id, one indexed query per batch).

An entry whose parent is none of these yet waits (the old tool stores parents first, so
this is rare); it is stored as soon as its parent is, and at the end whatever still waits
is refused with its descendants, as the whole-file plan refuses them. Batches are their own
transactions: an interrupted import leaves a parent-closed prefix, and running it again
(idempotent: stored ids are skipped) completes it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from lifeline.entry import Entry
from lifeline.errors import ConfigError, InvalidEntry
from lifeline.lines import validate_line_name
from lifeline.migration.importer import (
    LinePlan,
    append_keeping_times,
    decode_lc_row,
    open_lc_db,
)
from lifeline.migration.markdown import Rejected
from lifeline.store.port import Store
from lifeline.validate import DEFAULT_LIMITS, HARD_LIMITS, Limits, check_admissible, over_limits

__all__ = ["BATCH_ROWS", "count_rows", "import_databases"]

BATCH_ROWS = 5_000
_SELECT = "SELECT seq, id, ts, dedup_key, payload FROM entries"

OpenStore = Callable[[str], AbstractAsyncContextManager[Store]]


def _connect(path: Path) -> sqlite3.Connection:
    try:
        return open_lc_db(path)
    except sqlite3.Error as exc:
        raise _unreadable(path, exc) from exc


def _unreadable(path: Path, exc: sqlite3.Error) -> ConfigError:
    return ConfigError(
        f"cannot read {path} as a lifeline-context 0.6 ledger ({exc}); "
        "pass its project root or one of its .lifeline/*.db files"
    )


def count_rows(paths: Iterable[Path]) -> int:
    """Rows in all the databases (for a progress bar)."""
    total = 0
    for path in paths:
        conn = _connect(path)
        try:
            total += int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])
        except sqlite3.Error as exc:
            raise _unreadable(path, exc) from exc
        finally:
            conn.close()
    return total


def _checked(row: tuple[object, ...]) -> tuple[Entry | None, Rejected | None]:
    """A row as an entry that passes the hard checks, or why it is refused."""
    seq = row[0]
    entry, refused = decode_lc_row(row)
    if refused is not None:
        return None, refused
    assert entry is not None
    try:
        check_admissible(entry, HARD_LIMITS)
    except InvalidEntry as exc:  # the same refusal as read_lc_db
        return None, Rejected(str(seq), entry.id, str(exc))
    return entry, None


class _OtherLines:
    """Finds parents in the project's other databases (checked as if imported there)."""

    def __init__(self, dbs: dict[str, Path], line: str) -> None:
        self._conns = {n: _connect(p) for n, p in dbs.items() if n != line}
        self._found: dict[str, str | None] = {}

    def lookup(self, ids: set[str]) -> dict[str, str]:
        wanted = [i for i in ids if i not in self._found]
        for name, conn in self._conns.items():
            if not wanted:
                break
            for start in range(0, len(wanted), 500):
                part = wanted[start : start + 500]
                marks = ",".join("?" * len(part))
                for row in conn.execute(f"{_SELECT} WHERE id IN ({marks})", part):
                    entry, _ = _checked(row)
                    if entry is not None:
                        self._found[entry.id] = name
            wanted = [i for i in wanted if i not in self._found]
        for i in wanted:
            self._found[i] = None
        return {i: line for i in ids if (line := self._found.get(i)) is not None}

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()


class _LineImport:
    """One database streamed into one line."""

    def __init__(self, plan: LinePlan, store: Store, others: _OtherLines, limits: Limits):
        self.plan, self.store, self.others, self.limits = plan, store, others, limits
        self.waiting: dict[str, tuple[Entry, str]] = {}  # id -> (entry, the parent it awaits)
        self.children: dict[str, list[str]] = {}  # awaited parent id -> waiting children
        self.kept = 0

    async def _known(self, ids: set[str]) -> set[str]:
        """Those of ``ids`` stored or declared in our line, or found in another database
        (then declared a cross-line parent here, before any child is stored)."""
        ids = ids - self.waiting.keys()
        if not ids:
            return set()
        known = await self.store.contains(ids) | (ids & set(await self.store.externals()))
        cross = self.others.lookup(ids - known)
        for parent, other in sorted(cross.items()):
            if parent not in self.plan.externals:
                await self.store.declare_external(parent, other)
                self.plan.externals[parent] = other
        return known | cross.keys()

    async def batch(self, entries: list[Entry]) -> None:
        batch_ids = {e.id for e in entries}
        known = await self._known({p for e in entries for p in e.parents} - batch_ids)
        ready: list[Entry] = []
        for entry in entries:  # row order: a parent in the batch comes before its child
            await self._place(entry, known, ready)
        await self._store(ready)

    async def _place(self, first: Entry, known: set[str], ready: list[Entry]) -> None:
        """Store ``first`` with this batch when its parents are known, then the entries
        that waited for it (a loop, not recursion: a chain of them can be long)."""
        todo = [first]
        while todo:
            entry = todo.pop()
            missing = [p for p in entry.parents if p not in known]
            if missing:  # rare: look again (a parent stored since this entry began to wait)
                known |= await self._known(set(missing) - {e.id for e in ready})
                missing = [p for p in missing if p not in known]
            if missing:
                self.waiting[entry.id] = (entry, missing[0])
                self.children.setdefault(missing[0], []).append(entry.id)
                continue
            known.add(entry.id)
            ready.append(entry)
            todo.extend(self.waiting.pop(c)[0] for c in self.children.pop(entry.id, []))

    async def _store(self, ready: list[Entry]) -> None:
        if not ready:
            return
        kept, added = await append_keeping_times(self.store, ready, self.plan.rejected)
        self.kept += len(kept)
        self.plan.over_caps.extend(e.id for e in kept if over_limits(e, self.limits) is not None)
        self.plan.added += added

    def finish(self) -> None:
        """Refuse what still waits: a parent found in none of the imported lines."""
        for entry, parent in self.waiting.values():
            reason = f"parent {parent[:12]} is in none of the imported lines"
            self.plan.rejected.append(Rejected("-", entry.id, reason))
        self.plan.kept = self.kept


async def _pages(conn: sqlite3.Connection, path: Path) -> AsyncIterator[list[tuple[object, ...]]]:
    try:
        cursor = conn.execute(f"{_SELECT} ORDER BY seq")
        pending = asyncio.ensure_future(asyncio.to_thread(cursor.fetchmany, BATCH_ROWS))
        while rows := await pending:
            pending = asyncio.ensure_future(asyncio.to_thread(cursor.fetchmany, BATCH_ROWS))
            yield rows
    except sqlite3.Error as exc:
        raise _unreadable(path, exc) from exc


async def import_databases(
    dbs: list[Path],
    open_store: OpenStore,
    limits: Limits = DEFAULT_LIMITS,
    advance: Callable[[int], None] = lambda _n: None,
) -> AsyncIterator[LinePlan]:
    """Stream each database into the line of its name; yields each line's report."""
    named = {validate_line_name(p.stem): p for p in dbs}
    for name, path in named.items():
        plan = LinePlan(name, path, [], {}, [])
        others = _OtherLines(named, name)
        conn = _connect(path)
        try:
            async with open_store(name) as store:
                job = _LineImport(plan, store, others, limits)
                async for rows in _pages(conn, path):
                    entries: list[Entry] = []
                    for row in rows:
                        entry, refused = _checked(row)
                        if refused is not None:
                            plan.rejected.append(refused)
                        elif entry is not None:
                            entries.append(entry)
                    await job.batch(entries)
                    advance(len(rows))
                job.finish()
        finally:
            conn.close()
            others.close()
        yield plan
