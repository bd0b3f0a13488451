"""The sessions index: every session's messages (full text, BM25) and token usage, kept
beside its line in a file of its own (``Home.sessions_index_path``; decision 0070).

A cache, never evidence: it is derived from the line's ``session``, ``session-part`` and
``session-status`` entries (the redacted text only, never a transcript), brought up to date
when it is read — rows past the last indexed ``seq`` are read, whoever wrote them (ingest,
sync, another process) — and can be deleted at any time (the next read builds it again).

Per session it follows what :class:`lifeline.sessions.catalogue.Catalogue` shows: the
newest-format header, the best status, and the parts reached from that status's tail. A
part superseded by a longer version (the open tail of a growing file) has its rows replaced;
the parts before it keep theirs, so catching up after an ingest touches what changed only.
Each message keeps its position in the session, the ``--offset`` that ``sessions show``
takes to open it.

The full-text table is contentless (the text is in the line already): a part's rows are
deleted by deriving its messages again from the part (:mod:`lifeline.sessions.messages`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from lifeline.fsutil import create_private
from lifeline.sessions.caps import KIND_HEADER, KIND_PART, KIND_STATUS
from lifeline.sessions.messages import Tokens, messages_of, usage_of
from lifeline.sessions.stored_values import counts
from lifeline.store.sqlite_open import enter_wal

__all__ = ["INDEX_VERSION", "LineRows", "Row", "SessionIndex", "SqlRows"]

# Bump when what the index derives from a part changes: an index of another version is
# rebuilt from the line on its next read.
INDEX_VERSION = 2  # 2: usage summed per part, day and model (usage_sums)
_BATCH = 256  # entries read from the line at a time (at most ~12 MB of parts)
_KINDS = (KIND_HEADER, KIND_PART, KIND_STATUS)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sessions (
    hid TEXT PRIMARY KEY,
    tool TEXT, native TEXT, v INTEGER NOT NULL DEFAULT 0,
    current INTEGER NOT NULL DEFAULT 0,
    rank TEXT, tail TEXT, scope TEXT, started TEXT, title TEXT, usage TEXT
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS parts (
    hid TEXT NOT NULL, idx INTEGER NOT NULL, id TEXT NOT NULL,
    first INTEGER NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (hid, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS msgs (
    rowid INTEGER PRIMARY KEY,
    hid TEXT NOT NULL, part TEXT NOT NULL, item INTEGER NOT NULL,
    ts TEXT, role TEXT NOT NULL, name TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS msgs_part ON msgs(hid, part);
CREATE TABLE IF NOT EXISTS usage (
    hid TEXT NOT NULL, part TEXT NOT NULL, item INTEGER NOT NULL,
    ts TEXT, day TEXT, model TEXT,
    input INTEGER NOT NULL, cached INTEGER NOT NULL, cache_write INTEGER NOT NULL,
    output INTEGER NOT NULL, reasoning INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS usage_part ON usage(hid, part);
CREATE TABLE IF NOT EXISTS usage_sums (
    hid TEXT NOT NULL, part TEXT NOT NULL, day TEXT NOT NULL, model TEXT NOT NULL,
    input INTEGER NOT NULL, cached INTEGER NOT NULL, cache_write INTEGER NOT NULL,
    output INTEGER NOT NULL, reasoning INTEGER NOT NULL,
    PRIMARY KEY (hid, part, day, model)
) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS msgs_fts USING fts5(
    text, content='', tokenize='unicode61 remove_diacritics 2'
);
"""
_TABLES = ("meta", "sessions", "parts", "msgs", "usage", "usage_sums", "msgs_fts")

Fetch = Callable[[str], tuple[str, tuple[str, ...], str] | None]  # id -> kind, parents, body
Row = tuple[str, str, str, str, tuple[str, ...]]  # id, ts, kind, body, parents


class LineRows(Protocol):
    """What the index reads of a line: row numbers, and the session entries past one."""

    def top(self) -> int:
        """The line's last row number (0 when empty)."""
        ...

    def id_at(self, seq: int) -> str | None:
        """The id of the entry at row ``seq`` (None when there is none)."""
        ...

    def rows(self, after: int, top: int, limit: int) -> tuple[list[Row], int | None]:
        """The session entries of rows ``after`` < seq <= ``top``, in row order, ``limit``
        rows read at most; and the last row number read (None when none was)."""
        ...

    def fetch(self, eid: str) -> tuple[str, tuple[str, ...], str] | None:
        """An entry's kind, parents and body by id (None when the line lacks it)."""
        ...


def _json(body: str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _part_session(body: str) -> str | None:
    """A part's session id without parsing its items: ``dumps`` sorts keys, so the
    top-level ``"session"`` (after ``items``, ``lines``, ``part``) is the last one."""
    at = body.rfind('"session":"')
    if at < 0:
        return None
    start = at + len('"session":"')
    end = body.find('"', start)
    return body[start:end] if end > start else None


def _parents(text: str) -> tuple[str, ...]:
    try:
        value = json.loads(text)
    except ValueError:
        return ()
    return tuple(p for p in value if isinstance(p, str)) if isinstance(value, list) else ()


def _rank(status: dict[str, Any], ts: str) -> list[Any]:
    """The catalogue's order of a session's statuses: bytes, lines, items, then time."""

    def num(key: str) -> int:
        value = status.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    return [num("bytes"), num("lines"), num("items"), ts]


class SessionIndex:
    """One line's index file (or an in-memory one, for a line that is not SQLite)."""

    def __init__(self, path: Path | None) -> None:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            create_private(path)  # what the sessions said: the owner's business only
        target = str(path) if path is not None else ":memory:"
        self.db = sqlite3.connect(target, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA busy_timeout=10000")
        if path is not None:
            enter_wal(self.db, 10.0)
            self.db.execute("PRAGMA synchronous=NORMAL")  # a cache: a lost commit is a re-read
        self.db.executescript(_SCHEMA)

    def close(self) -> None:
        self.db.close()

    # -- bringing it up to date ---------------------------------------------------------

    def catch_up(self, line: LineRows) -> int:
        """Index the line's session entries past the mark. Returns how many line rows were
        read."""
        try:
            return self._catch_up(line)
        except _Rebuild:
            self.db.execute("DELETE FROM meta WHERE key = 'version'")  # start over
            return self._catch_up(line)

    def _catch_up(self, line: LineRows) -> int:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            mark = self._mark(line)
            top = line.top()
            done = 0
            while mark < top:
                rows, last = line.rows(mark, top, _BATCH)
                if last is None:
                    break
                self._apply(rows, line.fetch)
                done += last - mark
                mark = last
            self._set("mark", str(top))
            self._set("mark_id", line.id_at(top) or "")
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return done

    def behind(self, line: LineRows) -> bool:
        """Whether the line holds rows past the mark, or is not the line indexed (its row
        at the mark is another entry: the line was replaced), or the index is of another
        version."""
        mark = self._get("mark")
        top = line.top()
        if mark is None or int(mark) != top or self._get("version") != str(INDEX_VERSION):
            return True
        return (line.id_at(top) or "") != self._get("mark_id")

    def rebuild(self, entries: Iterable[tuple[str, str, str, str, tuple[str, ...]]]) -> None:
        """Index ``entries`` (id, ts, kind, body, parents) from nothing: a line that is not
        SQLite is read whole, once per read (decision 0070)."""
        rows = [(i, t, k, b, p) for i, t, k, b, p in entries if k in _KINDS]
        known = {i: (k, p, b) for i, _t, k, b, p in rows}
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self._reset()
            self._apply(rows, known.get)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def _get(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def _mark(self, line: LineRows) -> int:
        """The last seq indexed; 0 (and an empty index) when the index was built by another
        version or from another line (the row at the mark is not the one indexed)."""
        mark = int(self._get("mark") or 0)
        current = self._get("version") == str(INDEX_VERSION)
        if current and mark and line.id_at(mark) == self._get("mark_id"):
            return mark
        self._reset()
        return 0

    def _reset(self) -> None:
        for table in _TABLES[:-1]:
            self.db.execute(f"DELETE FROM {table}")
        self.db.execute("INSERT INTO msgs_fts (msgs_fts) VALUES ('delete-all')")  # contentless
        self._set("version", str(INDEX_VERSION))

    def _apply(self, rows: list[tuple[str, str, str, str, tuple[str, ...]]], fetch: Fetch) -> None:
        """Headers and statuses recorded; each session they or a new part touch settled."""
        dirty: dict[str, None] = {}
        keys: set[tuple[str, str]] = set()
        cache: dict[str, tuple[str, tuple[str, ...], str]] = {}
        for eid, ts, kind, body, parents in rows:
            data = _json(body) if kind != KIND_PART else {}  # a part is parsed when settled
            if kind == KIND_HEADER:
                tool, native = str(data.get("tool", "")), str(data.get("session", ""))
                v = data.get("v") if isinstance(data.get("v"), int) else 0
                self.db.execute(
                    "INSERT INTO sessions (hid, tool, native, v) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (hid) DO UPDATE SET tool = excluded.tool,"
                    " native = excluded.native, v = excluded.v",
                    (eid, tool, native, v),
                )
                keys.add((tool, native))
                dirty[eid] = None
            elif kind == KIND_STATUS and isinstance(data.get("session"), str):
                if self._status(data["session"], data, ts):
                    dirty[data["session"]] = None
            elif kind == KIND_PART and (owner := _part_session(body)) is not None:
                cache[eid] = (kind, parents, body)
                dirty[owner] = None
        for hid in dirty:
            self._settle(hid, fetch, cache)
        for tool, native in keys:
            self.db.execute(
                "UPDATE sessions SET current = (v = (SELECT max(v) FROM sessions s"
                " WHERE s.tool = sessions.tool AND s.native = sessions.native))"
                " WHERE tool = ? AND native = ?",
                (tool, native),
            )

    def _status(self, hid: str, status: dict[str, Any], ts: str) -> bool:
        """Keep ``status`` when it outranks the session's best; True when it does."""
        row = self.db.execute("SELECT rank FROM sessions WHERE hid = ?", (hid,)).fetchone()
        rank = _rank(status, ts)
        if row is not None and row[0] is not None and json.loads(row[0]) >= rank:
            return False
        facts = status.get("facts") if isinstance(status.get("facts"), dict) else {}
        assert isinstance(facts, dict)
        title = facts.get("title") or facts.get("first_prompt")
        values = (
            json.dumps(rank),
            status.get("tail") if isinstance(status.get("tail"), str) else None,
            str(status.get("scope", "unknown:")),
            facts.get("started") if isinstance(facts.get("started"), str) else None,
            " ".join(title.split())[:200] if isinstance(title, str) else None,
            json.dumps(counts(status.get("usage"))),
        )
        self.db.execute(
            "INSERT INTO sessions (hid, rank, tail, scope, started, title, usage)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (hid) DO UPDATE SET"
            " rank = excluded.rank, tail = excluded.tail, scope = excluded.scope,"
            " started = excluded.started, title = excluded.title, usage = excluded.usage",
            (hid, *values),
        )
        return True

    def _settle(
        self, hid: str, fetch: Fetch, cache: dict[str, tuple[str, tuple[str, ...], str]]
    ) -> None:
        """Make the session's indexed parts the chain from its best status's tail."""
        row = self.db.execute("SELECT tail, tool FROM sessions WHERE hid = ?", (hid,)).fetchone()
        if row is None or row[1] is None:
            return  # no header yet: settled when it comes
        tail, tool = row
        old = self.db.execute(
            "SELECT idx, id, first, n FROM parts WHERE hid = ? ORDER BY idx", (hid,)
        ).fetchall()
        at = {pid: idx for idx, pid, _f, _n in old}
        walked: list[tuple[str, str]] = []  # (id, body), newest first
        cur, seen = tail, set()
        while isinstance(cur, str) and cur != hid and cur not in at and cur not in seen:
            seen.add(cur)
            found = cache.get(cur) or fetch(cur)
            if found is None or found[0] != KIND_PART:
                break
            walked.append((cur, found[2]))
            cur = found[1][0] if found[1] else None
        keep = at[cur] + 1 if isinstance(cur, str) and cur in at else 0
        if keep == len(old) and not walked:
            return
        for _idx, pid, _first, _n in old[keep:]:
            self._drop(hid, pid, fetch, cache)
        self.db.execute("DELETE FROM parts WHERE hid = ? AND idx >= ?", (hid, keep))
        first = old[keep - 1][2] + old[keep - 1][3] if keep else 0
        for idx, (pid, body) in enumerate(reversed(walked), start=keep):
            items = _json(body).get("items")
            items = items if isinstance(items, list) else []
            self._add(hid, str(tool), pid, first, items)
            self.db.execute(
                "INSERT INTO parts VALUES (?, ?, ?, ?, ?)", (hid, idx, pid, first, len(items))
            )
            first += len(items)

    def _add(self, hid: str, tool: str, pid: str, first: int, items: list[Any]) -> None:
        for m in messages_of(items):
            cur = self.db.execute(
                "INSERT INTO msgs (hid, part, item, ts, role, name) VALUES (?, ?, ?, ?, ?, ?)",
                (hid, pid, first + m.position, m.ts, m.role, m.name),
            )
            self.db.execute(
                "INSERT INTO msgs_fts (rowid, text) VALUES (?, ?)", (cur.lastrowid, m.text)
            )
        rows = list(usage_of(tool, items))
        self.db.executemany(
            "INSERT INTO usage VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    hid,
                    pid,
                    first + u.position,
                    u.ts,
                    u.ts[:10] if u.ts else None,
                    u.model,
                    u.tokens.input,
                    u.tokens.cached,
                    u.tokens.cache_write,
                    u.tokens.output,
                    u.tokens.reasoning,
                )
                for u in rows
            ],
        )
        # the same rows summed per (day, model): what a report reads (a part's few rows
        # instead of its every usage item); day "" when the items have no time
        sums: dict[tuple[str, str], Tokens] = {}
        for u in rows:
            key = (u.ts[:10] if u.ts else "", u.model or "")
            sums[key] = sums.get(key, Tokens()) + u.tokens
        self.db.executemany(
            "INSERT INTO usage_sums VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (hid, pid, day, model, t.input, t.cached, t.cache_write, t.output, t.reasoning)
                for (day, model), t in sums.items()
            ],
        )

    def _drop(
        self,
        hid: str,
        pid: str,
        fetch: Fetch,
        cache: dict[str, tuple[str, tuple[str, ...], str]],
    ) -> None:
        """Remove a superseded part's rows (its messages derived again for the full-text
        table's delete, which needs the text it was given)."""
        rows = self.db.execute(
            "SELECT rowid FROM msgs WHERE hid = ? AND part = ? ORDER BY rowid", (hid, pid)
        ).fetchall()
        found = cache.get(pid) or fetch(pid)
        items = _json(found[2]).get("items") if found else None
        texts = [m.text for m in messages_of(items if isinstance(items, list) else [])]
        if len(texts) == len(rows):
            self.db.executemany(
                "INSERT INTO msgs_fts (msgs_fts, rowid, text) VALUES ('delete', ?, ?)",
                [(r[0], t) for r, t in zip(rows, texts, strict=True)],
            )
        else:  # cannot happen for an unchanged part: start over rather than keep stale terms
            raise _Rebuild(f"part {pid[:12]} no longer gives the messages it was indexed with")
        self.db.execute("DELETE FROM msgs WHERE hid = ? AND part = ?", (hid, pid))
        self.db.execute("DELETE FROM usage WHERE hid = ? AND part = ?", (hid, pid))
        self.db.execute("DELETE FROM usage_sums WHERE hid = ? AND part = ?", (hid, pid))


class _Rebuild(Exception):
    """The index cannot be patched: drop it and build it again."""


class SqlRows:
    """A line file's rows, as the index reads them (``line``: its connection, read only)."""

    def __init__(self, line: sqlite3.Connection) -> None:
        self.line = line

    def top(self) -> int:
        return int(self.line.execute("SELECT coalesce(max(seq), 0) FROM entries").fetchone()[0])

    def id_at(self, seq: int) -> str | None:
        row = self.line.execute("SELECT id FROM entries WHERE seq = ?", (seq,)).fetchone()
        return None if row is None else str(row[0])

    def rows(self, after: int, top: int, limit: int) -> tuple[list[Row], int | None]:
        found = self.line.execute(
            "SELECT seq, id, ts, kind, body, parents FROM entries WHERE seq > ?"
            " AND seq <= ? AND kind IN (?, ?, ?) ORDER BY seq LIMIT ?",
            (after, top, *_KINDS, limit),
        ).fetchall()
        if not found:
            return [], None
        return [(i, t, k, b, _parents(p)) for _s, i, t, k, b, p in found], int(found[-1][0])

    def fetch(self, eid: str) -> tuple[str, tuple[str, ...], str] | None:
        row = self.line.execute("SELECT kind, parents, body FROM entries WHERE id = ?", (eid,))
        found = row.fetchone()
        return None if found is None else (str(found[0]), _parents(found[1]), str(found[2]))
