"""Lost-work recovery: the sessions of a line that stopped with work outstanding.

A session is unfinished when its stored verdict is ``crashed`` or ``interrupted``, or —
*abandoned* — when it ended cleanly but its latest todo list still has items not
completed. Sessions being written to right now (``live``) are left out: they are not lost
yet. Subagent sessions and sessions with no real prompt are left out too. Newest first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lifeline.sessions.catalogue import Catalogue, filter_sessions
from lifeline.sessions.distill import Inputs, RuleExtractor
from lifeline.sessions.merge import dedup_key, is_subagent, topic_of
from lifeline.sessions.model import Session, SessionStatus
from lifeline.sessions.resume import stored_verdict

__all__ = ["Unfinished", "unfinished"]

_GROUPS = ("outstanding", "unanswered_calls", "queued_input", "errors")


@dataclass(frozen=True, slots=True)
class Unfinished:
    session: Session
    state: str  # crashed | interrupted | abandoned
    key: str
    outstanding: dict[str, list[str]]

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
        }


def _outstanding(session: Session) -> dict[str, list[str]]:
    inputs = Inputs(sessions=[session], key="", scope=session.scope, topic="", topic_from="")
    groups = RuleExtractor().worklog(inputs)
    return {g: [" ".join(f.text.split())[:200] for f in groups[g]] for g in _GROUPS if groups[g]}


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
        outstanding = _outstanding(session)
        if stored is SessionStatus.COMPLETE:
            if not outstanding.get("outstanding"):
                continue
            state = "abandoned"
        else:
            state = stored.value
        key = dedup_key(session.scope, topic_of(session)[0])
        found.append(Unfinished(session, state, key, outstanding))
    found.sort(
        key=lambda u: (
            u.session.facts.last_activity or u.session.facts.started or "",
            u.session.id,
        ),
        reverse=True,
    )
    return found
