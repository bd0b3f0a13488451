"""The normalized session model: what every adapter produces and every reader gets back.

One vocabulary for Claude Code, Codex and Gemini sessions (docs/sessions.md). A session is
a stream of **items**, in file order; each item is one typed thing that happened (a real
user prompt, injected context, a reply, a tool call, its result, a compaction, recorded
token usage, an error, a todo snapshot, a file edit, a title…) and carries its provenance:
the source file's lines it came from and the sha256 of those raw bytes.

Items are stored as they come: a tool call and its result are two items joined by
``call_id`` (the result may arrive many lines, or many ingests, later). :class:`Session`
is the assembled view a reader gets: header facts, status, the items, and
:meth:`Session.tool_calls` pairing calls with their results.

Everything here has passed redaction (``lifeline.sessions.ingest.redact``) before it is stored:
text fields may hold ``[REDACTED:<type>]`` markers and ``[TRUNCATED …]`` markers.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

__all__ = [
    "ITEM_ADAPTER",
    "Compaction",
    "Context",
    "ErrorItem",
    "FileEdit",
    "Image",
    "Interrupt",
    "Item",
    "Opaque",
    "Prompt",
    "Provenance",
    "Reply",
    "Session",
    "SessionFacts",
    "SessionStatus",
    "Status",
    "SubagentLink",
    "Thinking",
    "Title",
    "TodoItem",
    "Todos",
    "Tool",
    "ToolCall",
    "ToolCallPair",
    "ToolResult",
    "TurnEnd",
    "TurnStart",
    "Usage",
]


class Tool(enum.StrEnum):
    """The agent tools we read."""

    CLAUDE = "claude"
    CODEX = "codex"
    GEMINI = "gemini"
    CURSOR = "cursor"  # the IDE's chats (state.vscdb)
    FORGE = "forge"  # forgecode (.forge.db)


class SessionStatus(enum.StrEnum):
    """How a session ended (DESIGN §9, research doc §1 predicates)."""

    COMPLETE = "complete"  # the last turn was answered in full
    INTERRUPTED = "interrupted"  # the user stopped it
    CRASHED = "crashed"  # crashed or unfinished: open call, unanswered prompt, error last…
    LIVE = "live"  # written to recently: judged when read, never stored


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class Provenance(_Frozen):
    """Where an item came from: enough to find and verify the raw bytes again.

    ``source`` is the file's name relative to the tool's session folder layout (e.g.
    ``258c…/subagents/agent-a88.jsonl``), never an absolute path, so two machines agree.
    """

    tool: Tool
    source: str
    native_ids: tuple[str, ...] = ()
    lines: tuple[int, int]  # first and last line, 1-based, inclusive
    sha256: str  # of the raw bytes of those lines (before redaction)


class _Item(_Frozen):
    ts: str | None = None  # the tool's own timestamp for the record, as written
    agent: str | None = None  # inline sidechain / subagent id when the item belongs to one
    prov: Provenance | None = None  # filled in by the reader; stored compactly (see pack.py)


class Prompt(_Item):
    """A real user prompt: something a human typed (or queued mid-turn when ``steering``)."""

    kind: Literal["prompt"] = "prompt"
    text: str
    images: int = 0
    steering: bool = False


class Context(_Item):
    """Text in the user role that no human typed: injected context, command wrappers,
    compact summaries, hook output, system notes. ``subtype`` says which."""

    kind: Literal["context"] = "context"
    subtype: str
    text: str


class Reply(_Item):
    kind: Literal["reply"] = "reply"
    text: str
    model: str | None = None


class Thinking(_Item):
    """Reasoning text the tool recorded in clear (never signatures or encrypted content)."""

    kind: Literal["thinking"] = "thinking"
    text: str


class Image(_Item):
    """An image block: its type, size and hash only; the pixels are not stored."""

    kind: Literal["image"] = "image"
    media_type: str | None = None
    bytes: int = 0
    sha256: str | None = None


class ToolCall(_Item):
    kind: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str
    input: Any = None


class ToolResult(_Item):
    kind: Literal["tool_result"] = "tool_result"
    call_id: str
    output: str
    is_error: bool = False
    spawned_agent: str | None = None  # the subagent this call ran, when the tool says so
    rejected: bool | None = None  # the user refused the call (it did not run); None: no


class SubagentLink(_Item):
    """A subagent (sidechain) and the tool call that spawned it."""

    kind: Literal["subagent"] = "subagent"
    agent_id: str
    call_id: str | None = None
    description: str | None = None


class Compaction(_Item):
    """The tool compacted its context here; what follows starts from a summary."""

    kind: Literal["compaction"] = "compaction"
    trigger: str | None = None
    pre_tokens: int | None = None
    post_tokens: int | None = None


class Usage(_Item):
    """Token usage as the tool recorded it (deduplicated per API response)."""

    kind: Literal["usage"] = "usage"
    model: str | None = None
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0

    def add_to(self, totals: dict[str, int]) -> None:
        """Add to a session's totals (adapters write usage so that the sum of a session's
        items is the transcript's own final totals)."""
        for name in ("input", "output", "cache_read", "cache_write", "reasoning"):
            value: int = getattr(self, name)
            if value or name in totals:
                totals[name] = totals.get(name, 0) + value


class ErrorItem(_Item):
    """An API error, rate limit or failed turn recorded in the transcript."""

    kind: Literal["error"] = "error"
    error: str  # rate_limit, api_error, authentication_failed, turn_failed, …
    status: int | None = None
    text: str = ""


class TodoItem(_Frozen):
    content: str
    status: str  # pending | in_progress | completed (as the tool spells it)


class Todos(_Item):
    """A snapshot of the agent's todo / plan list (TodoWrite, update_plan…); latest wins."""

    kind: Literal["todos"] = "todos"
    items: tuple[TodoItem, ...]


class FileEdit(_Item):
    """A change to a file that a tool call asked for. Whether it happened is its call's
    result: answered without error (done), refused by the user, failed, or never answered."""

    kind: Literal["file_edit"] = "file_edit"
    path: str
    tool_name: str
    call_id: str | None = None  # the tool call that asked for it


class Interrupt(_Item):
    kind: Literal["interrupt"] = "interrupt"
    text: str = ""


class TurnStart(_Item):
    kind: Literal["turn_start"] = "turn_start"
    turn_id: str | None = None


class TurnEnd(_Item):
    kind: Literal["turn_end"] = "turn_end"
    turn_id: str | None = None
    reason: str = ""


class Title(_Item):
    kind: Literal["title"] = "title"
    text: str
    user_set: bool = False


class Opaque(_Item):
    """A record this version does not understand: kept (redacted, capped), and counted."""

    kind: Literal["opaque"] = "opaque"
    record_type: str
    raw: Any = None


Item = Annotated[
    Prompt
    | Context
    | Reply
    | Thinking
    | Image
    | ToolCall
    | ToolResult
    | SubagentLink
    | Compaction
    | Usage
    | ErrorItem
    | Todos
    | FileEdit
    | Interrupt
    | TurnStart
    | TurnEnd
    | Title
    | Opaque,
    Field(discriminator="kind"),
]
ITEM_ADAPTER: TypeAdapter[Item] = TypeAdapter(Item)


class SessionFacts(_Frozen):
    """What the transcript says about the session as a whole (latest values win)."""

    cwd: str | None = None  # home-normalized (``~/…``)
    version: str | None = None
    git_branch: str | None = None
    git_remote: str | None = None  # when the transcript records it (Codex)
    git_commit: str | None = None  # HEAD at the session's start, when recorded (Codex)
    git_commit_end: str | None = None  # the last HEAD the transcript records
    started: str | None = None
    last_activity: str | None = None
    title: str | None = None
    title_user_set: bool = False
    first_prompt: str | None = None
    model: str | None = None
    parent_session: str | None = None  # for subagents and forks
    agent_id: str | None = None
    spawned_by: str | None = None  # the parent's tool call id, when known


class Status(_Frozen):
    """A session's state as judged from its items; ``reason`` is one line for humans."""

    status: SessionStatus
    reason: str


class ToolCallPair(_Frozen):
    call: ToolCall
    result: ToolResult | None = None


class Session(_Frozen):
    """One session as read back from the ledger (header + latest status + items)."""

    id: str  # the header entry's id: the session's identity in the ledger
    tool: Tool
    native_id: str
    source: str
    facts: SessionFacts
    scope: str
    status: Status
    turns: int  # real user prompts
    items: tuple[Item, ...] = ()
    item_count: int = 0
    skipped: dict[str, int] = Field(default_factory=dict)  # lines skipped, by reason
    opaque: dict[str, int] = Field(default_factory=dict)  # unknown records, by type
    redactions: dict[str, int] = Field(default_factory=dict)  # markers, by secret type
    truncated: int = 0  # outputs cut to the cap
    # token totals as the transcript records them (input, output, cache_read, cache_write,
    # reasoning): Codex's last total_token_usage, Claude's final usage of each response,
    # the sum of Gemini's per-message tokens
    usage: dict[str, int] = Field(default_factory=dict)

    def tool_calls(self) -> list[ToolCallPair]:
        """Each call with its result (``None`` when it was never answered)."""
        results = {i.call_id: i for i in self.items if isinstance(i, ToolResult)}
        return [
            ToolCallPair(call=i, result=results.get(i.call_id))
            for i in self.items
            if isinstance(i, ToolCall)
        ]

    def todos(self) -> Todos | None:
        """The latest todo snapshot (TodoWrite and its successors), if any."""
        found = [i for i in self.items if isinstance(i, Todos)]
        return found[-1] if found else None

    def files_edited(self) -> list[str]:
        seen: dict[str, None] = {}
        for item in self.items:
            if isinstance(item, FileEdit):
                seen.setdefault(item.path)
        return list(seen)
