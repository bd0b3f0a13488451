"""Truth views for agents: context, a sub-agent's thread brief, recall, resume.

Thin glue over :mod:`lifeline.truth.service` and :mod:`lifeline.truth.recall`: open the
line, call the truth layer, shape the answer. The truth (state, assembly, ranking) is
computed there, once, for the CLI and for MCP alike.
"""

from __future__ import annotations

from lifeline.errors import ConfigError
from lifeline.truth.budget import DEFAULT_BUDGET_CHARS, Budget
from lifeline.truth.formats import deliver
from lifeline.truth.recall import DEFAULT_FLOOR, recall
from lifeline.truth.service import build_context, resume_of
from lifeline.truth.snapshot import truth_source
from lifeline_mesh.mcp.shapes import RecallHit, RecallView, ResumeThread, ResumeView
from lifeline_mesh.mcp.workspace import Workspace

__all__ = [
    "BRIEF_BUDGET_CHARS",
    "budget_of",
    "context_text",
    "recall_view",
    "resume_view",
]

# A sub-agent gets one thread, not the whole project: a third of the full context's budget.
BRIEF_BUDGET_CHARS = DEFAULT_BUDGET_CHARS // 3


def budget_of(chars: int | None, tokens: int | None, default: int) -> Budget:
    """A budget in chars or (estimated) tokens; both at once is a mistake worth naming."""
    if chars is not None and tokens is not None:
        raise ConfigError(
            f"budget={chars} and budget_tokens={tokens} both given; pass only one of them"
        )
    if tokens is not None:
        return Budget(tokens, "tokens")
    return Budget(chars if chars is not None else default, "chars")


async def context_text(
    ws: Workspace,
    line: str | None,
    budget: Budget,
    *,
    query: str | None = None,
    thread: str | None = None,
    recent: int = 12,
    fmt: str = "markdown",
) -> str:
    """The assembled context (or a thread's brief) in delivery format ``fmt``: from the
    line's memo while no process changed the line since the same call."""
    name = ws.line_name(line)
    memo = ws.memo(name)

    async def compute() -> str:
        async with ws.store(name) as store:
            ctx = await build_context(
                store,
                line=name,
                budget=budget,
                query=query,
                thread=thread,
                recent=recent,
                pieces=memo.pieces,
                items=memo.items,
            )
        return deliver(fmt, ctx)

    key = ("context", budget, query, thread, recent, fmt)
    return await memo.answer(key, compute)


async def recall_view(ws: Workspace, line: str | None, query: str, k: int) -> RecallView:
    """Entries most relevant to ``query``, each anchored to its id; no shared word, no hit."""
    if not query.strip():
        raise ConfigError("query is empty; give a few words to search for")
    async with ws.store(line) as store:
        superseded = await truth_source(store).superseded()
        hits = await recall(store, superseded, query, k=k, floor=DEFAULT_FLOOR)
    return RecallView(
        line=ws.line_name(line),
        query=query,
        hits=[
            RecallHit(
                id=h.entry_id,
                score=h.score,
                superseded=h.superseded,
                summary=h.summary,
                excerpt=h.excerpt,
            )
            for h in hits
        ],
        abstained=not hits,
    )


async def resume_view(ws: Workspace, line: str | None) -> ResumeView:
    """Where work stopped: the live checkpoint of every thread, oldest first."""
    async with ws.store(line) as store:
        threads = await resume_of(store)
    return ResumeView(
        line=ws.line_name(line), threads=[ResumeThread.model_validate(t) for t in threads]
    )
