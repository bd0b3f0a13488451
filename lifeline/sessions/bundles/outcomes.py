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
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from lifeline.sessions.model import Context, FileEdit, Prompt, Session, ToolCall, ToolResult

__all__ = [
    "RULES_FILES",
    "Edit",
    "EditOutcome",
    "Index",
    "RulesFile",
    "call_text",
    "edit_outcomes",
    "index_of",
    "last_failure",
    "output_tail",
    "refusal_reason",
    "refused_calls",
    "rules_files",
    "unchecked_edits",
]

RULES_FILES = frozenset({"AGENTS.md", "CLAUDE.md", "CLAUDE.local.md", "GEMINI.md", "AGENT.md"})
_TAIL_CHARS = 600  # of a failed call's output: its end says why
_RULES_CHARS = 1200  # of a rules file's text
_NUMBERED = re.compile(r"^\s*\d+[→\t]", re.MULTILINE)  # Claude Code's Read line numbers
_AGENTS_CONTEXT = re.compile(r"\A# (AGENTS\.md) instructions for (\S+)")
_CLAUDE_MD = re.compile(r"Contents of (\S*?(?:CLAUDE|AGENTS|GEMINI)(?:\.local)?\.md)")
_REASON = "the user said:"
# A shell command that proves work: tests, a build, a linter or type checker, a commit.
_CHECK = re.compile(
    r"(?<![\w.-])(?:pytest|py\.test|tox|nox|mypy|pyright|ruff|flake8|pylint|tsc|eslint"
    r"|jest|vitest|mocha|phpunit|rspec|ctest|(?:python3?|uv\s+run)\s+-m\s+(?:pytest|unittest)"
    r"|make(?:\s+-\S+)*\s+(?:test|check|lint|ci|build|all)"
    r"|(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?(?:test|lint|check|build|typecheck|type-check)"
    r"|cargo\s+(?:test|check|build|clippy|nextest)|go\s+(?:test|build|vet)"
    r"|mvn\s+(?:\S+\s+)*?(?:test|verify|package)|gradlew?\s+(?:\S+\s+)*?(?:test|check|build)"
    r"|git\s+(?:-\S+\s+)*commit)(?![\w-])"
)


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


@dataclass(frozen=True, slots=True)
class Index:
    """One pass over a session's items: what the rules below look up."""

    results: dict[str, ToolResult]  # by call id (the last one wins)
    calls: list[ToolCall]  # of the main conversation
    edits: list[FileEdit]  # of the main conversation
    contexts: list[Context]  # of the main conversation


_INDEXES: dict[int, tuple[Session, Index]] = {}


def index_of(session: Session) -> Index:
    """The session's :class:`Index`, built once per session object."""
    cached = _INDEXES.get(id(session))
    if cached is not None and cached[0] is session:
        return cached[1]
    found = Index({}, [], [], [])
    for item in session.items:
        if isinstance(item, ToolResult):
            found.results[item.call_id] = item
        elif item.agent is not None:
            continue
        elif isinstance(item, ToolCall):
            found.calls.append(item)
        elif isinstance(item, FileEdit):
            found.edits.append(item)
        elif isinstance(item, Context):
            found.contexts.append(item)
    if len(_INDEXES) > 64:
        _INDEXES.clear()
    _INDEXES[id(session)] = (session, found)
    return found


def _results(session: Session) -> dict[str, ToolResult]:
    return index_of(session).results


def edit_outcomes(session: Session) -> Iterator[Edit]:
    """Each edit of the main conversation with what became of it, in file order. An edit
    stored without its call id (ingested by an earlier version) counts as done, as before."""
    results = _results(session)
    for item in index_of(session).edits:
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


def command_of(call: ToolCall) -> str:
    """The shell command a call ran ("" when it is not a shell call): Claude Code's and
    Gemini's ``command``, Codex's ``command`` list or ``cmd``."""
    if not isinstance(call.input, dict):
        return ""
    for key in ("command", "cmd"):
        value = call.input.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return " ".join(str(v) for v in value)
    return ""


def unchecked_edits(session: Session) -> list[Edit]:
    """Edits done with no successful check after them — no test run, build, linter, type
    check or commit that passed (its call answered without error): made, never proven.
    An edit whose call itself was never answered is :attr:`EditOutcome.UNCONFIRMED`."""
    index = index_of(session)
    edit_calls = {e.call_id for e in index.edits if e.call_id is not None}
    at: dict[int, int] = {}
    last_check = -1
    for position, item in enumerate(session.items):
        if item.agent is not None:
            continue
        if isinstance(item, FileEdit):
            at[id(item)] = position
        elif (
            isinstance(item, ToolCall)
            and item.call_id not in edit_calls
            and _CHECK.search(command_of(item))
        ):
            result = index.results.get(item.call_id)
            if result is not None and not result.is_error and not result.rejected:
                last_check = position
    return [
        edit
        for edit in edit_outcomes(session)
        if edit.outcome is EditOutcome.DONE and at.get(id(edit.item), -1) > last_check
    ]


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
    for item in index_of(session).calls:
        result = results.get(item.call_id)
        if result is not None and result.rejected:
            yield item, result


def last_failure(session: Session) -> tuple[ToolCall, ToolResult] | None:
    """The last call of the last turn (after the last real prompt) whose result is an
    error other than a refusal — what a crashed session was stuck on."""
    calls = {i.call_id: i for i in index_of(session).calls}
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


def _position(session: Session) -> Callable[[RulesFile], tuple[int, int]]:
    """Sort key: where the rules file's item stands in the transcript (file order)."""

    def key(rules: RulesFile) -> tuple[int, int]:
        prov = rules.item.prov
        return (prov.lines[0], 0) if prov is not None else (0, 0)

    return key


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
    index = index_of(session)
    edits = {i.call_id for i in index.edits}
    reads = []
    for call in index.calls:
        path = _read_path(call)
        result = index.results.get(call.call_id)
        if path is not None and call.call_id not in edits and result and not result.is_error:
            reads.append(RulesFile(path, _NUMBERED.sub("", _unwrap(result.output)).strip(), result))
    for context in index.contexts:
        if ".md" not in context.text:
            continue
        found = _AGENTS_CONTEXT.match(context.text) or _CLAUDE_MD.search(context.text)
        if found:
            path = found.group(1) if found.re is _CLAUDE_MD else f"{found.group(2)}/AGENTS.md"
            reads.append(RulesFile(path, context.text.strip(), context))
    for rules in sorted(reads, key=_position(session)):
        yield RulesFile(rules.path, rules.text[:_RULES_CHARS], rules.item)
