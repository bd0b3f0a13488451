"""Read tools on a line: entry, history; and the ``lifeline://entry/{id}`` resource."""

from __future__ import annotations

import json
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from lifeline_mesh.mcp.boundary import resource_errors, tool_errors
from lifeline_mesh.mcp.reads import MAX_HISTORY, entry_view, history_view
from lifeline_mesh.mcp.shapes import EntryView, History
from lifeline_mesh.mcp.workspace import Workspace

__all__ = ["READ_ONLY", "LineArg", "register_reads"]

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)

LineArg = Annotated[
    str | None,
    Field(description="the line (an independent ledger) to use; default: the server's line"),
]


def register_reads(server: MCPServer[Any], ws: Workspace) -> None:
    @server.tool(annotations=READ_ONLY)
    async def entry(
        id: Annotated[str, Field(description="an entry id, or a unique prefix of one")],
        line: LineArg = None,
    ) -> EntryView:
        """One entry in full: fields, parents, children, and the node signatures on it."""
        with tool_errors():
            return await entry_view(ws, id, line)

    @server.tool(annotations=READ_ONLY)
    async def history(
        since: Annotated[
            str | None,
            Field(
                description="an entry id (prefix): entries after it in the ledger's order; "
                "or an ISO-8601 time: entries with a later ts. Empty: the latest entries."
            ),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_HISTORY, description="at most this many")] = 50,
        kind: Annotated[str | None, Field(description="only entries of this kind")] = None,
        line: LineArg = None,
    ) -> History:
        """Entries since a point, oldest first; `more` says whether the limit cut the list."""
        with tool_errors():
            return await history_view(ws, line, since, limit, kind)

    @server.resource(
        "lifeline://entry/{id}",
        name="entry",
        description="one entry of the default line, as JSON",
        mime_type="application/json",
    )
    async def entry_resource(id: str) -> str:
        with resource_errors():
            view = await entry_view(ws, id, None)
        return json.dumps(
            view.model_dump(mode="json"), ensure_ascii=False, indent=2, sort_keys=True
        )
