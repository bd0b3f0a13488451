"""What the Sessions pages read from a sessions line: the catalogue (cached by the line's
state), a filtered and paged list, one transcript as rows for the template (tool calls with
their results, subagents nested), the unfinished sessions, and a session's bundle.

The catalogue reads the line's small ``session`` and ``session-status`` entries once per
change of the line; a transcript reads only its own session's parts, a page of items at a
time is rendered. Unfinished sessions and bundles read whole sessions, so they are kept
until the line changes; the unfinished ones are found in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lifeline.errors import LifelineError
from lifeline.sessions.bundles.resume import BundleRequest, NotReady, build_bundle
from lifeline.sessions.bundles.unfinished import Unfinished, unfinished
from lifeline.sessions.catalogue import Catalogue, filter_sessions
from lifeline.sessions.model import (
    Compaction,
    Context,
    ErrorItem,
    Image,
    Interrupt,
    Item,
    Opaque,
    Prompt,
    Reply,
    Session,
    SubagentLink,
    Thinking,
    Title,
    Todos,
    ToolCall,
    ToolResult,
)
from lifeline.store.sqlite import SqliteStore

__all__ = ["ITEMS_PAGE", "LIST_PAGE", "SessionsView", "transcript_rows"]

log = logging.getLogger(__name__)

LIST_PAGE = 50
ITEMS_PAGE = 300  # top-level transcript items a page
INPUT_CHARS = 4_000  # a tool call's input, shown folded
MAX_DEPTH = 3
KEPT_SESSIONS = 16  # sessions kept with their items
SUMMARY_TTL = 30.0  # seconds a list keeps its live/not-live judgement


def _key(conn: Any) -> tuple[int, int]:
    count, top = conn.execute("SELECT count(*), coalesce(max(seq), 0) FROM entries").fetchone()
    return int(count), int(top)


def _first_line(text: str, width: int = 100) -> str:
    """The first non-blank line of ``text``, cut to ``width`` (never splits all of a huge
    text: a tool's result can be megabytes)."""
    text = text.lstrip()
    end = text.find("\n", 0, 4 * width)
    return text[: 4 * width if end < 0 else end].strip()[:width]


def _clip(value: Any) -> Any:
    """``value`` with strings and lists cut to INPUT_CHARS: its indented JSON then starts
    with the same INPUT_CHARS characters as the whole value's, at a bounded cost (an input
    can hold a whole file)."""
    if isinstance(value, str):
        return value[: INPUT_CHARS + 1]
    if isinstance(value, dict):
        return {k: _clip(v) for k, v in list(value.items())[:INPUT_CHARS]}
    if isinstance(value, list):
        return [_clip(v) for v in value[:INPUT_CHARS]]
    return value


def _call_arg(call: ToolCall) -> str:
    if isinstance(call.input, dict):
        for name in ("file_path", "command", "cmd", "path", "pattern", "description", "query"):
            value = call.input.get(name)
            if isinstance(value, str):
                return _first_line(value, 70)
            if isinstance(value, list):
                return _first_line(" ".join(str(v) for v in value), 70)
    return _first_line(call.input, 70) if isinstance(call.input, str) else ""


def _call_row(call: ToolCall, result: ToolResult | None) -> dict[str, Any]:
    shown = call.input if isinstance(call.input, str) else json.dumps(_clip(call.input), indent=2)
    return {
        "type": "call",
        "name": call.name,
        "arg": _call_arg(call),
        "input": shown[:INPUT_CHARS] + ("…" if len(shown) > INPUT_CHARS else ""),
        "answered": result is not None,
        "error": bool(result and result.is_error),
        "output": result.output if result else "",
        "outcome": _first_line(result.output, 80) if result else "",
    }


def _row(item: Item, results: dict[str, ToolResult]) -> dict[str, Any] | None:
    base: dict[str, Any] = {"ts": item.ts or "", "agent": item.agent}
    if isinstance(item, Prompt):
        return base | {
            "type": "prompt",
            "text": item.text,
            "steering": item.steering,
            "images": item.images,
        }
    if isinstance(item, Reply):
        return base | {"type": "reply", "text": item.text}
    if isinstance(item, ToolCall):
        return base | _call_row(item, results.get(item.call_id))
    if isinstance(item, Context | Thinking):
        label = item.subtype if isinstance(item, Context) else "thinking"
        return base | {
            "type": "folded",
            "label": label,
            "text": item.text,
            "first": _first_line(item.text, 90),
        }
    if isinstance(item, Compaction):
        return base | {
            "type": "compaction",
            "trigger": item.trigger or "?",
            "pre": item.pre_tokens,
            "post": item.post_tokens,
        }
    if isinstance(item, ErrorItem):
        return base | {
            "type": "error",
            "text": f"{item.error} {item.status or ''}".strip(),
            "detail": item.text,
        }
    if isinstance(item, Interrupt):
        return base | {"type": "interrupt", "text": item.text}
    if isinstance(item, Todos):
        return base | {"type": "todos", "items": [(t.status, t.content) for t in item.items]}
    if isinstance(item, Title):
        return base | {"type": "title", "text": item.text}
    if isinstance(item, Image):
        return base | {"type": "image", "text": f"{item.media_type or 'image'}, {item.bytes} bytes"}
    if isinstance(item, Opaque):
        return base | {"type": "opaque", "text": item.record_type}
    if isinstance(item, SubagentLink):
        return base | {
            "type": "subagent",
            "agent_id": item.agent_id,
            "description": item.description or "",
            "session": None,
        }
    return None


def transcript_rows(
    items: tuple[Item, ...] | list[Item], results: dict[str, ToolResult]
) -> list[dict[str, Any]]:
    """The template's rows for ``items`` (results are shown with their calls)."""
    return [r for item in items if (r := _row(item, results)) is not None]


def _results(session: Session) -> dict[str, ToolResult]:
    return {i.call_id: i for i in session.items if isinstance(i, ToolResult)}


@dataclass
class _Held:
    key: tuple[int, int]
    catalogue: Catalogue
    summaries: list[Session] = field(default_factory=list)
    judged_at: float = 0.0
    unfinished: list[Unfinished] | None = None
    finding: asyncio.Task[None] | None = None
    loaded: OrderedDict[str, tuple[float, Session]] = field(default_factory=OrderedDict)
    bundles: dict[str, tuple[bool, str, str]] = field(default_factory=dict)
    children: dict[str, dict[str, str]] = field(default_factory=dict)  # parent → agent → id


class SessionsView:
    """The Sessions pages' reads of one line (``store`` stays open: the line's reader's)."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self._held: _Held | None = None

    async def _current(self) -> _Held:
        key = await self.store.run_read(_key)
        if self._held is None or self._held.key != key:
            catalogue = await Catalogue(self.store).load()
            held = _Held(key, catalogue)
            for stored in catalogue.sessions.values():
                facts = (stored.status or {}).get("facts") or {}
                agent, parent = facts.get("agent_id"), facts.get("parent_session")
                if agent and parent:
                    held.children.setdefault(str(parent), {})[str(agent)] = stored.header_id
            self._held = held
        return self._held

    async def summaries(self) -> list[Session]:
        """Every session, newest activity first (live judged within SUMMARY_TTL)."""
        held = await self._current()
        if time.monotonic() - held.judged_at > SUMMARY_TTL:
            held.catalogue.now = datetime.now(UTC)
            found = held.catalogue.summaries()
            found.sort(
                key=lambda s: (s.facts.last_activity or s.facts.started or "", s.id), reverse=True
            )
            held.summaries, held.judged_at = found, time.monotonic()
        return held.summaries

    async def listing(
        self, scope: str, status: str, tool: str, page: int
    ) -> tuple[list[Session], int]:
        """One page of the filtered list and the number of matches."""
        found = filter_sessions(
            await self.summaries(), scope=scope or None, status=status or None, tool=tool or None
        )
        start = max(0, page) * LIST_PAGE
        return found[start : start + LIST_PAGE], len(found)

    async def session(self, ref: str) -> Session:
        held = await self._current()
        return await self._loaded(held, held.catalogue.resolve(ref).header_id)

    async def _loaded(self, held: _Held, session_id: str) -> Session:
        """A session with its items; the last few read are kept while the line is unchanged
        (its ``live`` judgement is as of when it was read: at most SUMMARY_TTL old)."""
        found = held.loaded.get(session_id)
        if found is None or time.monotonic() - found[0] > SUMMARY_TTL:
            held.catalogue.now = datetime.now(UTC)
            found = (time.monotonic(), await held.catalogue.session(session_id))
            held.loaded[session_id] = found
            while len(held.loaded) > KEPT_SESSIONS:
                held.loaded.popitem(last=False)
        held.loaded.move_to_end(session_id)
        return found[1]

    async def transcript(self, session: Session, start: int) -> list[dict[str, Any]]:
        """Rows of items ``start`` .. ``start + ITEMS_PAGE``, subagents nested."""
        return await self._rows(session, session.items[start : start + ITEMS_PAGE], 0)

    async def _rows(
        self, session: Session, items: tuple[Item, ...], depth: int
    ) -> list[dict[str, Any]]:
        held = await self._current()
        agents = held.children.get(session.native_id, {})
        rows: list[dict[str, Any]] = []
        shown: set[str] = set()
        for row in transcript_rows(items, _results(session)):
            if row["type"] == "subagent":
                if not row["agent_id"] or row["agent_id"] in shown:
                    continue  # the link repeats on each of the call's records: nest it once
                shown.add(row["agent_id"])
                child_id = agents.get(row["agent_id"])
                if child_id is not None and depth < MAX_DEPTH:
                    child = await self._loaded(held, child_id)
                    row["session"] = child
                    row["rows"] = await self._rows(child, child.items[:ITEMS_PAGE], depth + 1)
                    row["more"] = max(0, len(child.items) - ITEMS_PAGE)
            rows.append(row)
        return rows

    async def unfinished(self, *, wait: bool = False) -> list[Unfinished] | None:
        """The unfinished sessions, or None while they are being found in the background
        (it reads every candidate session whole: seconds on a large line). ``wait``: until
        they are found (the static copy)."""
        held = await self._current()
        if held.unfinished is None:
            if held.finding is None:
                held.finding = asyncio.get_running_loop().create_task(self._find(held))
            if wait:
                await held.finding
        return held.unfinished

    async def _find(self, held: _Held) -> None:
        try:
            held.unfinished = await unfinished(held.catalogue)
        except LifelineError as exc:
            log.warning("viewer: unfinished sessions not found: %s", exc)

    async def close(self) -> None:
        if self._held is not None and self._held.finding is not None:
            self._held.finding.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._held.finding

    async def bundle(self, session_id: str) -> tuple[bool, str, str]:
        """(ready, the bundle's markdown or its Acceptance slice, why not ready)."""
        held = await self._current()
        found = held.bundles.get(session_id)
        if found is None:
            try:
                _bundle, text = await build_bundle(held.catalogue, BundleRequest(ref=session_id))
                found = (True, text, "")
            except NotReady as exc:
                found = (False, exc.text, str(exc))
            held.bundles[session_id] = found
        return found
