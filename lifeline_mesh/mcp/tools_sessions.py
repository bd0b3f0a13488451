"""Session tools: ``sessions_list`` and ``session_show`` (paged) over the sessions line.

Agent transcripts ingested by ``lifeline sessions ingest`` (or the node's watcher) and
synced from peers; already redacted. Every item carries its provenance (tool, source file,
native ids, line, sha256) so an agent can cite what it read.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server import MCPServer
from pydantic import Field

from lifeline.sessions.catalogue import Catalogue, filter_sessions
from lifeline.sessions.config import load_session_settings
from lifeline.sessions.model import SessionStatus, Tool
from lifeline_mesh.mcp.boundary import tool_errors
from lifeline_mesh.mcp.shapes_sessions import SessionList, SessionPage, SessionSummary
from lifeline_mesh.mcp.tools_read import READ_ONLY
from lifeline_mesh.mcp.workspace import Workspace

__all__ = ["MAX_ITEMS", "register_sessions", "session_page", "sessions_view"]

MAX_ITEMS = 500
SessionLine = Annotated[
    str | None, Field(description="the sessions line; default: sessions (or as configured)")
]


async def sessions_view(
    ws: Workspace, line: str | None, scope: str | None, status: str | None, tool: str | None
) -> SessionList:
    settings = load_session_settings(ws.home)
    async with ws.store(line or settings.line) as store:
        cat = await Catalogue(store, live_window=settings.live_window).load()
        found = filter_sessions(cat.summaries(), scope=scope, status=status, tool=tool)
    return SessionList(sessions=[SessionSummary.of(s) for s in found], count=len(found))


async def session_page(
    ws: Workspace, ref: str, line: str | None, offset: int, limit: int
) -> SessionPage:
    settings = load_session_settings(ws.home)
    async with ws.store(line or settings.line) as store:
        cat = await Catalogue(store, live_window=settings.live_window).load()
        session = await cat.session(ref)
    return SessionPage.page(session, offset, limit)


def register_sessions(server: MCPServer[Any], ws: Workspace) -> None:
    @server.tool(annotations=READ_ONLY)
    async def sessions_list(
        scope: Annotated[
            str | None,
            Field(description="only this scope or inside it, e.g. 'git:github.com/acme/api:'"),
        ] = None,
        status: Annotated[
            str | None, Field(description="|".join(s.value for s in SessionStatus))
        ] = None,
        tool: Annotated[str | None, Field(description="|".join(t.value for t in Tool))] = None,
        line: SessionLine = None,
    ) -> SessionList:
        """Agent sessions (Claude Code, Codex, Gemini) of every synced machine: tool, title,
        scope, status with its one-line reason (crashed, interrupted, live…), turn count."""
        with tool_errors():
            return await sessions_view(ws, line, scope, status, tool)

    @server.tool(annotations=READ_ONLY)
    async def session_show(
        id: Annotated[str, Field(description="session id (or prefix), or the tool's own id")],
        offset: Annotated[int, Field(ge=0, description="skip this many items")] = 0,
        limit: Annotated[int, Field(ge=1, le=MAX_ITEMS, description="at most this many")] = 100,
        line: SessionLine = None,
    ) -> SessionPage:
        """One session: its facts and status, then a page of its items in order (prompts,
        replies, tool calls and results, compactions, errors, todos), each with provenance;
        `more` says whether another page follows."""
        with tool_errors():
            return await session_page(ws, id, line, offset, limit)
