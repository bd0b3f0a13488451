"""Write tools: append, correct, checkpoint -- each through the write policy.

The writing agent is the server's ``--agent`` (set by whoever configured the MCP client) or,
over HTTP, the bearer token's agent (:mod:`.caller`; a reader token may not write at all);
never a tool argument: a model cannot step around a ``deny`` by naming another agent.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from lifeline.entry import KNOWN_KINDS
from lifeline.errors import InvalidEntry, NotFound
from lifeline.ledger import Draft
from lifeline.truth.parse import reword_body
from lifeline_mesh.mcp.boundary import tool_errors
from lifeline_mesh.mcp.caller import as_writer
from lifeline_mesh.mcp.checkpoint import CheckpointText
from lifeline_mesh.mcp.shapes import WriteResult
from lifeline_mesh.mcp.tools_read import LineArg
from lifeline_mesh.mcp.writes import WriteGate

__all__ = ["register_writes"]

# Not idempotent by itself: only a repeated idempotency_key makes a retry record nothing new.
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)

KeyArg = Annotated[
    str | None,
    Field(
        description="idempotency key: send the same key when retrying, and the entry is "
        "recorded (or proposed) once"
    ),
]
ProviderArg = Annotated[str, Field(description="the model provider, e.g. anthropic")]
ModelArg = Annotated[str, Field(description="the model name")]
Items = Annotated[list[str] | None, Field(description="one line per item")]


def _draft(gate: WriteGate, **fields: Any) -> Draft:
    """A draft by the caller (a reader token is refused here, before anything is written)."""
    ws = as_writer(gate.ws)
    return Draft(author=ws.author, agent=ws.agent, **fields)


def register_writes(server: MCPServer[Any], gate: WriteGate) -> None:
    _register_append(server, gate)
    _register_correct(server, gate)
    _register_checkpoint(server, gate)


def _register_append(server: MCPServer[Any], gate: WriteGate) -> None:
    @server.tool(annotations=WRITE)
    async def append(
        kind: Annotated[str, Field(description=f"one of: {', '.join(sorted(KNOWN_KINDS))}")],
        summary: Annotated[str, Field(description="one line: what this entry records")],
        body: Annotated[str, Field(description="the why, in full")] = "",
        parents: Annotated[
            list[str] | None,
            Field(
                description="ids or prefixes this builds on; "
                "default: the line's newest tips, at most 8"
            ),
        ] = None,
        idempotency_key: KeyArg = None,
        provider: ProviderArg = "unknown",
        model: ModelArg = "unknown",
        line: LineArg = None,
    ) -> WriteResult:
        """Record an entry (decision, fix, note, ...), or propose it when the write policy
        says a human must approve. Returns the entry, or the proposal and how it is reviewed."""
        with tool_errors():
            resolved = None if parents is None else await gate.resolve(parents, line)
            draft = _draft(
                gate,
                kind=kind,
                summary=summary,
                body=body,
                parents=resolved,
                dedup_key=idempotency_key,
                provider=provider,
                model=model,
            )
            return (await gate.submit(draft, line)).result()


def _register_correct(server: MCPServer[Any], gate: WriteGate) -> None:
    @server.tool(annotations=WRITE)
    async def correct(
        ids: Annotated[list[str], Field(description="the entries this corrects (ids/prefixes)")],
        summary: Annotated[str, Field(description="one line: what is true now")],
        body: Annotated[str, Field(description="why the earlier entries no longer hold")] = "",
        still_open: Annotated[
            bool,
            Field(
                description="for an open question: reword it and keep it open (by default a"
                " correction of an open question closes it)"
            ),
        ] = False,
        idempotency_key: KeyArg = None,
        provider: ProviderArg = "unknown",
        model: ModelArg = "unknown",
        line: LineArg = None,
    ) -> WriteResult:
        """Supersede entries: records a `correction` whose parents are the corrected ids.
        The ledger is append-only; the truth shows the correction instead of them. A
        correction of an open question closes it unless `still_open` rewords it."""
        with tool_errors():
            if not ids:
                raise InvalidEntry("ids is empty; name the entries this corrects")
            resolved = await gate.resolve(ids, line)
            draft = _draft(
                gate,
                kind="correction",
                summary=summary,
                body=reword_body(body) if still_open else body,
                parents=resolved,
                dedup_key=idempotency_key,
                provider=provider,
                model=model,
            )
            return (await gate.submit(draft, line)).result()


async def _thread(
    gate: WriteGate, thread: str, line: str | None
) -> tuple[str, str, tuple[str, ...] | None]:
    """(thread, title, parents): an `open` entry's id (prefix) names its own thread."""
    text = thread.strip()
    if len(text) >= 8 and all(c in "0123456789abcdef" for c in text):
        try:
            async with gate.ws.store(line) as store:
                found = await store.resolve(text)
        except NotFound:
            return text, text, None
        if found.kind == "open":
            return found.id, found.summary, (found.id,)
    return text, text, None


def _register_checkpoint(server: MCPServer[Any], gate: WriteGate) -> None:
    @server.tool(annotations=WRITE)
    async def checkpoint(
        thread: Annotated[
            str, Field(description="the thread: a name like 'main', or the id of an `open` entry")
        ] = "main",
        goal: Items = None,
        done: Items = None,
        next: Items = None,
        blocked: Items = None,
        tried: Items = None,
        idempotency_key: KeyArg = None,
        provider: ProviderArg = "unknown",
        model: ModelArg = "unknown",
        line: LineArg = None,
    ) -> WriteResult:
        """Record where work stopped on a thread, so the next agent (on any node) resumes:
        the goal, what is done, what comes next, what blocks, and what was tried and failed."""
        with tool_errors():
            name, title, parents = await _thread(gate, thread, line)
            text = CheckpointText.build(
                name, title, goal=goal, done=done, next=next, blocked=blocked, tried=tried
            )
            draft = _draft(
                gate,
                kind="checkpoint",
                summary=text.summary(),
                body=text.body(),
                parents=parents,
                dedup_key=idempotency_key,
                provider=provider,
                model=model,
            )
            return (await gate.submit(draft, line)).result()
