"""Cursor chat bubbles as normalized items (see :mod:`lifeline.sessions.adapters.cursor`).

A composer bubble: ``type`` 1 (the user: ``text``, else the text of its ``richText``
editor state) or 2 (the assistant: ``thinking.text``, ``text``, one ``toolFormerData`` —
``name``, ``rawArgs`` (JSON text), ``result`` (JSON text), ``status`` — and
``tokenCount`` ``{inputTokens, outputTokens}``). Times: the bubble's ISO ``createdAt``
when it has one (Cursor often leaves it out). The chat panel's bubbles are ``{type:
"user"|"ai", text}``.
"""

from __future__ import annotations

import json
from typing import Any

from lifeline.sessions.adapters.fields import as_list, json_text, to_int, to_str
from lifeline.sessions.adapters.port import ParseState
from lifeline.sessions.model import (
    ErrorItem,
    FileEdit,
    Interrupt,
    Item,
    Opaque,
    Prompt,
    Reply,
    Thinking,
    ToolCall,
    ToolResult,
    TurnStart,
    Usage,
)
from lifeline.sessions.scope import home_normalized

__all__ = ["chat_end_items", "chatdata_items", "composer_bubble_items"]

# Cursor's tools that change files, and the argument naming the file
_EDIT_TOOLS = frozenset(
    {"edit_file", "edit_file_v2", "search_replace", "write", "delete_file", "apply_patch"}
)
_PATH_ARGS = ("target_file", "file_path", "path", "relativeWorkspacePath", "targetFile")
_DONE = "completed"
_FAILED = frozenset({"error", "failed"})
_REFUSED = frozenset({"cancelled", "canceled", "rejected", "aborted"})


def composer_bubble_items(bubble: dict[str, Any], state: ParseState) -> list[Item]:
    ts = to_str(bubble.get("createdAt"))
    kind = bubble.get("type")
    if kind == 1:
        text = _text(bubble)
        if not text.strip():
            text = _rich_text(bubble.get("richText"))
        if not text.strip():
            state.skipped["empty user bubble"] += 1
            return []
        state.fact("first_prompt", text[:200], first=True)
        images = bubble.get("images")
        return [Prompt(text=text, images=len(images) if isinstance(images, list) else 0, ts=ts)]
    if kind != 2:
        name = f"bubble/{kind}"
        state.opaque[name] += 1
        return [Opaque(record_type=name, raw=bubble, ts=ts)]
    items: list[Item] = []
    thinking = bubble.get("thinking")
    if isinstance(thinking, dict) and to_str(thinking.get("text")):
        items.append(Thinking(text=thinking["text"], ts=ts))
    tool = bubble.get("toolFormerData")
    if isinstance(tool, dict) and tool.get("name"):
        items.extend(_tool_items(tool, str(bubble.get("bubbleId") or ""), ts))
    reply = _text(bubble)
    if reply.strip():
        items.append(Reply(text=reply, model=state.facts.get("model"), ts=ts))
    tokens = bubble.get("tokenCount")
    if isinstance(tokens, dict):
        found = Usage(
            model=state.facts.get("model"),
            input=to_int(tokens.get("inputTokens")),
            output=to_int(tokens.get("outputTokens")),
            ts=ts,
        )
        if found.input or found.output:
            items.append(found)
    return items


def _tool_items(tool: dict[str, Any], bubble_id: str, ts: str | None) -> list[Item]:
    name = str(tool["name"])
    call_id = str(tool.get("toolCallId") or bubble_id)
    # the arguments: ``rawArgs`` (older builds) or ``params`` (later), JSON text or object
    args = _loads(tool.get("rawArgs"))
    if args is None:
        params = tool.get("params")
        args = _loads(params) if isinstance(params, str) else params
    if args is None:
        args = tool.get("rawArgs") if tool.get("rawArgs") is not None else tool.get("params")
    items: list[Item] = [ToolCall(call_id=call_id, name=name, input=args, ts=ts)]
    path = next(
        (args[k] for k in _PATH_ARGS if isinstance(args, dict) and isinstance(args.get(k), str)),
        None,
    )
    if name in _EDIT_TOOLS and path:
        items.append(FileEdit(path=home_normalized(path), tool_name=name, call_id=call_id, ts=ts))
    status = tool.get("status")
    result = tool.get("result")
    parsed = _loads(result)
    if status == _DONE and isinstance(parsed, dict) and parsed.get("rejected") is True:
        status = "rejected"  # a terminal command the user declined reports it in its result
    if status == _DONE or status in _FAILED or status in _REFUSED:
        output = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
        items.append(
            ToolResult(
                call_id=call_id,
                output="" if result is None else output,
                is_error=status != _DONE,
                rejected=True if status in _REFUSED else None,
                ts=ts,
            )
        )
    return items


def chatdata_items(bubble: dict[str, Any], state: ParseState) -> list[Item]:
    """A bubble of the chat panel (``workbench.panel.aichat…chatdata``)."""
    text = _text(bubble)
    kind = bubble.get("type")
    if kind == "user" and text.strip():
        state.fact("first_prompt", text[:200], first=True)
        return [Prompt(text=text)]
    if kind == "ai" and text.strip():
        return [Reply(text=text, model=to_str(bubble.get("modelType")))]
    if kind in ("user", "ai"):
        state.skipped["empty bubble"] += 1
        return []
    state.opaque[f"bubble/{kind}"] += 1
    return [Opaque(record_type=f"bubble/{kind}", raw=bubble)]


def chat_end_items(composer: dict[str, Any], state: ParseState) -> list[Item]:
    """What the composer's ``status`` says of how the chat ended."""
    status = composer.get("status")
    ts = state.facts.get("last_activity")
    if status == "error":
        return [ErrorItem(error="api_error", text="the chat ended on an error", ts=ts)]
    if status == "aborted":
        return [Interrupt(text="stopped by the user", ts=ts)]
    if status == "generating":
        return [TurnStart(turn_id=str(composer.get("composerId") or "?"), ts=ts)]
    return []


def _text(bubble: dict[str, Any]) -> str:
    text = bubble.get("text")
    return text if isinstance(text, str) else ""


def _loads(value: Any) -> Any:
    """The object or array a string holds as JSON text (what the redactor decoded and
    redacted too), else None."""
    return json_text(value) if isinstance(value, str) else None


def _rich_text(value: Any) -> str:
    """The text of a Lexical editor state (``richText``: JSON text of nested nodes)."""
    data = _loads(value) if isinstance(value, str) else value
    parts: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("text"), str):
                parts.append(node["text"])
            for child in as_list(node.get("children")):
                walk(child)
            if node.get("type") == "paragraph":
                parts.append("\n")
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(data.get("root") if isinstance(data, dict) else None)
    return "".join(parts).strip()
