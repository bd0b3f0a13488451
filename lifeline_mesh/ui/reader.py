"""What the viewer reads from one line: the truth (cached by the line's head), one entry and
its neighbours, a page of the timeline, and the window of the DAG around an entry.

Every read is one bounded query on the store's own indexes (keyset paging on
``(height, ts, id)``, lookups by id or row): a page costs the same on a line of 100 or 100k
entries, and nothing loads the whole line. The only writes are the caches the ledger keeps
beside the entries (the truth snapshot, the recall index), which any reader brings up to date.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Any

from lifeline.entry import Entry
from lifeline.store.sqlite import SqliteStore
from lifeline.truth.recall import recall
from lifeline.truth.service import LineTruth, resolve_name
from lifeline.truth.snapshot import truth_source
from lifeline.truth.source import ShownQuery
from lifeline_mesh.ui.dag import DagNode
from lifeline_mesh.ui.search import Found, RankCache, search
from lifeline_mesh.ui.sessions_view import SessionsView

__all__ = ["PAGE_SIZE", "SHOWN", "Filters", "HistoryPage", "LineReader", "read_shown"]

PAGE_SIZE = 50
SHOWN = 100  # newest items of each list the Truth page shows; the timeline has the rest
SCAN_BUDGET = 20_000  # entries a filtered page examines at most (see _history_sql)
THREAD_SCAN = 500  # a thread with more entries is paged down the index first (_thread_window)
DAG_DEPTH = 3
DAG_MAX_NODES = 48
_ROW = "id, ts, kind, author, agent, summary, height, parents"


@dataclass(frozen=True, slots=True)
class Filters:
    """The timeline's filters; empty strings mean "any"."""

    kind: str = ""
    author: str = ""
    agent: str = ""
    thread: str = ""
    since: str = ""  # a date or time: entries with ts >= since
    until: str = ""  # entries with ts < until (a bare date means the end of that day)

    def active(self) -> bool:
        return any((self.kind, self.author, self.agent, self.thread, self.since, self.until))

    def query(self) -> dict[str, str]:
        """The non-empty filters, as query parameters."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name)}


@dataclass(slots=True)
class HistoryPage:
    rows: list[dict[str, Any]]
    older: str | None  # id to continue from (keyset cursor), None at the oldest
    filters: Filters = field(default_factory=Filters)
    scanned_to: str | None = None  # the scan budget ended here before a page was full


def _row(values: tuple[Any, ...]) -> dict[str, Any]:
    eid, ts, kind, author, agent, summary, height, parents = values
    return {
        "id": eid,
        "ts": ts,
        "kind": kind,
        "author": author,
        "agent": agent,
        "summary": " ".join(str(summary).split())[:300],
        "height": int(height),
        "parents": json.loads(parents),
    }


def _until_bound(until: str) -> str:
    return until + "T99" if len(until) == 10 else until  # a whole day: past any time in it


def _filter_sql(f: Filters, thread_ids: list[str] | None) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    for column in ("kind", "author", "agent"):
        if getattr(f, column):
            where.append(f"{column} = ?")
            params.append(getattr(f, column))
    if f.since:
        where.append("ts >= ?")
        params.append(f.since)
    if f.until:
        where.append("ts < ?")
        params.append(_until_bound(f.until))
    if thread_ids is not None:
        where.append("id IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(thread_ids))
    return where, params


_ORDER = " ORDER BY height DESC, ts DESC, id DESC"


def _edge(conn: sqlite3.Connection, bounds: list[str], params: list[Any]) -> tuple[Any, ...] | None:
    """The far end of a window of SCAN_BUDGET entries past the cursor, read from the
    (height, ts, id) index alone; None when the rest of the line fits in the window."""
    found = conn.execute(
        "SELECT height, ts, id FROM entries"
        + (" WHERE " + " AND ".join(bounds) if bounds else "")
        + _ORDER
        + f" LIMIT 1 OFFSET {SCAN_BUDGET}",
        params,
    ).fetchone()
    return tuple(found) if found is not None else None


def _thread_window(
    conn: sqlite3.Connection,
    f: Filters,
    bounds: list[str],
    params: list[Any],
    where: tuple[list[str], list[Any]],
) -> HistoryPage | None:
    """A long thread's page read down the (height, ts, id) index within a window of
    SCAN_BUDGET entries: each index entry is tested against the thread's ids, and only
    the matching rows are read (a row's height is stored after its body, so looking the
    thread's ids up reads every one of its entries whole: 4k rows, 0.1–1.5 s at 1M).
    None when fewer than a page of the thread lies in the window and the line goes on:
    the caller then looks the ids up (the same page either way)."""
    edge = _edge(conn, bounds, params)
    bounds, params = list(bounds), list(params)
    if edge is not None:
        bounds.append("(height, ts, id) > (?, ?, ?)")
        params.extend(edge)
    sql = f"SELECT {_ROW} FROM entries INDEXED BY entries_order"
    sql += " WHERE " + " AND ".join(bounds + where[0]) + _ORDER + " LIMIT ?"
    rows = [_row(r) for r in conn.execute(sql, (*params, *where[1], PAGE_SIZE + 1))]
    if len(rows) > PAGE_SIZE:
        return HistoryPage(rows[:PAGE_SIZE], rows[PAGE_SIZE - 1]["id"], f)
    return HistoryPage(rows, None, f) if edge is None else None


def _history_sql(
    conn: sqlite3.Connection, f: Filters, thread_ids: list[str] | None, before: str | None
) -> HistoryPage:
    """One page, newest first. With filters (other than a thread, whose ids are known), at
    most SCAN_BUDGET entries are examined: a filter that matches little never scans the
    whole line in one request; the page then ends where the scan stopped."""
    bounds: list[str] = []
    params: list[Any] = []
    if before:
        key = conn.execute("SELECT height, ts, id FROM entries WHERE id = ?", (before,)).fetchone()
        if key is not None:
            bounds.append("(height, ts, id) < (?, ?, ?)")
            params.extend(key)
    where, filter_params = _filter_sql(f, thread_ids)
    if thread_ids is not None and len(thread_ids) > THREAD_SCAN:
        found = _thread_window(conn, f, bounds, params, (where, filter_params))
        if found is not None:
            return found
    edge: tuple[Any, ...] | None = None
    if where and thread_ids is None:
        edge = _edge(conn, bounds, params)
        if edge is not None:
            bounds.append("(height, ts, id) > (?, ?, ?)")
            params.extend(edge)
    sql = f"SELECT {_ROW} FROM entries"
    if bounds or where:
        sql += " WHERE " + " AND ".join(bounds + where)
    sql += _ORDER + " LIMIT ?"
    rows = [_row(r) for r in conn.execute(sql, (*params, *filter_params, PAGE_SIZE + 1))]
    if len(rows) > PAGE_SIZE:
        return HistoryPage(rows[:PAGE_SIZE], rows[PAGE_SIZE - 1]["id"], f)
    if edge is None:
        return HistoryPage(rows, None, f)
    # Fewer matches than a page in the window: the next page starts past its end (the
    # cursor is exclusive, so it names the window's last entry, just before the edge).
    last = conn.execute(
        "SELECT id FROM entries WHERE (height, ts, id) > (?, ?, ?) ORDER BY height, ts, id LIMIT 1",
        edge,
    ).fetchone()
    return HistoryPage(rows, last[0], f, scanned_to=last[0])


def _window(conn: sqlite3.Connection, focus: str) -> list[dict[str, Any]]:
    """Entries within DAG_DEPTH links of ``focus`` (both ways), at most DAG_MAX_NODES."""
    found: dict[str, dict[str, Any]] = {}
    start = conn.execute(f"SELECT {_ROW}, seq FROM entries WHERE id = ?", (focus,)).fetchone()
    if start is None:
        return []
    frontier = [(start[:-1], int(start[-1]))]
    found[focus] = _row(start[:-1])
    for _ in range(DAG_DEPTH):
        ids = [p for values, _seq in frontier for p in json.loads(values[7])]
        seqs = [seq for _values, seq in frontier]
        nxt = conn.execute(
            f"SELECT {_ROW}, seq FROM entries WHERE id IN (SELECT value FROM json_each(?))"
            " UNION SELECT e.id, e.ts, e.kind, e.author, e.agent, e.summary, e.height,"
            " e.parents, e.seq FROM links l JOIN entries e ON e.seq = l.child_seq"
            " WHERE l.parent_seq IN (SELECT value FROM json_each(?))"
            " ORDER BY 7, 2, 1 LIMIT ?",
            (json.dumps(ids), json.dumps(seqs), DAG_MAX_NODES),
        ).fetchall()
        frontier = []
        for r in nxt:
            if r[0] not in found and len(found) < DAG_MAX_NODES:
                found[r[0]] = _row(r[:-1])
                frontier.append((r[:-1], int(r[-1])))
        if not frontier:
            break
    return list(found.values())


async def read_shown(store: SqliteStore) -> LineTruth:
    """The truth the pages read, bounded by what they show rather than by the line.

    ``truth`` is whole (what is superseded, the ids in force, each thread's live
    checkpoint); ``state`` holds the small accumulators (count, head, kinds, pins,
    integrity), every thread's name with no marks (a thread's marks are read when the
    timeline is filtered by it: :func:`_thread_ids`), and only the items a page can quote:
    the newest SHOWN decisions and open questions (and more), pins, the identity and the
    threads' labels. At 1M entries this holds ~70 MB where the whole state held ~250 MB,
    and reads in about a second where folding it back took 6–8 s. A line whose tables
    cannot be brought up to date (a read-only copy that is behind) is folded whole."""
    state, truth, _thread = await truth_source(store).shown(
        ShownQuery(thread=None, recent=0, max_items=2 * SHOWN, resolve=resolve_name)
    )
    return LineTruth(state, truth)


def _thread_ids(conn: sqlite3.Connection, thread: str) -> list[str] | None:
    """The ids marked with ``thread`` (None when the line has no truth tables)."""
    try:
        rows = conn.execute("SELECT id FROM truth_marks WHERE thread = ?", (thread,))
        return [r[0] for r in rows]
    except sqlite3.OperationalError:
        return None


def _truth_key(conn: sqlite3.Connection) -> tuple[int, int]:
    top = conn.execute("SELECT coalesce(max(seq), 0) FROM entries").fetchone()[0]
    gen = conn.execute("SELECT n FROM truth_generation").fetchone()
    return int(top), int(gen[0]) if gen else -1


class LineReader:
    """Reads one line for the viewer; keeps the store open and the truth cached."""

    def __init__(self, name: str, store: SqliteStore) -> None:
        self.name = name
        self.store = store
        self.sessions = SessionsView(store)  # the Sessions pages' reads of this line
        self._truth: tuple[tuple[int, int], LineTruth] | None = None
        self._rankings = RankCache()  # search: the last rankings of this line

    async def truth(self) -> LineTruth:
        """The truth, folded again only when the line changed since the last read."""
        key = await self.store.run_read(_truth_key)
        if self._truth is None or self._truth[0] != key:
            self._truth = (key, await read_shown(self.store))
        return self._truth[1]

    async def count(self) -> int:
        return (await self.truth()).state.count

    async def entry(self, ref: str) -> Entry:
        return await self.store.resolve(ref)

    async def entries(self, ids: list[str]) -> dict[str, Entry]:
        return {e.id: e for e in await self.store.get_many(ids)}

    async def children(self, entry_id: str) -> list[str]:
        return await self.store.children(entry_id)

    async def history(self, f: Filters, before: str | None = None) -> HistoryPage:
        thread_ids: list[str] | None = None
        if f.kind and f.kind not in (await self.truth()).state.kinds:
            return HistoryPage([], None, f)  # no entry of that kind at all: nothing to scan
        if f.thread:
            marks = (await self.truth()).state.threads.get(f.thread, [])
            thread_ids = [m[1] for m in marks]
            if not thread_ids:  # the marks were not loaded (read_shown): read them now
                thread_ids = await self.store.run_read(partial(_thread_ids, thread=f.thread))
                thread_ids = thread_ids or []
        return await self.store.run_read(
            partial(_history_sql, f=f, thread_ids=thread_ids, before=before)
        )

    async def window(self, focus: str) -> list[DagNode]:
        rows = await self.store.run_read(partial(_window, focus=focus))
        superseded = (await self.truth()).truth.superseded
        return [
            DagNode(
                r["id"],
                r["kind"],
                r["ts"],
                r["summary"],
                tuple(r["parents"]),
                r["height"],
                r["id"] in superseded,
            )
            for r in rows
        ]

    async def search(self, query: str, page: int = 0) -> Found:
        """A page of hits, ranked within a bounded set of matches (ui/search.py)."""
        truth = (await self.truth()).truth
        return await search(self.store, truth, query, page=page, cache=self._rankings)

    async def warm_up(self) -> None:
        """Fold the truth and bring the recall index up to date, so the first page a reader
        opens does not pay for a line that grew (or was never read) while nobody looked."""
        await recall(self.store, (await self.truth()).truth, "warm")

    async def close(self) -> None:
        await self.sessions.close()
        await self.store.close()
