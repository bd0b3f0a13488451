"""Lost-work recovery: the sessions of a line that stopped with work outstanding.

A session is unfinished when its stored verdict is ``crashed`` or ``interrupted``, or —
*abandoned* — when it ended cleanly but its latest todo list still has items not
completed. Sessions being written to right now (``live``) are left out: they are not lost
yet. Subagent sessions and sessions with no real prompt are left out too. Newest first.

Each carries what a person picking it up needs first, taken from the bundle's worklog:
the **unconfirmed edits** — edits whose call was never answered, and edits done with no
test run, build, linter, type check or commit passing after them
(:func:`~lifeline.sessions.bundles.outcomes.unchecked_edits`) — and the **last failure**: the
failing tool call of the last turn with the end of its output, else the last error
recorded after the last reply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lifeline.sessions.bundles.distill import Inputs, RuleExtractor
from lifeline.sessions.bundles.merge import dedup_key, is_subagent, topic_of
from lifeline.sessions.bundles.resume import stored_verdict
from lifeline.sessions.catalogue import Catalogue, filter_sessions
from lifeline.sessions.model import Session, SessionStatus

__all__ = ["Unfinished", "unfinished"]

_GROUPS = ("outstanding", "unanswered_calls", "queued_input", "errors")
_UNCHECKED = "(no test, build or commit passed after it)"


@dataclass(frozen=True, slots=True)
class Unfinished:
    session: Session
    state: str  # crashed | interrupted | abandoned
    key: str
    outstanding: dict[str, list[str]]
    unconfirmed_edits: list[str]
    last_failure: str | None

    def as_json(self) -> dict[str, Any]:
        s = self.session
        return {
            "id": s.id,
            "tool": s.tool.value,
            "native_id": s.native_id,
            "state": self.state,
            "reason": s.status.reason,
            "scope": s.scope,
            "key": self.key,
            "title": s.facts.title or s.facts.first_prompt or "",
            "started": s.facts.started,
            "last_activity": s.facts.last_activity,
            "turns": s.turns,
            "outstanding": self.outstanding,
            "unconfirmed_edits": self.unconfirmed_edits,
            "last_failure": self.last_failure,
        }


def _worklog(session: Session) -> tuple[dict[str, list[str]], list[str], str | None]:
    """Outstanding groups, unconfirmed edits and the last failure, from the worklog."""
    inputs = Inputs(sessions=[session], key="", scope=session.scope, topic="", topic_from="")
    groups = RuleExtractor().worklog(inputs)
    outstanding = {g: [_flat(f.text, 200) for f in groups[g]] for g in _GROUPS if groups[g]}
    edits = [_flat(f.text, 300) for f in groups["edits_unconfirmed"]]
    edits += [f"{_flat(f.text, 300)} {_UNCHECKED}" for f in groups["edits_unchecked"]]
    failed = groups["last_failure"] or groups["errors"][-1:]
    return outstanding, edits, _flat(failed[-1].text, 800) if failed else None


def _flat(text: str, size: int) -> str:
    return " ".join(text.split())[:size]


def _newest(u: Unfinished) -> tuple[str, str]:
    facts = u.session.facts
    return (facts.last_activity or facts.started or "", u.session.id)


async def unfinished(catalogue: Catalogue, scope: str | None = None) -> list[Unfinished]:
    """The unfinished sessions of the line (within ``scope``), newest first."""
    found: list[Unfinished] = []
    for summary in filter_sessions(catalogue.summaries(), scope=scope):
        if summary.status.status is SessionStatus.LIVE or is_subagent(summary) or not summary.turns:
            continue
        stored = stored_verdict(catalogue, summary).status.status
        session = stored_verdict(catalogue, await catalogue.session(summary.id))
        outstanding, edits, failure = _worklog(session)
        if stored is SessionStatus.COMPLETE:
            if not outstanding.get("outstanding"):
                continue
            state = "abandoned"
        else:
            state = stored.value
        key = dedup_key(session.scope, topic_of(session)[0])
        found.append(Unfinished(session, state, key, outstanding, edits, failure))
    found.sort(
        key=lambda u: (
            u.session.facts.last_activity or u.session.facts.started or "",
            u.session.id,
        ),
        reverse=True,
    )
    return found
