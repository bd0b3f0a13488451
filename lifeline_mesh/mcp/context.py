"""The project context for agents: the ``lifeline://context`` resource.

Interim rendering until the truth layer (reducers and budgeted assembly) is available: the
latest entries of the default line, newest last, with a header that says so.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer

from lifeline_mesh.mcp.boundary import resource_errors
from lifeline_mesh.mcp.reads import history_view
from lifeline_mesh.mcp.workspace import Workspace

__all__ = ["register_context"]

LATEST = 50


async def context_markdown(ws: Workspace, line: str | None) -> str:
    view = await history_view(ws, line, None, LATEST, None)
    lines = [
        f"# Lifeline context — line `{view['line']}`",
        "",
        f"_The latest {view['count']} entries, oldest first"
        + (" (older ones omitted; use the `history` tool)._" if view["more"] else "._"),
        "",
    ]
    for entry in view["entries"]:
        lines.append(f"- **{entry['kind']}** `{entry['id'][:12]}` {entry['summary']}")
    return "\n".join(lines) + "\n"


def register_context(server: MCPServer[Any], ws: Workspace) -> None:
    @server.resource(
        "lifeline://context",
        name="context",
        description="the project context: what it is, decisions in force, where work stopped",
        mime_type="text/markdown",
    )
    async def context_resource() -> str:
        with resource_errors():
            return await context_markdown(ws, None)
