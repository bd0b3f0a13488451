"""Distillation: sessions in, an unfitted :class:`Bundle` out. Deterministic and offline.

Every fact is taken from the sessions' own items by fixed rules (no model, no network, no
clock): the same sessions give the same bundle on every node. The rules live in
:class:`RuleExtractor`; :class:`Extractor` is the port a model-based extractor could fill
later (none ships). Sessions are read oldest first (by start time, then id).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from lifeline.sessions.bundles.bundle import Bundle, Fact, Slice, SliceKind, Source
from lifeline.sessions.bundles.outcomes import (
    EditOutcome,
    call_text,
    edit_outcomes,
    index_of,
    last_failure,
    output_tail,
    refusal_reason,
    refused_calls,
    rules_files,
    unchecked_edits,
)
from lifeline.sessions.model import (
    ErrorItem,
    FileEdit,
    Item,
    Prompt,
    Reply,
    Session,
    SessionStatus,
    ToolCall,
)
from lifeline.sessions.scope import home_normalized
from lifeline.wording import count

__all__ = ["READS", "Extractor", "Inputs", "RuleExtractor", "distill", "real_prompts"]

# The item kinds distillation (and the working tree beside it) reads: a bundle's sessions
# are loaded with these only (lifeline.sessions.bundles.resume). An extractor that reads another
# kind adds it here.
READS = frozenset(
    {"prompt", "context", "reply", "tool_call", "tool_result", "file_edit", "todos", "error"}
)

_RULE = re.compile(
    r"\b(must|never|always|do not|don't|dont|avoid|make sure|ensure|should not|shouldn't|"
    r"without|only use|keep (?:the|it|them)|no new)\b",
    re.IGNORECASE,
)
_CRITERIA = re.compile(
    r"\b(tests? (?:must |should )?pass|until|success|done when|acceptance|so that|"
    r"expected (?:output|result)|should (?:return|print|show|work))\b",
    re.IGNORECASE,
)
_NO_TOUCH = re.compile(
    r"\b(?:do not|don't|dont|never|without)\s+(?:touch|touching|modify|modifying|edit|editing|"
    r"change|changing|delete|deleting)\s+[`'\"]?([\w./-]+\.[A-Za-z0-9]+|[\w./-]+/)",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_PATH_KEYS = ("file_path", "path", "notebook_path", "filename")
_MAX_RULES = 40


@dataclass(frozen=True, slots=True)
class Inputs:
    """What the bundle is built from: the sessions (with items) and the merge facts."""

    sessions: Sequence[Session]
    key: str
    scope: str
    topic: str
    topic_from: str  # "title" | "first prompt" | "none"
    excluded: tuple[str, ...] = ()
    other_topics: tuple[str, ...] = ()
    decisions: tuple[tuple[str, str], ...] = ()  # (entry id, text) of ledger decisions in force


class Extractor(Protocol):
    """Fills the Contract, Intent and Worklog groups from the sessions' items."""

    def contract(self, inputs: Inputs) -> dict[str, list[Fact]]: ...

    def intent(self, inputs: Inputs) -> dict[str, list[Fact]]: ...

    def worklog(self, inputs: Inputs) -> dict[str, list[Fact]]: ...


_SOURCES: dict[int, tuple[Item, tuple[Source, ...]]] = {}


def source(session: Session, item: Item) -> tuple[Source, ...]:
    """The citation of ``item`` (one per item object: a prompt is cited by several rules)."""
    cached = _SOURCES.get(id(item))
    if cached is not None and cached[0] is item:
        return cached[1]
    prov = item.prov
    found = (
        (Source(session.tool, session.id, prov.native_ids, prov.lines, prov.sha256),)
        if prov is not None
        else ()
    )
    if len(_SOURCES) > 100_000:
        _SOURCES.clear()
    _SOURCES[id(item)] = (item, found)
    return found


_PROMPTS: dict[int, tuple[Session, list[Prompt]]] = {}


def real_prompts(session: Session) -> list[Prompt]:
    """The prompts a human typed in the main conversation (not in a sidechain)."""
    cached = _PROMPTS.get(id(session))
    if cached is not None and cached[0] is session:
        return cached[1]
    found = [i for i in session.items if isinstance(i, Prompt) and i.agent is None and i.text]
    if len(_PROMPTS) > 64:
        _PROMPTS.clear()
    _PROMPTS[id(session)] = (session, found)
    return found


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if 8 <= len(s.strip()) <= 400]


def _call_arg(call: ToolCall) -> str:
    if isinstance(call.input, dict):
        for key in (*_PATH_KEYS, "command", "cmd", "pattern", "description", "query"):
            value = call.input.get(key)
            if isinstance(value, str):
                return value.splitlines()[0][:160] if value else ""
            if isinstance(value, list):
                return " ".join(str(v) for v in value)[:160]
    return ""


class RuleExtractor:
    """The shipped extractor: fixed text rules over the user's own words and the items."""

    def contract(self, inputs: Inputs) -> dict[str, list[Fact]]:
        rules: list[Fact] = []
        no_touch: list[Fact] = []
        criteria: list[Fact] = []
        seen: set[str] = set()
        for session in inputs.sessions:
            for prompt in real_prompts(session):
                for sentence in _sentences(prompt.text):
                    key = sentence.lower()
                    if key in seen:
                        continue
                    seen.add(key)
                    for match in _NO_TOUCH.finditer(sentence):
                        no_touch.append(Fact(match.group(1), "file", source(session, prompt)))
                    if _CRITERIA.search(sentence):
                        criteria.append(Fact(sentence, "user", source(session, prompt)))
                    elif _RULE.search(sentence):
                        rules.append(Fact(sentence, "user", source(session, prompt)))
        decisions = [Fact(text, f"decision {eid[:12]}") for eid, text in inputs.decisions]
        return {
            "decisions": decisions,
            "do_not_touch": no_touch,
            "refused": _refused(inputs.sessions),
            "rules_files": _rules_files(inputs.sessions),
            "rules": rules[:_MAX_RULES],
            "success_criteria": criteria[:_MAX_RULES],
        }

    def intent(self, inputs: Inputs) -> dict[str, list[Fact]]:
        prompts: list[Fact] = []
        seen: set[str] = set()
        for session in inputs.sessions:
            for prompt in real_prompts(session):
                if prompt.steering:
                    continue
                text = " ".join(prompt.text.split())
                if text in seen:  # merged sessions repeat their shared opening
                    continue
                seen.add(text)
                prompts.append(Fact(prompt.text, prompt.ts or "", source(session, prompt)))
        if not prompts:
            return {"goal": [], "latest": [], "history": []}
        goal, latest = prompts[0], prompts[-1]
        return {
            "goal": [goal],
            "latest": [latest] if len(prompts) > 1 else [],
            "history": prompts[1:-1],
        }

    def worklog(self, inputs: Inputs) -> dict[str, list[Fact]]:
        groups: dict[str, list[Fact]] = {
            "outstanding": [],
            "unanswered_calls": [],
            "queued_input": [],
            "errors": [],
            "last_failure": [],
            "last_reply": [],
            "edits_unconfirmed": [],
            "edits_unchecked": [],
            "edits": [],
            "edits_failed": [],
            "done": [],
        }
        for session in inputs.sessions:
            _worklog_of(session, groups, many=len(inputs.sessions) > 1)
        return groups


def _worklog_of(session: Session, groups: dict[str, list[Fact]], many: bool) -> None:
    tag = f"{session.id[:8]} " if many else ""
    todos = session.todos()
    if todos is not None:
        for todo in todos.items:
            group = "done" if todo.status == "completed" else "outstanding"
            groups[group].append(Fact(todo.content, tag + todo.status, source(session, todos)))
    found = index_of(session)
    for call in found.calls:
        if call.call_id not in found.results:
            text = f"{call.name}({_call_arg(call)})"
            groups["unanswered_calls"].append(Fact(text, tag.strip(), source(session, call)))
    last_reply = -1
    for at in range(len(session.items) - 1, -1, -1):  # from the end: the last reply
        item = session.items[at]
        if isinstance(item, Reply) and item.agent is None:
            last_reply = at
            break
    tail = session.items[last_reply + 1 :]
    for item in tail:
        if isinstance(item, Prompt) and item.agent is None and item.text:
            label = tag + ("queued" if item.steering else "unanswered")
            groups["queued_input"].append(Fact(item.text, label.strip(), source(session, item)))
        elif isinstance(item, ErrorItem) and item.agent is None:
            text = f"{item.error}{f' {item.status}' if item.status else ''}: {item.text}"
            groups["errors"].append(Fact(text, tag.strip(), source(session, item)))
    if last_reply >= 0 and session.status.status is not SessionStatus.COMPLETE:
        reply = session.items[last_reply]
        assert isinstance(reply, Reply)
        groups["last_reply"].append(Fact(reply.text, tag.strip(), source(session, reply)))
    if session.status.status is not SessionStatus.COMPLETE:
        failed = last_failure(session)
        if failed is not None:
            call, result = failed
            said = output_tail(result.output) or "(failed with no output)"
            text = f"{call_text(call, _call_arg(call))} → {said}"
            groups["last_failure"].append(Fact(text, tag.strip(), source(session, result)))
    _edits_of(session, groups, tag.strip())


def _edits_of(session: Session, groups: dict[str, list[Fact]], tag: str) -> None:
    """Edits by what became of them: done (counted per file), failed, never confirmed.
    Refused ones are the Contract's (the user said no)."""
    done: dict[str, tuple[int, FileEdit]] = {}
    for edit in edit_outcomes(session):
        item, shown = edit.item, home_normalized(edit.item.path, home="")
        if edit.outcome is EditOutcome.DONE:
            count = done[item.path][0] + 1 if item.path in done else 1
            done[item.path] = (count, item)
        elif edit.outcome is EditOutcome.FAILED and edit.result is not None:
            why = output_tail(edit.result.output).splitlines()
            text = f"{shown} ({item.tool_name} failed: {why[-1] if why else 'error'})"
            groups["edits_failed"].append(Fact(text, tag, source(session, edit.result)))
        elif edit.outcome is EditOutcome.UNCONFIRMED:
            text = (
                f"{shown} ({item.tool_name} asked for it; no result was recorded: "
                "check the file before relying on it)"
            )
            groups["edits_unconfirmed"].append(Fact(text, tag, source(session, item)))
    for path, (count, item) in done.items():
        shown = home_normalized(path, home="")
        groups["edits"].append(Fact(f"{shown} ({count}×)", tag, source(session, item)))
    unchecked: dict[str, FileEdit] = {e.item.path: e.item for e in unchecked_edits(session)}
    for path, item in unchecked.items():  # the path alone: an omission marker names it
        shown = home_normalized(path, home="")
        groups["edits_unchecked"].append(Fact(shown, tag, source(session, item)))


def _refused(sessions: Sequence[Session]) -> list[Fact]:
    """Calls the user refused (edits above all): constraints for whoever continues."""
    facts = []
    for session in sessions:
        for call, result in refused_calls(session):
            reason = refusal_reason(result)
            text = f"{call_text(call, _call_arg(call))}: refused by the user, not done"
            text += f"; the user said: {reason}" if reason else "; do not redo it without asking"
            facts.append(Fact(text, "refused", source(session, result)))
    return facts


def _rules_files(sessions: Sequence[Session]) -> list[Fact]:
    """The rules files the sessions saw, the latest text of each path."""
    found: dict[str, Fact] = {}
    for session in sessions:
        for rules in rules_files(session):
            path = home_normalized(rules.path, home="")
            found.pop(path, None)
            found[path] = Fact(f"{path}: {rules.text}", "rules file", source(session, rules.item))
    return list(found.values())


def _touched(sessions: Sequence[Session]) -> list[Fact]:
    """Files read or edited, most recently touched last, one fact each."""
    found: dict[str, tuple[Session, Item]] = {}
    normal: dict[str, str] = {}
    for session in sessions:
        for item in session.items:
            path = None
            if isinstance(item, FileEdit):
                path = item.path
            elif isinstance(item, ToolCall) and isinstance(item.input, dict):
                for key in _PATH_KEYS:
                    value = item.input.get(key)
                    if isinstance(value, str):
                        path = value
                        break
            if path:
                if path not in normal:  # the same on every node
                    normal[path] = home_normalized(path, home="")
                path = normal[path]
                found.pop(path, None)
                found[path] = (session, item)
    return [Fact(path, "", source(s, item)) for path, (s, item) in found.items()]


def _context(inputs: Inputs) -> Slice:
    latest = inputs.sessions[-1]
    facts = latest.facts
    tools = sorted({f"{s.tool.value} {s.facts.version or ''}".strip() for s in inputs.sessions})
    models = sorted({s.facts.model for s in inputs.sessions if s.facts.model})
    return Slice(
        SliceKind.CONTEXT,
        fields={
            "scope": inputs.scope,
            "cwd": facts.cwd,
            "branch": facts.git_branch,
            "remote": facts.git_remote,
            "commit_at_start": next(
                (s.facts.git_commit for s in inputs.sessions if s.facts.git_commit), None
            ),
            "commit_at_end": next(
                (
                    s.facts.git_commit_end
                    for s in reversed(inputs.sessions)
                    if s.facts.git_commit_end
                ),
                None,
            ),
            "tools": tools,
            "models": models,
        },
        groups={"files": _touched(inputs.sessions)},
    )


def _acceptance(inputs: Inputs) -> Slice:
    turns = sum(len(real_prompts(s)) for s in inputs.sessions)
    why: list[str] = []
    if not inputs.sessions:
        why.append("no session to resume")
    elif turns == 0:
        why.append("no real user turn: the session was opened but never given a prompt")
    statuses = [f"{s.id[:12]} {s.status.status.value}: {s.status.reason}" for s in inputs.sessions]
    return Slice(
        SliceKind.ACCEPTANCE,
        fields={
            "ready": not why,
            "scope_sized": True,
            "user_turns": turns,
            "sessions": len(inputs.sessions),
            "why_not_ready": why,
        },
        groups={"status": [Fact(s) for s in statuses]},
    )


def _dedup(inputs: Inputs) -> Slice:
    rows = [
        Fact(
            f"{s.id} {s.tool.value} {s.native_id} {s.facts.started or '?'} → "
            f"{s.facts.last_activity or '?'} {s.status.status.value}, {count(s.turns, 'turn')}",
        )
        for s in inputs.sessions
    ]
    return Slice(
        SliceKind.DEDUP,
        fields={
            "key": inputs.key,
            "topic": inputs.topic,
            "topic_from": inputs.topic_from,
            "excluded": list(inputs.excluded),
        },
        groups={"manifest": rows, "other_topics": [Fact(t) for t in inputs.other_topics]},
    )


def distill(inputs: Inputs, budget: int, unit: str, extractor: Extractor | None = None) -> Bundle:
    """The whole, unfitted bundle for ``inputs`` (see :func:`fitting.fit_bundle`)."""
    ex = extractor or RuleExtractor()
    slices = {
        SliceKind.ACCEPTANCE: _acceptance(inputs),
        SliceKind.CONTRACT: Slice(SliceKind.CONTRACT, groups=ex.contract(inputs)),
        SliceKind.CONTEXT: _context(inputs) if inputs.sessions else Slice(SliceKind.CONTEXT),
        SliceKind.INTENT: Slice(SliceKind.INTENT, groups=ex.intent(inputs)),
        SliceKind.PROVENANCE: Slice(SliceKind.PROVENANCE),
        SliceKind.WORKLOG: Slice(SliceKind.WORKLOG, groups=ex.worklog(inputs)),
        SliceKind.DEDUP: _dedup(inputs),
    }
    return Bundle(inputs.key, inputs.scope, inputs.topic, slices, budget, unit)
