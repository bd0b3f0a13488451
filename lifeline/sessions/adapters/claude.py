"""Claude Code transcripts: ``~/.claude/projects/<slug>/<session>.jsonl`` and subagents.

Three subagent layouts (research doc §1.1): inline ``isSidechain`` lines (1.0.x), a
top-level ``agent-<id>.jsonl`` beside the session (2.0.x), and
``<session>/subagents/agent-<id>.jsonl`` with an optional ``.meta.json`` sidecar (2.1.x).
Each file is its own session in the ledger; a subagent names its parent session and the
tool call that spawned it. Compaction comes in both forms (legacy ``summary`` lines,
``compact_boundary`` + ``isCompactSummary``). One API response spans several lines that
share ``message.id``; its usage is counted once.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lifeline.sessions.adapters.fields import as_list as _as_list
from lifeline.sessions.adapters.fields import flatten as _flatten
from lifeline.sessions.adapters.fields import get as _get
from lifeline.sessions.adapters.fields import opt_int as _opt_int
from lifeline.sessions.adapters.fields import parse_json
from lifeline.sessions.adapters.fields import to_int as _int
from lifeline.sessions.adapters.fields import to_str as _str
from lifeline.sessions.adapters.port import ParseState, RawLine, SourceFile
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
    SubagentLink,
    Thinking,
    Title,
    TodoItem,
    Todos,
    Tool,
    ToolCall,
    ToolResult,
    TurnEnd,
    Usage,
)
from lifeline.sessions.scope import home_normalized

__all__ = ["ClaudeAdapter", "ClaudeParser", "classify_user_text"]

# Record types that carry nothing for the model (metadata, structure, UI state).
_METADATA = frozenset(
    {
        "file-history-snapshot",
        "progress",
        "last-prompt",
        "permission-mode",
        "mode",
        "agent-name",
        "agent-color",
        "frame-link",
        "agent-setting",
        "pr-link",
        "queue-operation",
        "attachment",
    }
)
_WRAPPERS = (
    ("<command-name>", "command"),
    ("<command-message>", "command"),
    ("<command-args>", "command"),
    ("<local-command-stdout>", "command-output"),
    ("<local-command-stderr>", "command-output"),
    ("<bash-input>", "bash"),
    ("<bash-stdout>", "bash"),
    ("<bash-stderr>", "bash"),
    ("<system-reminder>", "system-reminder"),
    ("<ide_opened_file>", "ide"),
    ("<ide_selection>", "ide"),
    ("<ide_diagnostics>", "ide"),
    ("<local-command-caveat>", "caveat"),
    ("<user-prompt-submit-hook>", "hook"),
    ("Caveat: The messages below were generated", "caveat"),
    ("This session is being continued from a previous conversation", "compact-summary"),
)
_EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
# What Claude Code answers for a tool use the user refused at the permission prompt
# (2.1.38: `is_error`, `toolUseResult: "User rejected tool use"`); newer versions append
# "To tell you how to proceed, the user said:\n<reason>".
_REJECTED = "The user doesn't want to proceed with this tool use"
_SPAWN_TOOLS = frozenset({"Task", "Agent"})
_USAGE_KEYS_KEPT = 16
# What an IDE extension puts before the typed text (VS Code, JetBrains): the open file, the
# selection, diagnostics — one block each, or in front of the prompt in one string.
_IDE_HEAD = re.compile(r"\A(?:\s*<(ide_[a-z_]+)>.*?</\1>)+\s*", re.DOTALL)


def _source_name(path: Path) -> str:
    """The file's name in Claude Code's layout without the project folder, whose name is
    the absolute working folder (a username in it): ``<id>.jsonl``, ``agent-<id>.jsonl``
    or ``<session>/subagents/agent-<id>.jsonl``."""
    if path.parent.name == "subagents":
        return f"{path.parent.parent.name}/subagents/{path.name}"
    return path.name


def classify_user_text(text: str) -> str | None:
    """The context subtype of user-role text no human typed, or None for a real prompt."""
    head = text.lstrip()
    for prefix, subtype in _WRAPPERS:
        if head.startswith(prefix):
            return subtype
    return None


class ClaudeAdapter:
    tool = Tool.CLAUDE
    append_only = True

    def default_roots(self, env: dict[str, str], home: Path) -> list[Path]:
        roots = [Path(p) / "projects" for p in env.get("CLAUDE_CONFIG_DIR", "").split(",") if p]
        roots += [home / ".claude" / "projects", home / ".config" / "claude" / "projects"]
        return roots

    def discover(self, root: Path) -> Iterator[SourceFile]:
        if not root.is_dir():
            return
        for path in sorted(root.rglob("*.jsonl")):
            if "workflows" in path.relative_to(root).parts or path.name == "journal.jsonl":
                continue
            yield SourceFile(self.tool, path, _source_name(path))

    def identify(self, path: Path) -> SourceFile | None:
        if path.suffix != ".jsonl":
            return None
        return SourceFile(self.tool, path, _source_name(path))

    def native_id(self, source: SourceFile, first: RawLine | None) -> str:
        return source.path.stem

    def parser(self, source: SourceFile, state: ParseState | None) -> ClaudeParser:
        return ClaudeParser(source, state)

    def whole(
        self, source: SourceFile, state: ParseState, lines: Iterator[RawLine]
    ) -> Iterator[tuple[RawLine, list[Item]]]:
        raise NotImplementedError("Claude Code transcripts are read line by line")


class ClaudeParser:
    def __init__(self, source: SourceFile, state: ParseState | None) -> None:
        self.source = source
        self.subagent_file = source.path.name.startswith("agent-")
        if state is None:
            state = ParseState()
            self._start(state)
        self.state = state

    def _start(self, state: ParseState) -> None:
        if not self.subagent_file:
            return
        state.fact("agent_id", self.source.path.stem.removeprefix("agent-"))
        if self.source.path.parent.name == "subagents":
            state.fact("parent_session", self.source.path.parent.parent.name)
        meta = self.source.path.with_suffix(".meta.json")
        try:
            sidecar = parse_json(meta.read_bytes())
        except (OSError, ValueError):
            return
        if isinstance(sidecar, dict):
            state.fact("spawned_by", _str(sidecar.get("toolUseId")))
            state.fact("title", _str(sidecar.get("description")))

    def feed(self, line: RawLine) -> list[Item]:
        rec = line.json_object
        if rec is None:
            self.state.skipped["not-json" if line.data is None else "not-an-object"] += 1
            return []
        found = rec.get("type")
        kind = found if isinstance(found, str) else None  # a list or a dict: untyped
        self._envelope(rec)
        if kind == "user":
            return self._user(rec)
        if kind == "assistant":
            return self._assistant(rec)
        if kind == "system":
            return self._system(rec)
        if kind in ("summary", "ai-title", "custom-title"):
            return self._title(rec, kind)
        if kind == "progress":
            return self._progress(rec)
        if kind == "attachment" and _get(rec, "attachment", "type") == "queued_command":
            prompt = _get(rec, "attachment", "prompt")
            if isinstance(prompt, str) and prompt.strip():
                return [Prompt(text=prompt, steering=True, ts=_str(rec.get("timestamp")))]
        if kind in _METADATA:
            self.state.skipped["metadata"] += 1
            return []
        name = kind or "untyped"
        self.state.opaque[name] += 1
        return [Opaque(record_type=name, raw=rec, ts=_str(rec.get("timestamp")))]

    def _envelope(self, rec: dict[str, Any]) -> None:
        st = self.state
        cwd = rec.get("cwd")
        if isinstance(cwd, str) and cwd:
            st.extra["cwd_raw"] = cwd
            st.fact("cwd", home_normalized(cwd))
        st.fact("version", _str(rec.get("version")))
        st.fact("git_branch", _str(rec.get("gitBranch")))
        ts = _str(rec.get("timestamp"))
        if ts is not None:
            st.fact("started", ts, first=True)
            if ts > (st.facts.get("last_activity") or ""):
                st.facts["last_activity"] = ts
        if self.subagent_file:
            st.fact("parent_session", _str(rec.get("sessionId")), first=True)

    def _agent(self, rec: dict[str, Any]) -> str | None:
        if self.subagent_file or not rec.get("isSidechain"):
            return None
        return str(rec.get("agentId") or "sidechain")

    def _user(self, rec: dict[str, Any]) -> list[Item]:
        ts, agent = _str(rec.get("timestamp")), self._agent(rec)
        content = _get(rec, "message", "content")
        meta = bool(rec.get("isMeta")) or bool(rec.get("isCompactSummary"))
        if isinstance(content, str):
            return self._user_texts(content, ts, agent, meta, rec)
        if not isinstance(content, list):
            self.state.skipped["user-without-content"] += 1
            return []
        items: list[Item] = []
        images = 0
        for block in content:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text":
                items.extend(self._user_texts(str(block.get("text", "")), ts, agent, meta, rec))
            elif btype == "image":
                images += 1
                items.append(_image(block, ts, agent))
            elif btype == "tool_result":
                items.extend(self._tool_result(block, rec, ts, agent))
        if images:
            for i, item in enumerate(items):
                if isinstance(item, Prompt):
                    items[i] = item.model_copy(update={"images": images})
                    break
        return items

    def _user_texts(
        self, text: str, ts: Any, agent: str | None, meta: bool, rec: dict[str, Any]
    ) -> list[Item]:
        """A user text, with what an IDE put in front of the typed prompt split off as
        context (never the prompt, hence never a session's title, topic or goal)."""
        head = _IDE_HEAD.match(text)
        if head is None or meta:
            return [self._user_text(text, ts, agent, meta, rec)]
        items: list[Item] = [Context(subtype="ide", text=head.group(0).strip(), ts=ts, agent=agent)]
        rest = text[head.end() :]
        if rest.strip():
            items.append(self._user_text(rest, ts, agent, meta, rec))
        return items

    def _user_text(
        self, text: str, ts: Any, agent: str | None, meta: bool, rec: dict[str, Any]
    ) -> Item:
        if text.lstrip().startswith("[Request interrupted by user"):
            return Interrupt(text=text.strip(), ts=ts, agent=agent)
        if rec.get("isCompactSummary"):
            return Context(subtype="compact-summary", text=text, ts=ts, agent=agent)
        subtype = "meta" if meta else classify_user_text(text)
        if subtype is not None:
            return Context(subtype=subtype, text=text, ts=ts, agent=agent)
        if agent is None:
            self.state.fact("first_prompt", text[:200], first=True)
        return Prompt(text=text, ts=ts, agent=agent)

    def _tool_result(
        self, block: dict[str, Any], rec: dict[str, Any], ts: Any, agent: str | None
    ) -> list[Item]:
        call_id = str(block.get("tool_use_id", ""))
        output = _flatten(block.get("content"))
        extra = rec.get("toolUseResult")
        spawned = _str(extra.get("agentId")) if isinstance(extra, dict) else None
        items: list[Item] = []
        if output.lstrip().startswith("[Request interrupted by user"):
            items.append(Interrupt(text=output.strip(), ts=ts, agent=agent))
        is_error = bool(block.get("is_error"))
        items.insert(
            0,
            ToolResult(
                call_id=call_id,
                output=output,
                is_error=is_error,
                spawned_agent=str(spawned) if spawned else None,
                rejected=True if is_error and output.lstrip().startswith(_REJECTED) else None,
                ts=ts,
                agent=agent,
            ),
        )
        if spawned:
            items.append(SubagentLink(agent_id=str(spawned), call_id=call_id, ts=ts, agent=agent))
        return items

    def _assistant(self, rec: dict[str, Any]) -> list[Item]:
        ts, agent = _str(rec.get("timestamp")), self._agent(rec)
        message = rec.get("message") if isinstance(rec.get("message"), dict) else {}
        assert isinstance(message, dict)
        model = message.get("model")
        if isinstance(model, str) and model != "<synthetic>":
            self.state.fact("model", model)
        if rec.get("isApiErrorMessage"):
            status = rec.get("apiErrorStatus")
            return [
                ErrorItem(
                    error=str(rec.get("error") or "api_error"),
                    status=status if isinstance(status, int) else None,
                    text=_flatten(message.get("content")),
                    ts=ts,
                    agent=agent,
                )
            ]
        items: list[Item] = []
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in _as_list(blocks):
            if isinstance(block, dict):
                items.extend(self._assistant_block(block, model, ts, agent))
        items.extend(self._usage(rec, message, ts, agent))
        if message.get("stop_reason") == "end_turn":
            items.append(TurnEnd(reason="end_turn", ts=ts, agent=agent))
        return items

    def _assistant_block(
        self, block: dict[str, Any], model: Any, ts: Any, agent: str | None
    ) -> list[Item]:
        btype = block.get("type")
        if btype == "text":
            text = str(block.get("text", ""))
            if not text.strip():  # Claude Code writes bare newlines as their own block
                return []
            return [Reply(text=text, model=_str(model), ts=ts, agent=agent)]
        if btype == "thinking":  # the signature is never kept
            return [Thinking(text=str(block.get("thinking", "")), ts=ts, agent=agent)]
        if btype == "redacted_thinking":
            return []
        if btype != "tool_use":
            return []
        name, call_id, data = (
            str(block.get("name", "")),
            str(block.get("id", "")),
            block.get("input"),
        )
        items: list[Item] = [ToolCall(call_id=call_id, name=name, input=data, ts=ts, agent=agent)]
        if not isinstance(data, dict):
            return items
        if name == "TodoWrite" and isinstance(data.get("todos"), list):
            todos = tuple(
                TodoItem(content=str(t.get("content", "")), status=str(t.get("status", "")))
                for t in data["todos"]
                if isinstance(t, dict)
            )
            items.append(Todos(items=todos, ts=ts, agent=agent))
        elif name in _EDIT_TOOLS and isinstance(data.get(_edit_key(data)), str):
            path = home_normalized(data[_edit_key(data)])
            items.append(FileEdit(path=path, tool_name=name, call_id=call_id, ts=ts, agent=agent))
        elif name in _SPAWN_TOOLS:
            items.append(
                SubagentLink(
                    agent_id="",
                    call_id=call_id,
                    description=_str(data.get("description")),
                    ts=ts,
                    agent=agent,
                )
            )
        return items

    def _usage(
        self, rec: dict[str, Any], message: dict[str, Any], ts: Any, agent: str | None
    ) -> list[Item]:
        """Usage as deltas: one API response spans several lines that repeat its
        ``message.id`` with usage growing as it streams (the first chunk's output is a
        fraction of the last's). Each line adds what grew since the last line of the same
        response, so the items of a response sum to its final usage, however the file was
        read."""
        usage = message.get("usage")
        if not isinstance(usage, dict):
            return []
        key = f"{message.get('id')}:{rec.get('requestId')}"
        now = [
            _int(usage.get(name))
            for name in (
                "input_tokens",
                "output_tokens",
                "cache_read_input_tokens",
                "cache_creation_input_tokens",
            )
        ]
        seen: dict[str, list[int]] = self.state.extra.setdefault("usage_seen", {})
        before = seen.pop(key, [0, 0, 0, 0])
        seen[key] = now
        while len(seen) > _USAGE_KEYS_KEPT:  # oldest first: responses rarely interleave
            del seen[next(iter(seen))]
        delta = [a - b for a, b in zip(now, before, strict=True)]
        if not any(delta):
            self.state.skipped["usage-repeated"] += 1
            return []
        return [
            Usage(
                model=_str(message.get("model")),
                input=delta[0],
                output=delta[1],
                cache_read=delta[2],
                cache_write=delta[3],
                ts=ts,
                agent=agent,
            )
        ]

    def _system(self, rec: dict[str, Any]) -> list[Item]:
        ts, agent = _str(rec.get("timestamp")), self._agent(rec)
        subtype = str(rec.get("subtype") or "system")
        if subtype == "compact_boundary":
            meta = (
                rec.get("compactMetadata") if isinstance(rec.get("compactMetadata"), dict) else {}
            )
            assert isinstance(meta, dict)
            return [
                Compaction(
                    trigger=_str(meta.get("trigger")),
                    pre_tokens=_opt_int(meta.get("preTokens")),
                    post_tokens=_opt_int(meta.get("postTokens")),
                    ts=ts,
                    agent=agent,
                )
            ]
        if subtype in ("turn_duration", "stop_hook_summary"):
            return [TurnEnd(reason=subtype, ts=ts, agent=agent)]
        if subtype == "api_error":
            return [ErrorItem(error="api_error", text=_flatten(rec.get("content")), ts=ts)]
        text = _flatten(rec.get("content"))
        return [Context(subtype=f"system:{subtype}", text=text, ts=ts, agent=agent)]

    def _title(self, rec: dict[str, Any], kind: str) -> list[Item]:
        text = rec.get({"summary": "summary", "ai-title": "aiTitle"}.get(kind, "customTitle"))
        if not isinstance(text, str) or not text.strip():
            self.state.skipped["empty-title"] += 1
            return []
        user_set = kind == "custom-title"
        if user_set or not self.state.facts.get("title_user_set"):
            self.state.fact("title", text)
            self.state.facts["title_user_set"] = user_set
        return [Title(text=text, user_set=user_set, ts=_str(rec.get("timestamp")))]

    def _progress(self, rec: dict[str, Any]) -> list[Item]:
        data = rec.get("data")
        if isinstance(data, dict) and data.get("type") == "agent_progress":
            agent_id, call_id = data.get("agentId"), rec.get("parentToolUseID")
            seen = self.state.extra.setdefault("linked", [])
            if isinstance(agent_id, str) and agent_id not in seen:
                seen.append(agent_id)
                return [
                    SubagentLink(
                        agent_id=agent_id,
                        call_id=_str(call_id),
                        ts=_str(rec.get("timestamp")),
                        agent=self._agent(rec),
                    )
                ]
        self.state.skipped["metadata"] += 1
        return []


def _edit_key(data: dict[str, Any]) -> str:
    return "notebook_path" if "notebook_path" in data else "file_path"


def _image(block: dict[str, Any], ts: Any, agent: str | None) -> Image:
    source = block.get("source") if isinstance(block.get("source"), dict) else {}
    assert isinstance(source, dict)
    data = source.get("data")
    raw = data.encode("ascii", "replace") if isinstance(data, str) else b""
    return Image(
        media_type=_str(source.get("media_type")),
        bytes=len(raw) * 3 // 4,
        sha256=hashlib.sha256(raw).hexdigest() if raw else None,
        ts=ts,
        agent=agent,
    )
