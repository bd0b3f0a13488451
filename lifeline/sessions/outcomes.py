"""What a session's tool calls did: edits done, refused, failed or never confirmed; the
last call that failed; the project's rules files the agent read. Pure, over stored items.

An edit is the change a tool call *asked* for (:class:`~lifeline.sessions.model.FileEdit`:
Claude Code ``Edit``/``Write``…, Codex ``apply_patch`` — as its own tool or as a heredoc in
a shell call —, Gemini ``write_file``/``replace``). Whether the file changed is said by the
call's result, never by the call: a crash bundle must not claim a change that does not
exist, nor miss one that does (docs/sessions.md, "Worklog").
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

from lifeline.sessions.model import Context, FileEdit, Prompt, Session, ToolCall, ToolResult

__all__ = [
    "RULES_FILES",
    "Edit",
    "EditOutcome",
    "RulesFile",
    "call_text",
    "edit_outcomes",
    "last_failure",
    "output_tail",
    "refusal_reason",
    "refused_calls",
    "rules_files",
]

RULES_FILES = frozenset({"AGENTS.md", "CLAUDE.md", "CLAUDE.local.md", "GEMINI.md", "AGENT.md"})
_TAIL_CHARS = 600  # of a failed call's output: its end says why
_RULES_CHARS = 1200  # of a rules file's text
_NUMBERED = re.compile(r"^\s*\d+[→\t]", re.MULTILINE)  # Claude Code's Read line numbers
_AGENTS_CONTEXT = re.compile(r"\A# (AGENTS\.md) instructions for (\S+)")
_CLAUDE_MD = re.compile(r"Contents of (\S*?(?:CLAUDE|AGENTS|GEMINI)(?:\.local)?\.md)")
_REASON = "the user said:"


class EditOutcome(enum.StrEnum):
    DONE = "done"  # its call was answered without error
    REFUSED = "refused"  # the user rejected the call: the file was not written
    FAILED = "failed"  # the tool answered with an error: the file was not written
    UNCONFIRMED = "unconfirmed"  # no answer recorded: the session stopped first


@dataclass(frozen=True, slots=True)
class Edit:
    item: FileEdit
    outcome: EditOutcome
    result: ToolResult | None


def _results(session: Session) -> dict[str, ToolResult]:
    return {i.call_id: i for i in session.items if isinstance(i, ToolResult)}


def edit_outcomes(session: Session) -> Iterator[Edit]:
    """Each edit of the main conversation with what became of it, in file order. An edit
    stored without its call id (ingested by an earlier version) counts as done, as before."""
    results = _results(session)
    for item in session.items:
        if not isinstance(item, FileEdit) or item.agent is not None:
            continue
        if item.call_id is None:
            yield Edit(item, EditOutcome.DONE, None)
            continue
        result = results.get(item.call_id)
        if result is None:
            outcome = EditOutcome.UNCONFIRMED
        elif result.rejected:
            outcome = EditOutcome.REFUSED
        elif result.is_error:
            outcome = EditOutcome.FAILED
        else:
            outcome = EditOutcome.DONE
        yield Edit(item, outcome, result)


def call_text(call: ToolCall, arg: str) -> str:
    return f"{call.name}({arg})"


def refusal_reason(result: ToolResult) -> str:
    """What the user said when refusing, when the tool recorded it (else "")."""
    text = result.output
    at = text.find(_REASON)
    return " ".join(text[at + len(_REASON) :].split()) if at >= 0 else ""


def refused_calls(session: Session) -> Iterator[tuple[ToolCall, ToolResult]]:
    """The main conversation's calls the user refused, in order."""
    results = _results(session)
    for item in session.items:
        if isinstance(item, ToolCall) and item.agent is None:
            result = results.get(item.call_id)
            if result is not None and result.rejected:
                yield item, result


def last_failure(session: Session) -> tuple[ToolCall, ToolResult] | None:
    """The last call of the last turn (after the last real prompt) whose result is an
    error other than a refusal — what a crashed session was stuck on."""
    calls = {i.call_id: i for i in session.items if isinstance(i, ToolCall) and i.agent is None}
    for item in reversed(session.items):
        if isinstance(item, Prompt) and item.agent is None and item.text:
            return None
        if (
            isinstance(item, ToolResult)
            and item.agent is None
            and item.is_error
            and not item.rejected
            and item.call_id in calls
        ):
            return calls[item.call_id], item
    return None


def output_tail(output: str) -> str:
    """The end of a tool's output (where a failure says why), at most ~600 characters."""
    text = _unwrap(output).strip()
    if len(text) <= _TAIL_CHARS:
        return text
    return "…" + text[-_TAIL_CHARS:]


def _unwrap(output: str) -> str:
    """The text inside the JSON envelopes Codex (``{"output": …}``) and Gemini
    (``[{"functionResponse": {"response": {"output"|"error": …}}}]``) store."""
    head = output.lstrip()[:1]
    if head not in ("{", "["):
        return output
    try:
        data = json.loads(output)
    except ValueError:  # cut at the storage cap: the string the envelope starts with
        return _cut_string(output) or output
    if isinstance(data, list) and data and isinstance(data[0], dict):
        data = data[0].get("functionResponse", {}).get("response", data[0])
    if isinstance(data, dict):
        for key in ("output", "error"):
            if isinstance(data.get(key), str):
                return str(data[key])
    return output


_STRING_START = re.compile(r'"(?:output|error)": ?"')
_TRUNCATED = "\n[TRUNCATED: "


def _cut_string(output: str) -> str | None:
    """The ``output``/``error`` string of a JSON envelope whose end was cut off."""
    found = _STRING_START.search(output)
    if found is None:
        return None
    start = found.end() - 1  # the opening quote
    try:
        whole, _ = json.JSONDecoder().raw_decode(output, start)
    except ValueError:
        pass
    else:
        return whole if isinstance(whole, str) else None
    body = output[start + 1 :].split(_TRUNCATED, 1)[0]
    for end in range(len(body), max(len(body) - 8, -1), -1):  # drop a half escape
        try:
            text = json.loads('"' + body[:end] + '"')
        except ValueError:
            continue
        return text if isinstance(text, str) else None
    return None


@dataclass(frozen=True, slots=True)
class RulesFile:
    path: str
    text: str
    item: ToolResult | Context


def _read_path(call: ToolCall) -> str | None:
    if not isinstance(call.input, dict):
        return None
    for key in ("file_path", "absolute_path", "path"):
        value = call.input.get(key)
        if isinstance(value, str) and value.rsplit("/", 1)[-1] in RULES_FILES:
            return value
    return None


def rules_files(session: Session) -> Iterator[RulesFile]:
    """The project's rules files (AGENTS.md, CLAUDE.md, GEMINI.md…) the session saw: read
    through a tool, or injected as context (Codex's "# AGENTS.md instructions for …",
    Claude Code's "Contents of …/CLAUDE.md"). Text as the transcript holds it."""
    calls: dict[str, str] = {}
    edits = {i.call_id for i in session.items if isinstance(i, FileEdit)}
    for item in session.items:
        if item.agent is not None:
            continue
        if isinstance(item, ToolCall):
            path = _read_path(item)
            if path is not None and item.call_id not in edits:
                calls[item.call_id] = path
        elif isinstance(item, ToolResult) and item.call_id in calls and not item.is_error:
            text = _NUMBERED.sub("", _unwrap(item.output)).strip()
            yield RulesFile(calls.pop(item.call_id), text[:_RULES_CHARS], item)
        elif isinstance(item, Context):
            found = _AGENTS_CONTEXT.match(item.text) or _CLAUDE_MD.search(item.text)
            if found:
                path = found.group(1) if found.re is _CLAUDE_MD else f"{found.group(2)}/AGENTS.md"
                yield RulesFile(path, item.text.strip()[:_RULES_CHARS], item)
