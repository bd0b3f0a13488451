"""``sessions_search``: messages and tool calls of every synced session that match words,
ranked (BM25 over the redacted text; lifeline/sessions/finder.py), each with the offset at
which ``session_show`` opens it."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server import MCPServer
from pydantic import Field

from lifeline.sessions.catalogue import Catalogue
from lifeline.sessions.config import load_session_settings
from lifeline.sessions.finder import opened_index, parse_since, search
from lifeline.sessions.messages import ROLES
from lifeline.sessions.model import Tool
from lifeline_mesh.mcp.boundary import tool_errors
from lifeline_mesh.mcp.shapes import Shape
from lifeline_mesh.mcp.tools_read import READ_ONLY
from lifeline_mesh.mcp.workspace import Workspace

__all__ = ["MAX_HITS", "SessionHit", "SessionHits", "register_sessions_search"]

MAX_HITS = 100


class SessionHit(Shape):
    """A message or tool call: its session, where it is, and an excerpt."""

    session: str = Field(description="the session's id: give it to session_show")
    native_id: str
    tool: str
    title: str
    offset: int = Field(description="session_show(id=session, offset=offset, limit=1) opens it")
    ts: str | None
    role: str = Field(description="|".join(ROLES))
    name: str = Field(description="the tool's name for calls and results, the model for replies")
    score: float = Field(description="relative to the best hit (1.0)")
    excerpt: str


class SessionHits(Shape):
    hits: list[SessionHit]
    count: int


async def sessions_hits(
    ws: Workspace,
    query: str,
    *,
    tool: str | None,
    since: str | None,
    role: str | None,
    session: str | None,
    limit: int,
    line: str | None,
) -> SessionHits:
    settings = load_session_settings(ws.home)
    async with ws.store(line or settings.line) as store, opened_index(store) as index:
        hid = (await Catalogue(store).load()).resolve(session).header_id if session else None
        found = await search(
            store,
            index,
            query,
            tool=tool,
            since=parse_since(since),
            role=role,
            session=hid,
            limit=limit,
        )
    hits = [SessionHit.model_validate(h, from_attributes=True) for h in found]
    return SessionHits(hits=hits, count=len(hits))


def register_sessions_search(server: MCPServer[Any], ws: Workspace) -> None:
    @server.tool(annotations=READ_ONLY)
    async def sessions_search(
        query: Annotated[str, Field(description="words to look for")],
        tool: Annotated[str | None, Field(description="|".join(t.value for t in Tool))] = None,
        since: Annotated[
            str | None, Field(description="a date (2026-11-30), an ISO time or N days (7d)")
        ] = None,
        role: Annotated[str | None, Field(description="|".join(ROLES))] = None,
        session: Annotated[
            str | None, Field(description="only this session (id or prefix)")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_HITS, description="at most this many")] = 20,
        line: Annotated[
            str | None, Field(description="the sessions line; default: sessions (or as configured)")
        ] = None,
    ) -> SessionHits:
        """Search past agent sessions (Claude Code, Codex, Gemini, every synced machine):
        prompts, replies, reasoning, tool calls and results, errors — ranked, messages with
        every word first. Open a hit with session_show(id=session, offset=offset)."""
        with tool_errors():
            return await sessions_hits(
                ws,
                query,
                tool=tool,
                since=since,
                role=role,
                session=session,
                limit=limit,
                line=line,
            )
