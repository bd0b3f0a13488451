"""A session as text for people: prompts and replies in full, tool calls folded to one
line with the first line of their result, subagents nested under the call that ran them,
compactions, errors and todo lists marked. Pure: a Session in, lines out.

Every line is safe to print on a terminal: a transcript's text (which a member may have
written) keeps its newlines, but control characters such as ESC are shown escaped
(:func:`lifeline.wording.shown_text`, decision 0128)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from lifeline.sessions.model import (
    Compaction,
    Context,
    ErrorItem,
    FileEdit,
    Image,
    Interrupt,
    Item,
    Opaque,
    Prompt,
    Reply,
    Session,
    SubagentLink,
    Thinking,
    Title,
    Todos,
    ToolCall,
    ToolResult,
    TurnEnd,
)
from lifeline.wording import count, one_line, shown_text

__all__ = ["header_lines", "render_session", "session_row"]

_MAX_DEPTH = 3
_MARK = {"completed": "x", "in_progress": "~", "pending": " "}


def session_row(s: Session) -> str:
    """One line of ``lifeline sessions list``."""
    title = s.facts.title or s.facts.first_prompt or "(untitled)"
    title = one_line(" ".join(title.split()))[:60]
    started = (s.facts.started or "")[:16].replace("T", " ")
    return (
        f"{s.id[:12]}  {s.tool.value:<6} {s.status.status.value:<11} {s.turns:>5}  "
        f"{started:<16}  {title}"
    )


def header_lines(s: Session) -> list[str]:
    """The facts above ``lifeline sessions show``'s transcript, one line each."""
    f = s.facts
    lines = [
        f"session   {s.id}",
        f"tool      {s.tool.value} {f.version or ''}  (native id {s.native_id})".rstrip(),
        f"title     {f.title or f.first_prompt or '(untitled)'}"[:200],
        f"status    {s.status.status.value}: {s.status.reason}",
        f"scope     {s.scope}" + (f"   cwd {f.cwd}" if f.cwd else ""),
        f"time      {f.started or '?'} → {f.last_activity or '?'}",
        f"turns     {count(s.turns, 'prompt')}, {count(s.item_count, 'item')}",
    ]
    if s.usage:
        lines.append("tokens    " + ", ".join(f"{k} {v:,}" for k, v in sorted(s.usage.items())))
    if f.parent_session:
        lines.append(
            f"parent    {f.parent_session}" + (f" (call {f.spawned_by})" if f.spawned_by else "")
        )
    for label, counts in (("skipped", s.skipped), ("opaque", s.opaque), ("redacted", s.redactions)):
        if counts:
            lines.append(f"{label:<9} " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return [one_line(line) for line in lines]


def _first_line(text: str, width: int = 100) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:width]  # its control characters: see _line
    return ""


def _call_text(call: ToolCall, result: ToolResult | None) -> str:
    arg = ""
    if isinstance(call.input, dict):
        for key in ("file_path", "command", "cmd", "path", "pattern", "description", "query"):
            if isinstance(call.input.get(key), str):
                arg = _first_line(call.input[key], 70)
                break
        if not arg and isinstance(call.input.get("command"), list):
            arg = _first_line(" ".join(str(c) for c in call.input["command"]), 70)
    elif isinstance(call.input, str):
        arg = _first_line(call.input, 70)
    if result is None:
        outcome = "(no result)"
    else:
        outcome = ("error: " if result.is_error else "") + (
            _first_line(result.output, 80) or "(empty)"
        )
    return f"▸ {call.name}({arg}) → {outcome}"


def render_session(
    s: Session, subagent: Callable[[str], Session | None] | None = None, depth: int = 0
) -> Iterator[str]:
    """The transcript; ``subagent(agent_id)`` finds a subagent's own session to nest."""
    pad = "    " * depth
    results = {i.call_id: i for i in s.items if isinstance(i, ToolResult)}
    shown_agents: set[str] = set()
    for item in s.items:
        if item.agent is not None and depth == 0:
            yield from _inline_sidechain(item, results, pad)
            continue
        text = _line(item, results)
        if text is not None:
            yield pad + text
        if (
            isinstance(item, SubagentLink)
            and item.agent_id
            and subagent is not None
            and item.agent_id not in shown_agents
            and depth < _MAX_DEPTH
        ):
            shown_agents.add(item.agent_id)
            child = subagent(item.agent_id)
            if child is not None:
                yield (
                    f"{pad}    ┌ subagent {one_line(item.agent_id)}: {child.status.status.value}, "
                    f"{count(len(child.items), 'item')}"
                )
                yield from render_session(child, subagent, depth + 1)


def _inline_sidechain(item: Item, results: dict[str, ToolResult], pad: str) -> Iterator[str]:
    text = _line(item, results)
    if text is not None:
        yield f"{pad}    [{one_line(str(item.agent))}] {text}"


def _stamp(item: Item) -> str:
    return f"[{item.ts[11:19]}] " if item.ts and len(item.ts) >= 19 else ""


def _line(item: Item, results: dict[str, ToolResult]) -> str | None:
    text = _item_text(item, results)
    return None if text is None else shown_text(text)


def _item_text(item: Item, results: dict[str, ToolResult]) -> str | None:
    stamp = _stamp(item)
    if isinstance(item, Prompt):
        extra = f" (+{item.images} image)" if item.images else ""
        who = "you (queued)" if item.steering else "you"
        return f"{stamp}{who}: {item.text}{extra}"
    if isinstance(item, Reply):
        return f"{stamp}assistant: {item.text}"
    if isinstance(item, ToolCall):
        return "  " + _call_text(item, results.get(item.call_id))
    if isinstance(item, Context):
        return f"  · {item.subtype}: {_first_line(item.text, 90)}"
    if isinstance(item, Thinking):
        return f"  … thinking: {_first_line(item.text, 90)}"
    if isinstance(item, Compaction):
        tokens = f", {item.pre_tokens} → {item.post_tokens} tokens" if item.pre_tokens else ""
        return f"{stamp}~~ compacted ({item.trigger or '?'}{tokens}) ~~"
    if isinstance(item, ErrorItem):
        return (
            f"{stamp}! {item.error}{f' {item.status}' if item.status else ''}: "
            f"{_first_line(item.text)}"
        )
    if isinstance(item, Interrupt):
        return f"{stamp}✗ interrupted: {item.text}"
    if isinstance(item, Todos):
        return "  todos: " + "; ".join(
            f"[{_MARK.get(t.status, '?')}] {t.content}" for t in item.items
        )
    if isinstance(item, Title):
        return f"  # title: {item.text}"
    if isinstance(item, Image):
        return f"  [image {item.media_type or ''} {item.bytes} bytes]"
    if isinstance(item, Opaque):
        return f"  ? {item.record_type} (not understood; kept)"
    if isinstance(item, FileEdit | TurnEnd | ToolResult | SubagentLink):
        return None
    return None
