"""Bundle tools: ``session_bundle`` (a continuation bundle by id or scope, sized) and
``sessions_unfinished`` (lost work across the mesh). Not ready is an answer here too:
``ready: false`` with the reason and the Acceptance slice, never an invented bundle."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Annotated, Any

from mcp.server import MCPServer
from pydantic import Field

from lifeline.sessions.bundles.resume import BundleRequest, NotReady, build_bundle
from lifeline.sessions.bundles.unfinished import unfinished
from lifeline.sessions.catalogue import Catalogue
from lifeline.sessions.config import load_session_settings
from lifeline.truth.budget import Budget
from lifeline.truth.decisions import decisions_in_force
from lifeline_mesh.mcp.boundary import tool_errors
from lifeline_mesh.mcp.shapes_sessions import BundleResult, UnfinishedList, UnfinishedSession
from lifeline_mesh.mcp.tools_read import READ_ONLY
from lifeline_mesh.mcp.tools_sessions import SessionLine
from lifeline_mesh.mcp.workspace import Workspace

__all__ = ["bundle_view", "register_bundles", "unfinished_view"]


async def bundle_view(ws: Workspace, req: BundleRequest, line: str | None) -> BundleResult:
    settings = load_session_settings(ws.home)
    req = replace(req, decisions=await decisions_in_force(ws.home))
    async with ws.store(line or settings.line) as store:
        cat = await Catalogue(store, live_window=settings.live_window).load()
        try:
            _, text = await build_bundle(cat, req)
        except NotReady as exc:
            return BundleResult(ready=False, why=str(exc), acceptance=exc.text or None)
    return BundleResult(ready=True, bundle=json.loads(text) if req.format == "json" else text)


async def unfinished_view(ws: Workspace, scope: str | None, line: str | None) -> UnfinishedList:
    settings = load_session_settings(ws.home)
    async with ws.store(line or settings.line) as store:
        cat = await Catalogue(store, live_window=settings.live_window).load()
        found = await unfinished(cat, scope)
    return UnfinishedList(
        sessions=[UnfinishedSession.model_validate(u.as_json()) for u in found], count=len(found)
    )


def register_bundles(server: MCPServer[Any], ws: Workspace) -> None:
    @server.tool(annotations=READ_ONLY)
    async def session_bundle(
        id: Annotated[
            str | None, Field(description="session id (or prefix), or the tool's own id")
        ] = None,
        scope: Annotated[
            str | None, Field(description="instead of id: the latest topic of this scope")
        ] = None,
        budget_tokens: Annotated[
            int, Field(ge=50, le=200_000, description="size limit in estimated tokens")
        ] = 6000,
        format: Annotated[str, Field(pattern="^(md|json)$", description="md | json")] = "md",
        exclude: Annotated[
            list[str] | None, Field(description="session ids to leave out of the merge")
        ] = None,
        line: SessionLine = None,
    ) -> BundleResult:
        """A continuation bundle to resume earlier work: Acceptance (is it ready), Contract
        (rules to honour), Context, Intent (goal, latest request), Provenance, Worklog (what
        is outstanding) and Dedup (the sessions merged: same scope and topic, any tool or
        machine). `ready: false` says why instead of inventing one."""
        with tool_errors():
            req = BundleRequest(
                ref=id,
                scope=scope if id is None else None,
                exclude=tuple(exclude or ()),
                budget=Budget(budget_tokens, "tokens"),
                format=format,
            )
            if id is None and scope is None:
                return BundleResult(ready=False, why="give a session id or a scope")
            return await bundle_view(ws, req, line)

    @server.tool(annotations=READ_ONLY)
    async def sessions_unfinished(
        scope: Annotated[str | None, Field(description="only this scope or inside it")] = None,
        line: SessionLine = None,
    ) -> UnfinishedList:
        """Crashed, interrupted and abandoned agent sessions of every synced machine, newest
        first, each with what was outstanding (todos, unanswered calls, queued input)."""
        with tool_errors():
            return await unfinished_view(ws, scope, line)
