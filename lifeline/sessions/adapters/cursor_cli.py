"""The Cursor CLI's (``cursor-agent``) transcripts: ``~/.cursor/projects/<slug>/agent-transcripts``.

Layouts: ``<chat>.jsonl`` (older builds) or ``<chat>/<chat>.jsonl``, subagents in
``<chat>/subagents/<id>.jsonl``. Each line is a message in Anthropic's shape without ids of
its own: ``{"role": "user"|"assistant", "message": {"content": text | blocks}}`` (blocks
``text``, ``thinking``, ``tool_use``, ``tool_result``). The user's own words are inside
``<user_query>…</user_query>``; the rest of a user message is context Cursor added. The
project folder is the ``<slug>``: the absolute path with every character that is not a
letter or a digit turned into ``-`` (no leading dash) — lossy, so it is resolved against
the file system, one folder at a time. (The CLI also keeps a raw store,
``~/.cursor/chats/<hash>/<chat>/store.db``, of protobuf blobs; the transcript is its
readable copy and is what we read.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from lifeline.sessions.adapters.fields import flatten, to_str
from lifeline.sessions.adapters.port import ParseState, RawLine
from lifeline.sessions.model import (
    Context,
    Item,
    Opaque,
    Prompt,
    Reply,
    Thinking,
    ToolCall,
    ToolResult,
)

__all__ = ["cli_transcript_items", "resolve_slug", "transcripts_in"]

_QUERY = re.compile(r"<user_query>\s*(.*?)\s*</user_query>", re.DOTALL)
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")
_MAX_DEPTH = 24


def transcripts_in(projects: Path) -> Iterator[tuple[Path, str, str]]:
    """(file, its name in the layout, the project slug) of every transcript under
    ``projects`` (``~/.cursor/projects``): flat, nested and subagent layouts."""
    for folder in sorted(projects.glob("*/agent-transcripts")):
        slug = folder.parent.name
        for path in sorted(folder.rglob("*.jsonl")):
            yield path, f"{slug}/agent-transcripts/{path.relative_to(folder).as_posix()}", slug


def slugify(name: str) -> str:
    return _NOT_ALNUM.sub("-", name)


def resolve_slug(slug: str, root: Path = Path("/")) -> str | None:
    """The folder whose slug is ``slug``, found by walking down from ``root``; None when
    no folder on this machine has it."""

    def walk(base: Path, rest: str, depth: int) -> Path | None:
        if not rest:
            return base
        if depth > _MAX_DEPTH:
            return None
        try:
            names = sorted(p.name for p in base.iterdir() if p.is_dir())
        except OSError:
            return None
        for name in names:
            head = slugify(name).strip("-") if depth == 0 else slugify(name)
            if rest == head:
                return base / name
            if head and rest.startswith(head + "-"):
                found = walk(base / name, rest[len(head) + 1 :], depth + 1)
                if found is not None:
                    return found
        return None

    found = walk(root, slug.strip("-"), 0)
    return str(found) if found is not None else None


def cli_transcript_items(line: RawLine, state: ParseState, open_calls: list[str]) -> list[Item]:
    """One transcript line; ``open_calls`` pairs results with calls (the lines carry no
    call ids of their own: a result answers the oldest call still open)."""
    rec = line.json_object
    if rec is None:
        state.skipped["not-json" if line.data is None else "not-an-object"] += 1
        return []
    role = rec.get("role")
    message = rec.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if role not in ("user", "assistant") or content is None:
        state.opaque[f"role/{role}"] += 1
        return [Opaque(record_type=f"role/{role}", raw=rec)]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    items: list[Item] = []
    for i, block in enumerate(blocks if isinstance(blocks, list) else []):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and role == "user":
            items.extend(_user_text(str(block.get("text", "")), state))
        elif kind == "text" and str(block.get("text", "")).strip():
            items.append(Reply(text=str(block["text"])))
        elif kind == "thinking" and to_str(block.get("thinking")):
            items.append(Thinking(text=block["thinking"]))
        elif kind == "tool_use":
            call_id = to_str(block.get("id")) or f"L{line.number}.{i}"
            open_calls.append(call_id)
            items.append(
                ToolCall(call_id=call_id, name=str(block.get("name", "")), input=block.get("input"))
            )
        elif kind == "tool_result":
            wanted = to_str(block.get("tool_use_id"))
            call_id = wanted or (open_calls[0] if open_calls else f"L{line.number}.{i}")
            if call_id in open_calls:
                open_calls.remove(call_id)
            output = block.get("content")
            text = output if isinstance(output, str) else flatten(output)
            items.append(
                ToolResult(call_id=call_id, output=text, is_error=bool(block.get("is_error")))
            )
    return items


def _user_text(text: str, state: ParseState) -> list[Item]:
    found = _QUERY.search(text)
    if found is None:
        if text.lstrip().startswith("<"):
            return [Context(subtype="user-context", text=text)] if text.strip() else []
        state.fact("first_prompt", text[:200], first=True)
        return [Prompt(text=text)] if text.strip() else []
    items: list[Item] = []
    rest = (text[: found.start()] + text[found.end() :]).strip()
    if rest:
        items.append(Context(subtype="user-context", text=rest))
    state.fact("first_prompt", found.group(1)[:200], first=True)
    items.append(Prompt(text=found.group(1)))
    return items


def parent_of(path: Path) -> tuple[str, str] | None:
    """(parent chat, agent id) of a subagent transcript (``<chat>/subagents/<id>.jsonl``)."""
    if path.parent.name == "subagents":
        return path.parent.parent.name, path.stem
    return None
