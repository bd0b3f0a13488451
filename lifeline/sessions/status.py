"""How a session ended, judged from its items (the research doc's per-tool predicates).

:class:`Tracker` watches the items of one session as they are produced and keeps only
what the verdict needs (open tool calls, the last significant event, an open turn), so
it can be snapshotted between ingests. :meth:`Tracker.verdict` applies the rules in
order; ``live`` is decided by the reader from the last activity time (:func:`judge`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from lifeline.sessions.model import (
    ErrorItem,
    Interrupt,
    Item,
    Prompt,
    Reply,
    SessionStatus,
    Status,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
)

__all__ = ["LIVE_WINDOW", "Tracker", "judge"]

LIVE_WINDOW = timedelta(minutes=10)
_OPEN_CALLS_KEPT = 256  # a session that never answers thousands of calls stays small


@dataclass
class Tracker:
    prompts: int = 0
    last: str = ""  # the last significant item kind
    last_text: str = ""
    answered: bool = True  # the last prompt got a reply
    open_calls: dict[str, str] = field(default_factory=dict)  # call id -> tool name
    open_turn: str | None = None
    failed_turn: str | None = None

    def observe(self, item: Item) -> None:
        if item.agent is not None:  # an inline sidechain does not decide the session
            return
        if isinstance(item, Prompt):
            self.prompts += 1
            self._mark("prompt", item.text)
            self.answered = False
        elif isinstance(item, Reply):
            self._mark("reply", "")
            self.answered = True
        elif isinstance(item, ToolCall):
            if len(self.open_calls) < _OPEN_CALLS_KEPT:
                self.open_calls[item.call_id] = item.name
            self._mark("tool_call", item.name)
        elif isinstance(item, ToolResult):
            self.open_calls.pop(item.call_id, None)
            self._mark("tool_result", "")
        elif isinstance(item, ErrorItem):
            self._mark(
                "error", f"{item.error}{f' {item.status}' if item.status else ''}: {item.text}"
            )
            if item.error == "turn_failed":
                self.failed_turn = item.text
        elif isinstance(item, Interrupt):
            self._mark("interrupt", item.text)
        elif isinstance(item, TurnStart):
            self.open_turn = item.turn_id or "?"
            self.failed_turn = None
        elif isinstance(item, TurnEnd):  # closes the turn; says nothing of how it went
            self.open_turn = None

    def _mark(self, kind: str, text: str) -> None:
        self.last = kind
        self.last_text = " ".join(text.split())[:120]

    def verdict(self, partial_bytes: int = 0) -> Status:
        """The status from the items seen (never ``live``: see :func:`judge`)."""
        crashed, interrupted = SessionStatus.CRASHED, SessionStatus.INTERRUPTED
        if partial_bytes:
            return Status(
                status=crashed,
                reason=f"the last line is cut off ({partial_bytes} bytes without a newline)",
            )
        if self.last == "error":
            return Status(status=crashed, reason=f"stopped on an error ({self.last_text})")
        if self.last == "interrupt":
            return Status(status=interrupted, reason="interrupted by the user")
        if self.open_turn is not None:
            return Status(
                status=crashed, reason=f"turn {self.open_turn} started and never completed"
            )
        if self.open_calls:
            call_id, name = next(reversed(self.open_calls.items()))
            return Status(status=crashed, reason=f"tool call {name} ({call_id}) never answered")
        if self.failed_turn is not None:
            return Status(status=crashed, reason=f"the last turn failed ({self.failed_turn})")
        if self.prompts == 0:
            return Status(status=SessionStatus.COMPLETE, reason="no prompt: opened, never used")
        if not self.answered:
            return Status(status=crashed, reason="the last prompt got no reply")
        return Status(status=SessionStatus.COMPLETE, reason="the last prompt was answered")

    def snapshot(self) -> dict[str, Any]:
        return {
            "prompts": self.prompts,
            "last": self.last,
            "last_text": self.last_text,
            "answered": self.answered,
            "open_calls": list(self.open_calls.items()),
            "open_turn": self.open_turn,
            "failed_turn": self.failed_turn,
        }

    @classmethod
    def restore(cls, data: dict[str, Any]) -> Tracker:
        return cls(
            prompts=int(data.get("prompts", 0)),
            last=str(data.get("last", "")),
            last_text=str(data.get("last_text", "")),
            answered=bool(data.get("answered", True)),
            open_calls=dict(data.get("open_calls", [])),
            open_turn=data.get("open_turn"),
            failed_turn=data.get("failed_turn"),
        )


def judge(stored: Status, last_activity: str | None, now: datetime, window: timedelta) -> Status:
    """``live`` when the session was written to within ``window`` of ``now`` (an agent may
    still be at it, even after a clean answer); otherwise the stored verdict."""
    if not last_activity:
        return stored
    try:
        moment = datetime.fromisoformat(last_activity.replace("Z", "+00:00"))
    except ValueError:
        return stored
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if now - moment <= window:
        return Status(
            status=SessionStatus.LIVE,
            reason=f"written to at {last_activity}; so far: {stored.reason}",
        )
    return stored
