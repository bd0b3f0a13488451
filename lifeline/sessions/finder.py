"""Message-level search over a sessions line: ranked hits, each a message or a tool call
that ``sessions show ID --offset N`` opens (decision 0070).

BM25 over the index's full-text table (SQLite FTS5, the tokenizer of ``lifeline recall``):
messages holding every word of the query first, then those holding some of them. User text
only ever becomes quoted terms, never FTS syntax. A word held by a great many messages is
ranked among the newest :data:`CANDIDATES` matches (and every match of the query's rare
words), so a warm query stays fast on a corpus of any size. Each hit is read back from its
part entry, checked against its id, and shown with an excerpt around the first word found.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from lifeline.errors import ConfigError
from lifeline.home import Home
from lifeline.sessions.index import SessionIndex, SqlRows
from lifeline.sessions.messages import ROLES, message_text
from lifeline.store.backend import on_backend
from lifeline.store.port import Store
from lifeline.store.tiers import SqlLine
from lifeline.truth.recall import query_terms

if TYPE_CHECKING:
    from lifeline.store.postgres import PgStore
    from lifeline.store.sqlite import SqliteStore

__all__ = ["CANDIDATES", "SearchHit", "opened_index", "parse_since", "search"]

CANDIDATES = 4_000
_EXCERPT = 160


async def _file_index(store: SqlLine) -> SessionIndex:
    """A line file's index, in its file beside the line (in memory when that folder
    cannot be written), brought up to date from the line's rows past its mark."""
    try:
        index = SessionIndex(Home.sessions_index_path(store.path))
    except (OSError, sqlite3.Error):  # a read-only copy of a project: index in memory
        index = SessionIndex(None)
    try:

        def catch_up(conn: sqlite3.Connection) -> int:
            rows = SqlRows(conn)
            return index.catch_up(rows) if index.behind(rows) else 0

        await store.run_read(catch_up)
    except BaseException:
        index.close()
        raise
    return index


async def _built_index(store: Store) -> SessionIndex:
    """Any other line's index (a memory store's), built in memory from its entries."""
    index = SessionIndex(None)
    index.rebuild([(e.id, e.ts, e.kind, e.body, e.parents) async for e in store.stream()])
    return index


class _Indexes:
    def sqlite(self, store: SqliteStore) -> Awaitable[SessionIndex]:
        return _file_index(store)

    def postgres(self, store: PgStore) -> Awaitable[SessionIndex]:
        from lifeline.sessions.hub_index import hub_index  # a hub's: the driver's side

        return hub_index(store)

    def plain(self, store: Store) -> Awaitable[SessionIndex]:
        return _built_index(store)


@asynccontextmanager
async def opened_index(store: Store) -> AsyncIterator[SessionIndex]:
    """The line's index, brought up to date: its file beside a line file, a file in the
    user's cache for a hub's line (:mod:`lifeline.sessions.hub_index`), else built in
    memory from the entries."""
    index = await on_backend(store, _Indexes())
    try:
        yield index
    finally:
        index.close()


def parse_since(text: str | None, now: datetime | None = None) -> str | None:
    """``--since``: a date (``2026-11-30``), a time (ISO 8601, UTC) or ``N`` days (``7d``),
    as the UTC time string that recorded times are compared with."""
    if text is None:
        return None
    value = text.strip()
    days = value[:-1]
    try:
        if value.endswith("d") and days.isascii() and days.isdigit() and len(days) <= 6:
            start = (now or datetime.now(UTC)) - timedelta(days=int(days))
            return start.strftime("%Y-%m-%dT%H:%M:%S")
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (ValueError, OverflowError):  # 999999d reaches before year 1
        raise ConfigError(
            f"--since {text!r} is not a date; give 2026-11-30, 2026-11-30T09:00:00Z or 7d"
        ) from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC)
    return parsed.strftime("%Y-%m-%dT%H:%M:%S")


@dataclass(frozen=True, slots=True)
class SearchHit:
    session: str  # the header entry id (what `sessions show` takes)
    native_id: str
    tool: str
    title: str
    offset: int  # the item's position in the session: `sessions show ID --offset N`
    ts: str | None
    role: str
    name: str
    score: float  # relative to the best hit (1.0)
    excerpt: str

    def as_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "native_id": self.native_id,
            "tool": self.tool,
            "title": self.title,
            "offset": self.offset,
            "ts": self.ts,
            "role": self.role,
            "name": self.name,
            "score": self.score,
            "excerpt": self.excerpt,
            "show": f"lifeline sessions show {self.session[:12]} --json --offset {self.offset}"
            " --limit 1",
        }


def _match(terms: Sequence[str], every: bool) -> str:
    # Terms hold only letters and digits, so quoting makes each a plain phrase.
    return (" AND " if every else " OR ").join(f'"{t}"' for t in terms)


def _bounds(db: sqlite3.Connection, terms: Sequence[str], every: bool) -> tuple[str, list[Any]]:
    """Every match when there are at most :data:`CANDIDATES`; else the newest of them and
    every match of a rare word (as ``lifeline recall`` bounds its candidates)."""

    def newest(match: str) -> list[int]:
        return [
            int(r[0])
            for r in db.execute(
                "SELECT rowid FROM msgs_fts WHERE msgs_fts MATCH ? ORDER BY rowid DESC LIMIT ?",
                (match, CANDIDATES + 1),
            )
        ]

    rows = newest(_match(terms, every))
    if len(rows) <= CANDIDATES:
        return "", []
    lo = rows[CANDIDATES - 1]
    rare: set[int] = set()
    for term in terms:
        found = newest(_match([term], True))
        if len(found) <= CANDIDATES:
            rare.update(r for r in found if r < lo)
    if not rare:
        return " AND msgs_fts.rowid >= ?", [lo]
    return (
        " AND (msgs_fts.rowid >= ? OR +msgs_fts.rowid IN (SELECT value FROM json_each(?)))",
        [lo, json.dumps(sorted(rare))],
    )


def _rank(
    db: sqlite3.Connection,
    terms: Sequence[str],
    every: bool,
    filters: tuple[str, list[Any]],
    limit: int,
) -> list[tuple[Any, ...]]:
    where, args = _bounds(db, terms, every)
    return db.execute(
        "SELECT m.rowid, -bm25(msgs_fts) AS score, m.hid, m.part, m.item, m.ts, m.role,"
        " m.name, s.native, s.tool, s.title FROM msgs_fts"
        " JOIN msgs m ON m.rowid = msgs_fts.rowid JOIN sessions s ON s.hid = m.hid"
        f" WHERE msgs_fts MATCH ?{where} AND s.current = 1{filters[0]}"
        " ORDER BY score DESC, m.rowid LIMIT ?",
        (_match(terms, every), *args, *filters[1], limit),
    ).fetchall()


def _filters(
    tool: str | None, since: str | None, role: str | None, session: str | None
) -> tuple[str, list[Any]]:
    args: list[Any] = []
    sql = ""
    if tool:
        sql, args = sql + " AND s.tool = ?", [*args, tool]
    if since:
        sql, args = sql + " AND coalesce(m.ts, s.started) >= ?", [*args, since]
    if role:
        if role not in ROLES:
            raise ConfigError(f"no role {role!r}; roles: {', '.join(ROLES)}")
        sql, args = sql + " AND m.role = ?", [*args, role]
    if session:
        sql, args = sql + " AND m.hid = ?", [*args, session]
    return sql, args


def ranked(
    index: SessionIndex,
    query: str,
    *,
    tool: str | None = None,
    since: str | None = None,
    role: str | None = None,
    session: str | None = None,
    limit: int = 20,
) -> list[tuple[Any, ...]]:
    """Rows of the best ``limit`` messages: those with every word first, then the rest."""
    terms = query_terms(query)
    if not terms or limit <= 0:
        return []
    filters = _filters(tool, since, role, session)
    rows = _rank(index.db, terms, True, filters, limit)
    if len(rows) < limit and len(terms) > 1:
        have = {r[0] for r in rows}
        best = max((r[1] for r in rows), default=0.0)
        more = [r for r in _rank(index.db, terms, False, filters, limit) if r[0] not in have]
        # every word beats some words: the second list ranks below the first
        rows += [(r[0], min(r[1], best * 0.999) if best else r[1], *r[2:]) for r in more]
    return rows[:limit]


def _excerpt(text: str, terms: Sequence[str]) -> str:
    folded = text.casefold()
    spots = [i for i in (folded.find(t) for t in terms) if i >= 0]
    at = min(spots) if spots else 0
    start = max(at - _EXCERPT // 3, 0)
    piece = " ".join(text[start : start + _EXCERPT].split())
    return ("…" if start else "") + piece + ("…" if start + _EXCERPT < len(text) else "")


async def search(
    store: Store,
    index: SessionIndex,
    query: str,
    *,
    tool: str | None = None,
    since: str | None = None,
    role: str | None = None,
    session: str | None = None,
    limit: int = 20,
) -> list[SearchHit]:
    """The best ``limit`` messages for ``query``, each read back from its intact part."""
    rows = ranked(index, query, tool=tool, since=since, role=role, session=session, limit=limit)
    if not rows:
        return []
    parts = {e.id: e for e in await store.get_many(list({r[3] for r in rows}))}
    firsts = dict(
        index.db.execute(
            "SELECT id, first FROM parts WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(parts)),),
        ).fetchall()
    )
    terms = query_terms(query)
    best = rows[0][1] or 1.0
    items_of: dict[str, list[Any] | None] = {}  # each part parsed once
    for pid, entry in parts.items():
        items_of[pid] = None  # a part that no longer matches its id is never served
        if entry.is_intact():
            with suppress(ValueError, AttributeError):
                items = json.loads(entry.body).get("items")
                items_of[pid] = items if isinstance(items, list) else []
    hits: list[SearchHit] = []
    for _rid, score, hid, pid, item, ts, role_, name, native, tool_, title in rows:
        known = items_of.get(pid)
        if known is None:
            continue
        text = message_text(known, item - int(firsts.get(pid, 0)))
        hits.append(
            SearchHit(
                session=hid,
                native_id=native or "",
                tool=tool_ or "",
                title=title or "",
                offset=int(item),
                ts=ts,
                role=role_,
                name=name,
                score=round(score / best, 4) if best > 0 else 0.0,
                excerpt=_excerpt(text, terms),
            )
        )
    return hits
