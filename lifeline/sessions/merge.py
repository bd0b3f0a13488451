"""Duplicate-scope merge: which sessions are one piece of work.

The dedup key is ``sha256(scope + "\\n" + topic)`` (first 16 hex digits), where ``scope`` is
the machine-independent scope (``lifeline.sessions.scope``) and ``topic`` a stable slug: the
user-set title when there is one, else a slug of the first sentence of the first real
prompt (at most eight words). Tool-generated
titles (Claude's ``ai-title``) are rewritten as a session goes on, so they are never used.
Sessions sharing a key — from any tool, on any node — fold into one bundle. Subagent
sessions are never grouped on their own: they belong to the session that ran them.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from lifeline.sessions.model import Session

__all__ = ["Group", "dedup_key", "groups_of", "is_subagent", "slug", "topic_of"]

_WORDS = 8


def slug(text: str, words: int = _WORDS) -> str:
    """Lowercase ASCII words joined by ``-``: accents folded, punctuation and markup gone."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    tokens = re.findall(r"[a-z0-9]+", folded.lower())
    return "-".join(tokens[:words])


def topic_of(session: Session) -> tuple[str, str]:
    """(topic slug, where it came from: ``title`` | ``first prompt`` | ``none``)."""
    facts = session.facts
    if facts.title and facts.title_user_set and slug(facts.title):
        return slug(facts.title), "title"
    first = re.split(r"(?<=[.!?])\s|\n", (facts.first_prompt or "").strip(), maxsplit=1)[0]
    if slug(first):
        return slug(first), "first prompt"
    return "", "none"


def dedup_key(scope: str, topic: str) -> str:
    return hashlib.sha256(f"{scope}\n{topic}".encode()).hexdigest()[:16]


def is_subagent(session: Session) -> bool:
    return bool(session.facts.agent_id or session.facts.parent_session)


@dataclass(frozen=True, slots=True)
class Group:
    key: str
    scope: str
    topic: str
    topic_from: str
    sessions: tuple[Session, ...]  # oldest first

    @property
    def last_activity(self) -> str:
        return max(s.facts.last_activity or s.facts.started or "" for s in self.sessions)


def _order(session: Session) -> tuple[str, str]:
    return (session.facts.started or "", session.id)


def groups_of(sessions: Iterable[Session]) -> list[Group]:
    """The sessions (summaries suffice) by dedup key, most recently active group first."""
    by_key: dict[str, list[tuple[Session, str, str]]] = {}
    for session in sessions:
        if is_subagent(session):
            continue
        topic, origin = topic_of(session)
        key = dedup_key(session.scope, topic)
        by_key.setdefault(key, []).append((session, topic, origin))
    groups = []
    for key, members in by_key.items():
        members.sort(key=lambda m: _order(m[0]))
        origins = sorted({m[2] for m in members})
        groups.append(
            Group(
                key,
                members[0][0].scope,
                members[0][1],
                "+".join(origins),
                tuple(m[0] for m in members),
            )
        )
    groups.sort(key=lambda g: (g.last_activity, g.key), reverse=True)
    return groups
