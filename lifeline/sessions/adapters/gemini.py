"""Gemini CLI chats: ``~/.gemini/tmp/<project>/chats/session-….jsonl`` (and legacy ``.json``).

The JSONL form is an upsert log, not a transcript: line 1 is the session's metadata, a
record with an ``id`` inserts or replaces that message (a tool call is rewritten as its
result and tokens arrive), ``{"$set": {…}}`` patches the metadata (``messages`` in it
replaces the whole list), ``{"$rewindTo": id}`` drops that message and everything after.
So a Gemini file is replayed whole whenever it changes (``append_only = False``); each
message's items are attributed to the line that last wrote it. The legacy form is one
``ConversationRecord`` document rewritten in place: the same replay, from one "line".
There is no end-of-turn marker: a session whose last message is the user's, or with a
tool call still executing, is unfinished.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lifeline.sessions.adapters.fields import as_list, flatten, parse_json, to_int, to_str
from lifeline.sessions.adapters.port import ParseState, RawLine, SourceFile
from lifeline.sessions.model import (
    Context,
    ErrorItem,
    FileEdit,
    Interrupt,
    Item,
    Opaque,
    Prompt,
    Reply,
    Thinking,
    Tool,
    ToolCall,
    ToolResult,
    Usage,
)
from lifeline.sessions.scope import home_normalized

__all__ = ["GeminiAdapter", "gemini_project_root"]

_TERMINAL = frozenset({"success", "error", "cancelled"})
# The tools that change files (gemini-cli's `write_file`, `replace`; `edit` in some builds).
# A call the user declined at the confirmation ends `cancelled`: the change was not made.
_EDIT_TOOLS = frozenset({"write_file", "replace", "edit"})
_IGNORED_PREFIXES = ("<session_context>", "<hook_context>", "/", "?")


class GeminiAdapter:
    tool = Tool.GEMINI
    append_only = False

    def default_roots(self, env: dict[str, str], home: Path) -> list[Path]:
        return [home / ".gemini" / "tmp", home / ".cache" / ".gemini" / "tmp"]

    def discover(self, root: Path) -> Iterator[SourceFile]:
        if not root.is_dir():
            return
        for path in sorted(root.glob("*/chats/**/*")):
            found = self.identify(path)
            if found is not None:
                yield found

    def identify(self, path: Path) -> SourceFile | None:
        if path.suffix == ".jsonl" or (path.suffix == ".json" and path.name.startswith("session-")):
            parent = path.parent
            name = path.name if parent.name == "chats" else f"{parent.name}/{path.name}"
            return SourceFile(self.tool, path, name)
        return None

    def native_id(self, source: SourceFile, first: RawLine | None) -> str:
        rec = first.json_object if first is not None else None
        if rec is None and source.path.suffix == ".json":
            rec = _load_document(source.path)
        found = rec.get("sessionId") if rec else None
        return found if isinstance(found, str) and found else source.path.stem

    def parser(self, source: SourceFile, state: ParseState | None) -> Any:
        raise NotImplementedError("Gemini chats are replayed whole")

    def whole(
        self, source: SourceFile, state: ParseState, lines: Iterator[RawLine]
    ) -> Iterator[tuple[RawLine, list[Item]]]:
        meta: dict[str, Any] = {}
        messages: dict[str, tuple[RawLine, dict[str, Any]]] = {}  # insertion-ordered
        for line in lines:
            _apply(line, meta, messages, state)
        _facts_of(meta, state)
        if "cwd_raw" not in state.extra:  # no directories[]: the tool folder says
            root = gemini_project_root(source.path)
            if root:
                state.extra["cwd_raw"] = root
                state.fact("cwd", home_normalized(root))
        if source.path.parent.name != "chats":  # chats/<parent session>/<id>.jsonl
            state.fact("parent_session", source.path.parent.name)
            state.fact("agent_id", source.path.stem)
        for line, msg in messages.values():
            yield line, _items_of(msg, state)


def gemini_project_root(path: Path) -> str | None:
    """The project folder of a chat file, from Gemini CLI's own records: the
    ``.project_root`` file in its ``tmp/<project>/`` folder, else the entry of
    ``~/.gemini/projects.json`` (``{"projects": {"/abs/path": "<project>"}}``) naming that
    folder. None for a legacy ``tmp/<sha256>/`` folder (only ``projectHash`` says it)."""
    project = next((p.parent for p in path.parents if p.name == "chats"), None)
    if project is None:
        return None
    try:
        text = (project / ".project_root").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        text = ""
    if text:
        return text
    try:
        registry = parse_json((project.parent.parent / "projects.json").read_bytes())
    except (OSError, ValueError):
        return None
    projects = registry.get("projects") if isinstance(registry, dict) else None
    if isinstance(projects, dict):
        for folder, name in projects.items():
            if name == project.name and isinstance(folder, str):
                return folder
    return None


def _load_document(path: Path) -> dict[str, Any] | None:
    try:
        data = parse_json(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _apply(
    line: RawLine,
    meta: dict[str, Any],
    messages: dict[str, tuple[RawLine, dict[str, Any]]],
    state: ParseState,
) -> None:
    rec = line.json_object
    if rec is None:
        state.skipped["not-json" if line.data is None else "not-an-object"] += 1
        return
    if "$set" in rec and isinstance(rec["$set"], dict):
        patch = dict(rec["$set"])
        if isinstance(patch.get("messages"), list):
            messages.clear()
            _insert_all(line, patch.pop("messages"), messages)
        meta.update(patch)
    elif "$rewindTo" in rec:
        target = rec["$rewindTo"]
        keys = list(messages)
        cut = keys.index(target) if isinstance(target, str) and target in messages else 0
        for key in keys[cut:]:
            del messages[key]
    elif isinstance(rec.get("messages"), list):  # legacy whole document
        meta.update({k: v for k, v in rec.items() if k != "messages"})
        messages.clear()
        _insert_all(line, rec["messages"], messages)
    elif isinstance(rec.get("id"), str) and "type" in rec:
        messages[rec["id"]] = (line, rec)
    elif "sessionId" in rec:
        meta.update(rec)
    else:
        state.opaque["untyped"] += 1
        messages[f"opaque:{line.number}"] = (line, {"type": "$opaque", "raw": rec})


def _insert_all(
    line: RawLine, found: list[Any], messages: dict[str, tuple[RawLine, dict[str, Any]]]
) -> None:
    for i, msg in enumerate(found):
        if isinstance(msg, dict):
            messages[str(msg.get("id") or f"{line.number}:{i}")] = (line, msg)


def _facts_of(meta: dict[str, Any], state: ParseState) -> None:
    dirs = meta.get("directories")
    if isinstance(dirs, list) and dirs and isinstance(dirs[0], str):
        state.extra["cwd_raw"] = dirs[0]
        state.fact("cwd", home_normalized(dirs[0]))
    state.fact("started", to_str(meta.get("startTime")))
    state.fact("last_activity", to_str(meta.get("lastUpdated")))
    state.fact("title", to_str(meta.get("summary")))
    state.fact("parent_session", to_str(meta.get("parentSessionId")))
    digest = to_str(meta.get("projectHash"))
    if digest:
        state.extra["project_hash"] = digest


def _user(msg: dict[str, Any], ts: str | None, state: ParseState) -> list[Item]:
    content = msg.get("content")
    if isinstance(content, list):
        text = "\n".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    else:
        text = content if isinstance(content, str) else flatten(content)
    head = text.lstrip()
    if not head or head.startswith(_IGNORED_PREFIXES):
        if head.startswith("<session_context>") and "cwd_raw" not in state.extra:
            for row in head.splitlines():
                if row.strip().startswith("- /"):
                    state.extra["cwd_raw"] = row.strip()[2:]
                    state.fact("cwd", home_normalized(row.strip()[2:]))
                    break
        return [
            Context(
                subtype="session-context" if head.startswith("<") else "command", text=text, ts=ts
            )
        ]
    state.fact("first_prompt", text[:200], first=True)
    return [Prompt(text=text, ts=ts)]


def _gemini(msg: dict[str, Any], ts: str | None, state: ParseState) -> list[Item]:
    model = to_str(msg.get("model"))
    state.fact("model", model)
    items: list[Item] = []
    for thought in as_list(msg.get("thoughts")):
        if isinstance(thought, dict):
            text = f"{thought.get('subject', '')}: {thought.get('description', '')}".strip(": ")
            items.append(Thinking(text=text, ts=to_str(thought.get("timestamp")) or ts))
    for call in as_list(msg.get("toolCalls")):
        if not isinstance(call, dict):
            continue
        call_id, name, args = str(call.get("id", "")), str(call.get("name", "")), call.get("args")
        items.append(ToolCall(call_id=call_id, name=name, input=args, ts=ts))
        path = (
            args.get("file_path") or args.get("absolute_path") if isinstance(args, dict) else None
        )
        if name in _EDIT_TOOLS and isinstance(path, str) and path:
            items.append(
                FileEdit(path=home_normalized(path), tool_name=name, call_id=call_id, ts=ts)
            )
        status = to_str(call.get("status"))
        if status in _TERMINAL:
            output = call.get("result")
            text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
            items.append(
                ToolResult(
                    call_id=call_id,
                    output=text,
                    is_error=status != "success",
                    rejected=True if status == "cancelled" else None,
                    ts=to_str(call.get("timestamp")) or ts,
                )
            )
    content = msg.get("content")
    text = content if isinstance(content, str) else flatten(content)
    if text.strip():
        items.append(Reply(text=text, model=model, ts=ts))
    tokens = msg.get("tokens")
    if isinstance(tokens, dict):
        items.append(
            Usage(
                model=model,
                input=to_int(tokens.get("input")),
                output=to_int(tokens.get("output")),
                cache_read=to_int(tokens.get("cached")),
                reasoning=to_int(tokens.get("thoughts")),
                ts=ts,
            )
        )
    return items


def _items_of(msg: dict[str, Any], state: ParseState) -> list[Item]:
    ts = to_str(msg.get("timestamp"))
    mtype = msg.get("type")
    if ts and ts > (state.facts.get("last_activity") or ""):
        state.facts["last_activity"] = ts
    if mtype == "user":
        return _user(msg, ts, state)
    if mtype == "gemini":
        return _gemini(msg, ts, state)
    if mtype == "info" and flatten(msg.get("content")).strip() == "Request cancelled.":
        return [Interrupt(text="Request cancelled.", ts=ts)]
    if mtype in ("info", "warning"):
        return [Context(subtype=str(mtype), text=flatten(msg.get("content")), ts=ts)]
    if mtype == "error":
        return [ErrorItem(error="api_error", text=flatten(msg.get("content")), ts=ts)]
    name = "untyped" if mtype == "$opaque" else f"message/{mtype}"
    if mtype != "$opaque":
        state.opaque[name] += 1
    return [Opaque(record_type=name, raw=msg.get("raw", msg), ts=ts)]
