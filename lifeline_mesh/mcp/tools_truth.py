"""Truth tools and the context resource: context, brief, recall, resume, lifeline://context."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from pydantic import Field

from lifeline.truth.budget import DEFAULT_BUDGET_CHARS, Budget
from lifeline_mesh.mcp.boundary import resource_errors, tool_errors
from lifeline_mesh.mcp.context import (
    BRIEF_BUDGET_CHARS,
    budget_of,
    context_text,
    recall_view,
    resume_view,
)
from lifeline_mesh.mcp.shapes import RecallView, ResumeView
from lifeline_mesh.mcp.tools_read import READ_ONLY, LineArg
from lifeline_mesh.mcp.workspace import Workspace

__all__ = ["register_truth"]

Chars = Annotated[int | None, Field(gt=0, description="limit in characters")]
Tokens = Annotated[
    int | None, Field(gt=0, description="limit in estimated tokens (instead of characters)")
]


def register_truth(server: MCPServer[Any], ws: Workspace) -> None:
    _register_texts(server, ws)
    _register_lookups(server, ws)


def _register_texts(server: MCPServer[Any], ws: Workspace) -> None:
    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def context(
        query: Annotated[
            str | None, Field(description="add a Relevant section recalled for this text")
        ] = None,
        thread: Annotated[
            str | None, Field(description="focus on one thread (name or open-entry id)")
        ] = None,
        budget: Chars = None,
        budget_tokens: Tokens = None,
        format: Annotated[
            Literal["markdown", "anthropic", "openai", "gemini"],
            Field(description="markdown, or the system-prompt JSON of a provider's API"),
        ] = "markdown",
        recent: Annotated[int, Field(ge=1, le=200, description="entries in Recent")] = 12,
        line: LineArg = None,
    ) -> str:
        """The project's current truth as budgeted markdown: identity, pins, decisions in
        force, open items, where each thread stopped, recent entries. Anything cut for the
        budget is listed by id, never silently dropped. Read this before you start."""
        with tool_errors():
            size = budget_of(budget, budget_tokens, DEFAULT_BUDGET_CHARS)
            return await context_text(
                ws, line, size, query=query, thread=thread, recent=recent, fmt=format
            )

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def brief(
        thread: Annotated[str, Field(description="the thread: a name, or an open entry's id")],
        budget: Chars = None,
        budget_tokens: Tokens = None,
        line: LineArg = None,
    ) -> str:
        """A brief for a sub-agent working on one thread: the thread's checkpoint and
        entries plus the pins and decisions that bind it, in a small budget."""
        with tool_errors():
            size = budget_of(budget, budget_tokens, BRIEF_BUDGET_CHARS)
            return await context_text(ws, line, size, thread=thread)

    @server.resource(
        "lifeline://context",
        name="context",
        description="the project's current truth (budgeted markdown) of the server's line",
        mime_type="text/markdown",
    )
    async def context_resource() -> str:
        with resource_errors():
            return await context_text(ws, None, Budget(DEFAULT_BUDGET_CHARS, "chars"))


def _register_lookups(server: MCPServer[Any], ws: Workspace) -> None:
    @server.tool(annotations=READ_ONLY)
    async def recall(
        query: Annotated[str, Field(description="plain words; no search syntax needed")],
        k: Annotated[int, Field(ge=1, le=50, description="at most this many hits")] = 8,
        line: LineArg = None,
    ) -> RecallView:
        """Search the ledger (BM25 over summaries and bodies). Each hit names its entry id
        and whether it was superseded; a weak match returns nothing rather than noise."""
        with tool_errors():
            return await recall_view(ws, line, query, k)

    @server.tool(annotations=READ_ONLY)
    async def resume(line: LineArg = None) -> ResumeView:
        """Where work stopped: every thread's live checkpoint (goal, done, next, blocked,
        tried). Pick up from `next`, and do not retry what is under `tried`."""
        with tool_errors():
            return await resume_view(ws, line)
