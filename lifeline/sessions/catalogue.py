"""Reading sessions back from a line: the list, and one session with its items.

A session is its header entry; its current state is the *best* of its status entries
(the one that saw the most of the file: bytes, then lines, then items, then the latest
time), and its items are the parts reached by walking parents
from that status's tail back to the header. Entries synced from peers read the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import TypeAdapter

from lifeline.errors import NotFound
from lifeline.sessions.caps import KIND_HEADER, KIND_PART, KIND_STATUS
from lifeline.sessions.model import (
    ITEM_ADAPTER,
    Item,
    Opaque,
    Provenance,
    Session,
    Status,
    Tool,
)
from lifeline.sessions.scope import scope_matches
from lifeline.sessions.status import LIVE_WINDOW, judge
from lifeline.sessions.stored_values import count, counts, session_status, tool_of
from lifeline.sessions.stored_values import facts as stored_facts
from lifeline.store.backend import FileOrEntries, on_backend
from lifeline.store.port import Store
from lifeline.store.tiers import SqlLine

__all__ = ["Catalogue", "StoredSession", "filter_sessions"]


@dataclass(frozen=True, slots=True)
class StoredSession:
    header_id: str
    header: dict[str, Any]
    status: dict[str, Any] | None


async def _rows(store: Store, kind: str) -> list[tuple[str, str, str]]:
    """(id, ts, body) of every entry of ``kind``: one query on a line file, a scan elsewhere."""

    async def queried(sql: SqlLine) -> list[tuple[str, str, str]]:
        rows: list[tuple[str, str, str]] = await sql.run_read(
            lambda conn: conn.execute(
                "SELECT id, ts, body FROM entries WHERE kind = ?", (kind,)
            ).fetchall()
        )
        return rows

    async def scanned(other: Store) -> list[tuple[str, str, str]]:
        return [(e.id, e.ts, e.body) async for e in other.stream() if e.kind == kind]

    return await on_backend(store, FileOrEntries(file=queried, entries=scanned))


def _json(body: str) -> dict[str, Any] | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _version(header: dict[str, Any]) -> int:
    """The ingest format that wrote a header: a session re-ingested by a newer format is
    shown by its newest header only; the older entries stay valid in the line (0053)."""
    value = header.get("v")
    return value if isinstance(value, int) else 0


def _source(stored: StoredSession) -> str:
    """The file's name in its tool's layout: an observation kept in the status (format 2),
    in the header before."""
    return str((stored.status or {}).get("source") or stored.header.get("source", ""))


def _tool(stored: StoredSession) -> Tool:
    tool = tool_of(stored.header)
    assert tool is not None  # Catalogue.load keeps only headers of known tools
    return tool


def _rank(status: dict[str, Any], ts: str) -> tuple[int, int, int, str]:
    def num(key: str) -> int:
        value = status.get(key)
        return value if isinstance(value, int) else 0

    return (num("bytes"), num("lines"), num("items"), ts)


class Catalogue:
    """The sessions of one line (``store``), as of when :meth:`load` ran."""

    def __init__(
        self, store: Store, *, now: datetime | None = None, live_window: timedelta = LIVE_WINDOW
    ) -> None:
        self.store = store
        self.now = now or datetime.now(UTC)
        self.live_window = live_window
        self.sessions: dict[str, StoredSession] = {}
        self.left_out = 0  # headers not read: not JSON, or a tool this version does not know

    async def load(self) -> Catalogue:
        headers: dict[str, dict[str, Any]] = {}
        self.left_out = 0
        for i, _, b in await _rows(self.store, KIND_HEADER):
            header = _json(b)
            if header is None or tool_of(header) is None:
                self.left_out += 1  # not a header this version reads (a newer tool, a typo)
                continue
            headers[i] = header
        best: dict[str, tuple[tuple[int, int, int, str], dict[str, Any]]] = {}
        for _, ts, body in await _rows(self.store, KIND_STATUS):
            status = _json(body)
            if status is None or not isinstance(status.get("session"), str):
                continue
            rank = _rank(status, ts)
            current = best.get(status["session"])
            if current is None or rank > current[0]:
                best[status["session"]] = (rank, status)
        newest: dict[tuple[str, str], int] = {}
        for h in headers.values():
            key = (str(h.get("tool")), str(h.get("session")))
            newest[key] = max(newest.get(key, 0), _version(h))
        self.sessions = {
            i: StoredSession(i, h, best[i][1] if i in best else None)
            for i, h in headers.items()
            if _version(h) == newest[(str(h.get("tool")), str(h.get("session")))]
        }
        return self

    def summaries(self) -> list[Session]:
        """Every session without its items, oldest first."""
        found = [self._summary(s) for s in self.sessions.values()]
        return sorted(found, key=lambda s: (s.facts.started or "", s.id))

    def resolve(self, ref: str) -> StoredSession:
        """A session by header id (or prefix) or by the tool's native id (or prefix)."""
        ref = ref.strip()
        exact = [
            s
            for s in self.sessions.values()
            if s.header_id == ref or s.header.get("session") == ref
        ]
        if len(exact) == 1:
            return exact[0]
        if len(ref) < 4:
            raise NotFound(f"session {ref!r} is too short to look up; give 4 characters or more")
        found = exact or [
            s
            for s in self.sessions.values()
            if s.header_id.startswith(ref) or str(s.header.get("session", "")).startswith(ref)
        ]
        if not found:
            raise NotFound(f"no session {ref!r} in this line; see `lifeline sessions list`")
        if len(found) > 1:
            names = ", ".join(sorted(s.header_id[:12] for s in found)[:5])
            raise NotFound(f"session {ref!r} is ambiguous ({names}…); give more characters")
        return found[0]

    def by_native(self, tool: str, native: str) -> StoredSession | None:
        for stored in self.sessions.values():
            if stored.header.get("tool") == tool and stored.header.get("session") == native:
                return stored
        return None

    def _summary(self, stored: StoredSession, items: tuple[Item, ...] = ()) -> Session:
        """What ``stored`` says, each value read as what it must be (stored_values: a
        member's entry, or a newer version's, must not stop the list)."""
        header, status = stored.header, stored.status or {}
        facts = stored_facts(status.get("facts"))
        verdict = Status(
            status=session_status(status.get("status", "crashed")),
            reason=str(status.get("reason", "no status recorded yet")),
        )
        return Session(
            id=stored.header_id,
            tool=_tool(stored),
            native_id=str(header.get("session", "")),
            source=_source(stored),
            facts=facts,
            scope=str(status.get("scope", "unknown:")),
            status=judge(verdict, facts.last_activity, self.now, self.live_window),
            turns=count(status.get("turns", 0)),
            items=items,
            item_count=count(status.get("items", 0)),
            skipped=counts(status.get("skipped")),
            opaque=counts(status.get("opaque")),
            redactions=counts(status.get("redactions")),
            truncated=count(status.get("truncated", 0)),
            usage=counts(status.get("usage")),
        )

    async def session(self, ref: str, kinds: frozenset[str] | None = None) -> Session:
        """One session with its items, in file order, provenance filled in: all of them, or
        those of ``kinds`` only (a reader that needs a few kinds skips validating the rest:
        a bundle reads no usage, thinking or turn markers)."""
        stored = self.resolve(ref)
        parts = await self._parts(stored)
        tool = _tool(stored)
        source = _source(stored)
        rows = [d for p in parts for d in p["items"]]
        if kinds is not None:
            rows = [d for d in rows if not isinstance(d, dict) or d.get("kind") in kinds]
        return self._summary(stored, _items(rows, tool, source))

    async def _parts(self, stored: StoredSession) -> list[dict[str, Any]]:
        """The parts from the header to the status's tail, walking parents back."""
        tail = (stored.status or {}).get("tail")
        chain: list[dict[str, Any]] = []
        seen: set[str] = set()
        while isinstance(tail, str) and tail != stored.header_id and tail not in seen:
            seen.add(tail)
            try:
                entry = await self.store.get(tail)
            except NotFound:
                break  # not synced yet: show what is here
            if entry.kind != KIND_PART:
                break
            body = _json(entry.body)
            if body is not None and isinstance(body.get("items"), list):
                chain.append(body)
            tail = entry.parents[0] if entry.parents else None
        chain.reverse()
        return chain


_ITEMS: TypeAdapter[list[Item]] = TypeAdapter(list[Item])


def _items(stored: list[Any], tool: Tool, source: str) -> tuple[Item, ...]:
    """Every stored item validated in one call (pydantic's loop, not ours: bench/history/
    figures-behind-the-code.md); when one does not validate (a kind from a newer version),
    item by item, so that one shows as opaque and the rest as they are."""
    for data in stored:  # parsed from the part just now: ours to annotate in place
        if not isinstance(data, dict):
            return tuple(_item(d if isinstance(d, dict) else {}, tool, source) for d in stored)
        line = data.get("ln")
        line = line if isinstance(line, int) else 0
        data["prov"] = {  # ln, sha and ids stay: the item models ignore unknown keys
            "tool": tool,
            "source": source,
            "native_ids": data.get("ids") or (),
            "lines": (line, line),
            "sha256": str(data.get("sha", "")),
        }
    try:
        return tuple(_ITEMS.validate_python(stored))
    except ValueError:
        for data in stored:
            data.pop("prov", None)
        return tuple(_item(d, tool, source) for d in stored)


def _item(data: dict[str, Any], tool: Tool, source: str) -> Item:
    line = data.get("ln") if isinstance(data.get("ln"), int) else 0
    assert isinstance(line, int)
    prov = Provenance(
        tool=tool,
        source=source,
        native_ids=tuple(data.get("ids") or ()),
        lines=(line, line),
        sha256=str(data.get("sha", "")),
    )
    fields = {k: v for k, v in data.items() if k not in ("ln", "sha", "ids")}
    try:
        item: Item = ITEM_ADAPTER.validate_python({**fields, "prov": prov})
    except ValueError:  # a kind from a newer version: shown as opaque, never dropped
        item = Opaque(record_type=str(fields.get("kind", "?")), raw=fields, prov=prov)
    return item


def filter_sessions(
    sessions: Iterable[Session],
    *,
    scope: str | None = None,
    status: str | None = None,
    tool: str | None = None,
) -> list[Session]:
    return [
        s
        for s in sessions
        if (scope is None or scope_matches(s.scope, scope))
        and (status is None or s.status.status.value == status)
        and (tool is None or s.tool.value == tool)
    ]
