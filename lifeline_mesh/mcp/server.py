"""The MCP server of a node: tools and resources over the node's merged store, on stdio.

Built with the official SDK's ``MCPServer``. stdout carries the protocol, so nothing else
may write there; logs go to stderr.
"""

from __future__ import annotations

from typing import Any, cast

import anyio
from mcp.server import MCPServer
from mcp.server.stdio import stdio_server

from lifeline_mesh import __version__
from lifeline_mesh.mcp.policy import load_policy
from lifeline_mesh.mcp.screen import screened
from lifeline_mesh.mcp.stdin_lines import stdin_lines
from lifeline_mesh.mcp.tools_bundles import register_bundles
from lifeline_mesh.mcp.tools_mesh import register_mesh
from lifeline_mesh.mcp.tools_read import register_reads
from lifeline_mesh.mcp.tools_sessions import register_sessions
from lifeline_mesh.mcp.tools_sessions_search import register_sessions_search
from lifeline_mesh.mcp.tools_truth import register_truth
from lifeline_mesh.mcp.tools_write import register_writes
from lifeline_mesh.mcp.workspace import Workspace
from lifeline_mesh.mcp.writes import WriteGate

__all__ = ["INSTRUCTIONS", "build_server", "serve_stdio"]

INSTRUCTIONS = """\
This server is the project's reasoning ledger (lifeline-mesh), shared across the team's \
machines. Call `context` (or read `lifeline://context`) first: what the project is, the \
decisions in force, open items and where each thread stopped (`resume` has the details). \
Search with `recall`; hand a sub-agent the `brief` of its thread. Record decisions, fixes \
and open questions with `append`, supersede a wrong entry with `correct`, and before you \
stop, record where you are with `checkpoint`. Past agent sessions (Claude Code, Codex, \
Gemini, from every synced machine) are in `sessions_list` and `session_show`; \
`sessions_search` finds the messages and tool calls that match words; \
`sessions_unfinished` lists lost work and `session_bundle` gives what you need to resume \
it. A write may become a proposal that a human approves; the result says so. Send an \
`idempotency_key` with each write you might retry."""


def build_server(ws: Workspace) -> MCPServer[Any]:
    """A server for ``ws``. Checks the write policy now: a broken policy stops start-up."""
    load_policy(ws.home)
    server: MCPServer[Any] = MCPServer(
        "lifeline-mesh",
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
    )
    register_reads(server, ws)
    register_writes(server, WriteGate(ws))
    register_mesh(server, ws)
    register_truth(server, ws)
    register_sessions(server, ws)
    register_sessions_search(server, ws)
    register_bundles(server, ws)
    return server


async def serve_stdio(ws: Workspace) -> None:
    """Serve until the client closes stdin, or until cancelled (Ctrl-C): stdin is read on
    the event loop (:mod:`lifeline_mesh.mcp.stdin_lines`); lines the SDK would drop are
    answered (:mod:`lifeline_mesh.mcp.screen`)."""
    server = build_server(ws)
    low = server._lowlevel_server
    async with (
        stdin_lines() as lines,
        # The SDK only iterates its stdin (`async for line in stdin`); None: it reads its own.
        stdio_server(cast("anyio.AsyncFile[str] | None", lines)) as (read_stream, write_stream),
        screened(read_stream, write_stream) as messages,
    ):
        await low.run(messages, write_stream, low.create_initialization_options())
