"""Duplicate-scope merge: which sessions are one piece of work.

The dedup key is ``sha256(scope + "\\n" + topic)`` (first 16 hex digits), where ``scope`` is
the machine-independent scope (``lifeline.sessions.scope``) and ``topic`` a stable slug in
any script: the user-set title when there is one, else a slug of the first sentence of the
first real prompt (at most eight words; 16 characters of Chinese, Japanese, Thai…), else
the session itself (no prompt, or one too short to name a piece of work). Tool-generated
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
_UNITS = 2 * _WORDS  # a spaced word costs 2, a character of an unspaced script 1
_MAX_CHARS = 80
_MIN_UNITS = 4  # "hi", "continue", "test": not a topic (two words, or four CJK characters)
# Scripts written without spaces between words: a run of them is cut by characters.
_UNSPACED = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0x20000, 0x3FFFF),  # CJK extensions B…
)
_SENTENCE = re.compile(r"(?<=[.!?])\s|(?<=[。！？])|\n")
_CONTINUING = re.compile(r"^# Continuing: (\S+)")


def _unspaced(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _UNSPACED)


def _words(text: str) -> list[str]:
    """Runs of letters, marks and digits (any script); an unspaced script's run is split
    into its characters, each a word of its own."""
    words: list[str] = []
    current = ""
    for char in text:
        if unicodedata.category(char)[0] in "LMN" and not _unspaced(char):
            current += char
            continue
        if current:
            words.append(current)
            current = ""
        if _unspaced(char):
            words.append(char)
    if current:
        words.append(current)
    return words


def slug(text: str, words: int = _WORDS) -> str:
    """A topic in any script: NFKC-normalized, case-folded words joined by ``-`` (markup and
    punctuation gone). At most ``words`` words; a script written without spaces (Chinese,
    Japanese, Thai…) counts each character as half a word, so 16 characters at most; never
    more than 80 characters. Characters of unspaced scripts are joined without ``-``."""
    units, kept = 0, []
    for word in _words(unicodedata.normalize("NFKC", text).casefold()):
        cost = 1 if len(word) == 1 and _unspaced(word) else 2
        if units + cost > 2 * words:
            break
        units += cost
        kept.append(word)
    out = ""
    for i, word in enumerate(kept):
        glue = i and not (_unspaced(word[0]) and _unspaced(kept[i - 1][-1]))
        if len(out) + len(word) + bool(glue) > _MAX_CHARS:
            break
        out += ("-" if glue else "") + word
    return out


def topic_of(session: Session) -> tuple[str, str]:
    """(topic slug, where it came from: ``title`` | ``first prompt`` | ``bundle`` |
    ``session``). A session with no usable topic (no prompt, or a first prompt too short
    to name a piece of work, e.g. "hi" or "continue") is a topic of its own: unrelated
    sessions never merge because they said little."""
    facts = session.facts
    if facts.title and facts.title_user_set and _substantial(slug(facts.title)):
        return slug(facts.title), "title"
    prompt = (facts.first_prompt or "").strip()
    resumed = _CONTINUING.match(prompt)
    if resumed:  # a session started from a bundle continues that bundle's topic
        return resumed.group(1), "bundle"
    first = _SENTENCE.split(prompt, maxsplit=1)[0]
    if _substantial(slug(first)):
        return slug(first), "first prompt"
    return f"session:{session.tool.value}:{session.native_id}", "session"


def _substantial(topic: str) -> bool:
    units = 0
    for word in topic.split("-"):
        plain = "".join(c for c in word if not _unspaced(c))
        units += 2 * bool(plain) + (len(word) - len(plain))
    return units >= _MIN_UNITS


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
