"""The MCP contract of the session tools (see :mod:`lifeline_mesh.mcp.shapes`).

A session's facts, status and items are the session model's own
(:mod:`lifeline.sessions.model`); these models only say which of them a tool returns. A
page of ``session_show`` leaves out every unset (``null``) fact and item field, as it did
before it had a schema.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SerializationInfo, field_serializer

from lifeline.sessions.model import ITEM_ADAPTER, Item, Session, SessionFacts, Status, Tool
from lifeline_mesh.mcp.shapes import Shape

__all__ = [
    "BundleResult",
    "SessionList",
    "SessionPage",
    "SessionSummary",
    "UnfinishedList",
    "UnfinishedSession",
]


def _mode(info: SerializationInfo) -> Literal["json", "python"]:
    return "json" if info.mode_is_json() else "python"


class SessionSummary(Shape):
    """An agent session without its items: tool, facts, scope, status, counts."""

    id: str = Field(description="the session's header entry id")
    tool: Tool
    native_id: str = Field(description="the tool's own session id")
    source: str
    facts: SessionFacts
    scope: str
    status: Status
    turns: int = Field(description="real user prompts")
    item_count: int
    skipped: dict[str, int]
    opaque: dict[str, int]
    redactions: dict[str, int]
    truncated: int

    @classmethod
    def of(cls, session: Session) -> SessionSummary:
        return cls.model_validate(session, from_attributes=True)


class SessionList(Shape):
    sessions: list[SessionSummary]
    count: int


class SessionPage(SessionSummary):
    """One session and a page of its items, each with its provenance."""

    items: list[Item]
    offset: int
    limit: int
    total: int
    more: bool = Field(description="another page follows")

    @classmethod
    def page(cls, session: Session, offset: int, limit: int) -> SessionPage:
        items = session.items[offset : offset + limit]
        fields = SessionSummary.of(session).__dict__
        return cls(
            **fields,
            items=list(items),
            offset=offset,
            limit=limit,
            total=len(session.items),
            more=offset + len(items) < len(session.items),
        )

    @field_serializer("facts")
    def _facts(self, facts: SessionFacts, info: SerializationInfo) -> dict[str, Any]:
        return facts.model_dump(mode=_mode(info), exclude_none=True)

    @field_serializer("items")
    def _items(self, items: list[Item], info: SerializationInfo) -> list[Any]:
        return [ITEM_ADAPTER.dump_python(i, mode=_mode(info), exclude_none=True) for i in items]


class UnfinishedSession(Shape):
    """A session that stopped with work outstanding."""

    id: str
    tool: str
    native_id: str
    state: str = Field(description="crashed, interrupted or abandoned")
    reason: str
    scope: str
    key: str
    title: str
    started: str | None
    last_activity: str | None
    turns: int
    outstanding: dict[str, list[str]] = Field(
        description="outstanding, unanswered_calls, queued_input, errors: one line each"
    )
    unconfirmed_edits: list[str] = Field(
        description="edits never answered, or with no passing test, build or commit after them"
    )
    last_failure: str | None = Field(
        description="the last failed call of the last turn and the end of its output, else "
        "the last error after the last reply"
    )


class UnfinishedList(Shape):
    sessions: list[UnfinishedSession]
    count: int


class BundleResult(Shape):
    """A continuation bundle, or why there is none (``ready: false``)."""

    optional = frozenset({"why", "acceptance", "bundle"})

    ready: bool
    why: str | None = Field(default=None, description="why no bundle is ready")
    acceptance: str | None = Field(default=None, description="the Acceptance slice, when not ready")
    bundle: dict[str, Any] | str | None = Field(
        default=None,
        description="markdown, or with format=json the bundle object (docs/sessions.md)",
    )
