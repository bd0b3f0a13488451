"""Node tools: mesh_status, mesh_verify (the notary's audit, summarised), proposals."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from pydantic import Field

from lifeline_mesh.mcp.boundary import tool_errors
from lifeline_mesh.mcp.caller import as_caller
from lifeline_mesh.mcp.proposals import ProposalBook
from lifeline_mesh.mcp.reads import status_view
from lifeline_mesh.mcp.shapes import NodeStatus, ProposalList, ProposalView, VerifySummary
from lifeline_mesh.mcp.tools_read import READ_ONLY
from lifeline_mesh.mcp.verify import verify_summary
from lifeline_mesh.mcp.workspace import Workspace

__all__ = ["register_mesh"]


def register_mesh(server: MCPServer[Any], ws: Workspace) -> None:
    @server.tool(annotations=READ_ONLY)
    async def mesh_status() -> NodeStatus:
        """This node: its id, its lines (entries, tips, shared or private), pending proposals,
        the write policy in force, and its static peers."""
        with tool_errors():
            return await status_view(as_caller(ws))

    @server.tool(annotations=READ_ONLY)
    async def mesh_verify(
        line: Annotated[
            str | None, Field(description="audit only this line; default: every line")
        ] = None,
        require_signed: Annotated[
            bool, Field(description="count unsigned entries as failures")
        ] = False,
        allow_unsigned: Annotated[
            bool,
            Field(
                description="report unsigned entries on a line its nodes sign as notes "
                "(entries imported from lifeline-context), not failures"
            ),
        ] = False,
    ) -> VerifySummary:
        """Audit the ledger: ids match content, parents present, node signatures valid and
        by known signers, times consistent with witnesses. A summary per line; `ok` is false
        when anything fails."""
        with tool_errors():
            return await verify_summary(
                ws, line, require_signed=require_signed, allow_unsigned=allow_unsigned
            )

    @server.tool(annotations=READ_ONLY)
    async def proposals(
        status: Annotated[
            Literal["pending", "approved", "rejected", "all"],
            Field(description="which proposals to list"),
        ] = "pending",
    ) -> ProposalList:
        """Proposals on this node and their decisions (approving is for humans, at the CLI)."""
        book = ProposalBook(ws.home)
        with tool_errors():
            found = await asyncio.to_thread(book.find, status=None if status == "all" else status)
        return ProposalList(proposals=[ProposalView.of(p) for p in found])
