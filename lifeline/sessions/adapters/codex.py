"""OpenAI Codex CLI rollouts: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-…-<id>.jsonl``.

Envelope ``{timestamp, type, payload}``. Typed prompts come from ``event_msg.user_message``;
the model-visible ``response_item`` copy of the same text is a duplicate, and user-role
``<environment_context>``/``<user_instructions>`` items are injected context. Replies are
``response_item`` assistant messages (``agent_message`` events repeat them). Reasoning keeps
its summary text, never ``encrypted_content``. Turn boundaries (``task_started`` /
``task_complete`` / ``turn_aborted``) exist from 0.104 on; older rollouts have none.
Thread names come from ``session_index.jsonl`` beside ``sessions/``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lifeline.sessions.adapters.fields import as_list, flatten, get, json_text, to_int, to_str
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
    Thinking,
    Title,
    TodoItem,
    Todos,
    Tool,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    Usage,
)
from lifeline.sessions.scope import home_normalized

__all__ = ["CodexAdapter", "CodexParser"]

_INJECTED = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md",
    "<permissions",
    "<skill>",  # a skill's SKILL.md, injected after the prompt that named it
    "<turn_aborted>",
)
_CALLS = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "web_search_call",
        "tool_search_call",
        "image_generation_call",
    }
)
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output", "tool_search_output"})
_QUIET_EVENTS = frozenset(
    {
        "agent_message",
        "agent_reasoning",
        "patch_apply_end",
        "exec_command_end",
        "mcp_tool_call_end",
        "web_search_end",
        "item_completed",
        "entered_review_mode",
        "exited_review_mode",
        "agent_reasoning_raw_content",
        "user_message",
    }
)
_PATCH_FILE = re.compile(
    r"^\*\*\* (?:Update File|Add File|Delete File|Move to): (.+)$", re.MULTILINE
)
# The shell tools: ``shell``/``local_shell_call`` take ``command`` (argv), ``exec_command``
# takes ``cmd`` (a string). An edit made through them is an ``apply_patch`` heredoc.
_SHELL_KEYS = ("command", "cmd")
_EXIT_CODE = re.compile(r"^(?:Exit code|Process exited with code):? (-?\d+)", re.MULTILINE)
# Codex's IDE extension and desktop app put the open file, tabs and attachments before the
# typed request: "# Context from my IDE setup: … ## My request for Codex:\n<request>".
_IDE_REQUEST = re.compile(r"^## My request(?: for Codex)?:[ \t]*\n?", re.MULTILINE)
_IMAGE_TAG = re.compile(r"</?image(?: name=[^>]*)?>")
_DATA_URL = re.compile(r"\Adata:([^;,]+)?(?:;[^,]*)?,")
_USAGE_FIELDS = ("input_tokens", "output_tokens", "cached_input_tokens", "reasoning_output_tokens")
_UUID_TAIL = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$")


class CodexAdapter:
    tool = Tool.CODEX
    append_only = True

    def default_roots(self, env: dict[str, str], home: Path) -> list[Path]:
        base = Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else home / ".codex"
        return [base / "sessions", base / "archived_sessions"]

    def discover(self, root: Path) -> Iterator[SourceFile]:
        if not root.is_dir():
            return
        for path in sorted(root.rglob("rollout-*.jsonl")):
            yield SourceFile(self.tool, path, path.name)

    def identify(self, path: Path) -> SourceFile | None:
        return SourceFile(self.tool, path, path.name) if path.suffix == ".jsonl" else None

    def native_id(self, source: SourceFile, first: RawLine | None) -> str:
        rec = first.json_object if first is not None else None
        found = get(rec, "payload", "id") if rec and rec.get("type") == "session_meta" else None
        if isinstance(found, str) and found:
            return found
        match = _UUID_TAIL.search(source.path.stem)
        return match.group(1) if match else source.path.stem

    def parser(self, source: SourceFile, state: ParseState | None) -> CodexParser:
        parser = CodexParser(state)
        if state is None:
            title = _thread_name(source.path, self.native_id(source, None))
            parser.state.fact("title", title)
            parser.state.facts["title_user_set"] = title is not None
        return parser

    def whole(
        self, source: SourceFile, state: ParseState, lines: Iterator[RawLine]
    ) -> Iterator[tuple[RawLine, list[Item]]]:
        raise NotImplementedError("Codex rollouts are read line by line")


def _thread_name(path: Path, native: str) -> str | None:
    """The thread's name in ``session_index.jsonl`` (newest wins), if Codex named it."""
    for folder in path.parents:
        index = folder / "session_index.jsonl"
        if index.is_file():
            name = None
            try:
                with index.open("rb") as handle:
                    for raw in handle:
                        try:
                            rec = json.loads(raw)
                        except ValueError:
                            continue
                        if isinstance(rec, dict) and rec.get("id") == native:
                            name = to_str(rec.get("thread_name")) or name
            except OSError:
                return None
            return name
    return None


class CodexParser:
    def __init__(self, state: ParseState | None) -> None:
        self.state = state or ParseState()

    def feed(self, line: RawLine) -> list[Item]:
        rec = line.json_object
        if rec is None:
            self.state.skipped["not-json" if line.data is None else "not-an-object"] += 1
            return []
        ts = to_str(rec.get("timestamp"))
        if ts:
            self.state.fact("started", ts, first=True)
            if ts > (self.state.facts.get("last_activity") or ""):
                self.state.facts["last_activity"] = ts
        kind, payload = rec.get("type"), rec.get("payload")
        if not isinstance(payload, dict):
            payload = {}
        if "held" in self.state.extra and not (
            kind == "event_msg" and payload.get("type") == "user_message"
        ):
            return [*self._flush(), *self._record(kind, payload, rec, ts)]
        return self._record(kind, payload, rec, ts)

    def _record(
        self, kind: Any, payload: dict[str, Any], rec: dict[str, Any], ts: str | None
    ) -> list[Item]:
        if kind == "session_meta":
            self._meta(payload)
            return []
        if kind == "turn_context":
            self._cwd(payload.get("cwd"))
            self.state.fact("model", to_str(payload.get("model")))
            return []
        if kind == "response_item":
            return self._response(payload, ts)
        if kind == "event_msg":
            return self._event(payload, ts)
        if kind == "compacted":
            text = to_str(payload.get("message")) or ""
            return [
                Compaction(trigger="compacted", ts=ts),
                Context(subtype="compact-summary", text=text, ts=ts),
            ]
        name = str(kind) if isinstance(kind, str) else "untyped"
        self.state.opaque[name] += 1
        return [Opaque(record_type=name, raw=rec, ts=ts)]

    def _cwd(self, cwd: Any) -> None:
        if isinstance(cwd, str) and cwd:
            self.state.extra["cwd_raw"] = cwd
            self.state.fact("cwd", home_normalized(cwd))

    def _meta(self, payload: dict[str, Any]) -> None:
        st = self.state
        self._cwd(payload.get("cwd"))
        st.fact("version", to_str(payload.get("cli_version")))
        st.fact("git_branch", to_str(get(payload, "git", "branch")))
        st.fact("git_remote", to_str(get(payload, "git", "repository_url")))
        commit = to_str(get(payload, "git", "commit_hash"))
        st.fact("git_commit", commit, first=True)  # a resumed rollout may record it again
        st.fact("git_commit_end", commit)
        spawn = get(payload, "source", "subagent", "thread_spawn")
        if isinstance(spawn, dict):
            st.fact("parent_session", to_str(spawn.get("parent_thread_id")))
            st.fact("agent_id", to_str(spawn.get("agent_nickname")) or to_str(payload.get("id")))
        st.fact("parent_session", to_str(payload.get("forked_from_id")))

    def _response(self, payload: dict[str, Any], ts: str | None) -> list[Item]:
        ptype = to_str(payload.get("type"))
        if ptype == "message":
            return self._message(payload, ts)
        if ptype == "reasoning":  # the summary only; encrypted_content is never kept
            texts = [
                to_str(s.get("text")) or ""
                for s in as_list(payload.get("summary"))
                if isinstance(s, dict)
            ]
            return [Thinking(text="\n".join(texts), ts=ts)] if any(texts) else []
        if ptype in _CALLS:
            return self._call(payload, ts)
        if ptype in _OUTPUTS:
            output = payload.get("output")
            text = output if isinstance(output, str) else flatten(output)
            call_id = str(payload.get("call_id", ""))
            return [ToolResult(call_id=call_id, output=text, is_error=_failed(text), ts=ts)]
        if ptype == "ghost_snapshot":
            self.state.skipped["metadata"] += 1
            return []
        name = f"response_item/{ptype}"
        self.state.opaque[name] += 1
        return [Opaque(record_type=name, raw=payload, ts=ts)]

    def _message(self, payload: dict[str, Any], ts: str | None) -> list[Item]:
        role = payload.get("role")
        content = [c for c in as_list(payload.get("content")) if isinstance(c, dict)]
        text = "\n".join(
            str(c.get("text", ""))
            for c in content
            if c.get("type") in ("input_text", "output_text", "text")
        )
        if role == "assistant":
            return [Reply(text=text, model=to_str(self.state.facts.get("model")), ts=ts)]
        if role == "user" and _same_text(text, self.state.extra.get("last_prompt") or ""):
            self.state.skipped["duplicate-prompt"] += 1  # a copy written after its event
            return []
        if role == "user" and not text.lstrip().startswith(_INJECTED):
            # The model's copy of what was typed; the prompt itself is the user_message
            # event that follows it. Held until the next record says which it was.
            images = [str(c.get("image_url")) for c in content if c.get("type") == "input_image"]
            items = self._flush()
            self.state.extra["held"] = {"text": text, "ts": ts, "images": images}
            return items
        return [Context(subtype=f"{role}-context", text=text, ts=ts)]

    def _flush(self) -> list[Item]:
        """A held user-role item that no user_message event followed: injected context
        (a prompt is only what the user_message event records)."""
        held = self.state.extra.pop("held", None)
        if not isinstance(held, dict):
            return []
        ts = held.get("ts")
        items: list[Item] = [_image(url, ts) for url in held.get("images") or []]
        items.append(Context(subtype="user-input", text=str(held.get("text", "")), ts=ts))
        return items

    def _prompt(self, payload: dict[str, Any], ts: str | None) -> list[Item]:
        """One typed prompt (a ``user_message`` event), its images, and what an IDE put
        in front of it split off as context."""
        text = str(payload.get("message", ""))
        held = self.state.extra.pop("held", None)
        items: list[Item] = []
        urls = [u for u in as_list(payload.get("images")) if isinstance(u, str)]
        count = len(urls) + sum(isinstance(p, str) for p in as_list(payload.get("local_images")))
        if isinstance(held, dict):
            if _same_text(str(held.get("text", "")), text):
                self.state.skipped["duplicate-prompt"] += 1
                urls = [str(u) for u in held.get("images") or []] or urls  # local ones too
            else:
                self.state.extra["held"] = held
                items = self._flush()
        items += [_image(url, ts) for url in urls]
        request = _IDE_REQUEST.search(text) if text.startswith("# ") else None
        if request is not None:
            items.append(Context(subtype="ide", text=text[: request.start()].rstrip(), ts=ts))
            text = text[request.end() :].strip()
            if not text:
                return items
        self.state.fact("first_prompt", text[:200], first=True)
        self.state.extra["last_prompt"] = str(payload.get("message", ""))
        items.append(Prompt(text=text, images=max(count, len(urls)), ts=ts))
        return items

    def _call(self, payload: dict[str, Any], ts: str | None) -> list[Item]:
        name = str(payload.get("name") or payload.get("type"))
        raw = payload.get("arguments", payload.get("input", payload.get("action")))
        data: Any = raw
        if isinstance(raw, str) and payload.get("type") == "function_call":
            decoded = json_text(raw)  # what the redactor decoded and redacted (0113)
            data = raw if decoded is None else decoded
        call_id = str(payload.get("call_id") or payload.get("id") or "")
        items: list[Item] = [ToolCall(call_id=call_id, name=name, input=data, ts=ts)]
        patch = data if name == "apply_patch" else _shell_patch(data)
        if isinstance(patch, str):
            items += [
                FileEdit(path=home_normalized(p.strip()), tool_name=name, call_id=call_id, ts=ts)
                for p in dict.fromkeys(_PATCH_FILE.findall(patch))
            ]
        if name == "update_plan" and isinstance(data, dict) and isinstance(data.get("plan"), list):
            todos = tuple(
                TodoItem(content=str(p.get("step", "")), status=str(p.get("status", "")))
                for p in data["plan"]
                if isinstance(p, dict)
            )
            items.append(Todos(items=todos, ts=ts))
        if (
            payload.get("type") in ("local_shell_call", "web_search_call")
            and payload.get("status") == "completed"
        ):
            items.append(ToolResult(call_id=call_id, output="", ts=ts))
        return items

    def _event(self, payload: dict[str, Any], ts: str | None) -> list[Item]:
        etype = to_str(payload.get("type"))
        if etype == "user_message":
            return self._prompt(payload, ts)
        if etype == "token_count":
            return self._usage(payload, ts)
        if etype in ("task_started", "turn_started"):
            return [TurnStart(turn_id=to_str(payload.get("turn_id")), ts=ts)]
        if etype in ("task_complete", "turn_complete"):
            items: list[Item] = []
            if payload.get("error"):
                items.append(ErrorItem(error="turn_failed", text=flatten(payload["error"]), ts=ts))
            return [*items, TurnEnd(turn_id=to_str(payload.get("turn_id")), reason=etype, ts=ts)]
        if etype == "turn_aborted":
            reason = to_str(payload.get("reason")) or "aborted"
            return [
                Interrupt(text=reason, ts=ts),
                TurnEnd(turn_id=to_str(payload.get("turn_id")), reason="aborted", ts=ts),
            ]
        if etype == "context_compacted":
            return [Compaction(trigger="context_compacted", ts=ts)]
        if etype == "thread_name_updated":
            name = to_str(payload.get("thread_name")) or to_str(payload.get("name"))
            self.state.fact("title", name)
            self.state.facts["title_user_set"] = True
            return [Title(text=name, user_set=True, ts=ts)] if name else []
        if etype in ("error", "stream_error"):
            return [ErrorItem(error=str(etype), text=flatten(payload.get("message")), ts=ts)]
        if etype in _QUIET_EVENTS:
            self.state.skipped["duplicate-event"] += 1
            return []
        name = f"event_msg/{etype}"
        self.state.opaque[name] += 1
        return [Opaque(record_type=name, raw=payload, ts=ts)]

    def _usage(self, payload: dict[str, Any], ts: str | None) -> list[Item]:
        """Usage as deltas of ``total_token_usage``: Codex writes each ``token_count``
        event twice (and again on rate-limit updates), so summing ``last_token_usage``
        counts turns twice. The items sum to the last event's total."""
        total = get(payload, "info", "total_token_usage")
        if not isinstance(total, dict):
            last = get(payload, "info", "last_token_usage")
            if not isinstance(last, dict):
                self.state.skipped["usage-without-info"] += 1
                return []
            before = self.state.extra.get("usage_total") or [0, 0, 0, 0]
            total = {  # an older rollout with per-call usage only: add it up
                name: to_int(last.get(name)) + before[i] for i, name in enumerate(_USAGE_FIELDS)
            }
        now = [to_int(total.get(name)) for name in _USAGE_FIELDS]
        before = self.state.extra.get("usage_total") or [0, 0, 0, 0]
        self.state.extra["usage_total"] = now
        delta = [a - b for a, b in zip(now, before, strict=True)]
        if not any(delta):
            self.state.skipped["usage-repeated"] += 1
            return []
        return [
            Usage(
                model=to_str(self.state.facts.get("model")),
                input=delta[0],
                output=delta[1],
                cache_read=delta[2],
                reasoning=delta[3],
                ts=ts,
            )
        ]


def _same_text(copy: str, typed: str) -> bool:
    """The model's copy of a prompt is its text with image tags around the pictures."""
    return " ".join(_IMAGE_TAG.sub(" ", copy).split()) == " ".join(
        _IMAGE_TAG.sub(" ", typed).split()
    )


def _image(url: str, ts: Any) -> Image:
    """An attached image: its type, size and hash (a data URL), or only its name."""
    match = _DATA_URL.match(url)
    if match is None:
        return Image(ts=ts)
    data = url[match.end() :].encode("ascii", "replace")
    return Image(
        media_type=match.group(1),
        bytes=len(data) * 3 // 4,
        sha256=hashlib.sha256(data).hexdigest() if data else None,
        ts=ts,
    )


def _shell_patch(data: Any) -> str | None:
    """The patch of a shell call that runs ``apply_patch`` (a heredoc in ``bash -lc``, as
    Codex's models write it when the shell is their only tool), else None."""
    if not isinstance(data, dict):
        return None
    for key in _SHELL_KEYS:
        command = data.get(key)
        text = " ".join(str(c) for c in command) if isinstance(command, list) else command
        if isinstance(text, str) and "apply_patch" in text and "*** Begin Patch" in text:
            return text
    return None


def _failed(output: str) -> bool:
    """Whether a tool's output says it failed: a non-zero exit code, in the JSON envelope
    of the shell tools (``{"output", "metadata": {"exit_code"}}``) or in the text header
    newer versions write (``Exit code: N``)."""
    head = output.lstrip()[:200]
    if head.startswith("{") and '"exit_code"' in output:
        data = json_text(output)
        code = get(data, "metadata", "exit_code") if isinstance(data, dict) else None
        return isinstance(code, int) and code != 0
    match = _EXIT_CODE.search(head)
    return match is not None and match.group(1) != "0"
