"""Drafts from git commits whose message says *why* (``lifeline-mesh capture``). Pure.

Only the commit message is read, never the diff: its subject becomes the summary, its body
— without trailers such as ``Signed-off-by:`` — the why. A commit without a body says no
why, so it gives no draft (nothing is invented). The kind follows the conventional-commit
prefix. Each draft's dedup key is the commit's full sha, so capturing again, after an
approval or a rejection, proposes nothing twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lifeline.ledger import Draft

__all__ = [
    "AGENT",
    "GIT_LOG_FORMAT",
    "Commit",
    "commit_draft",
    "kind_of",
    "parse_git_log",
    "why_of",
]

AGENT = "git-capture"
# sha, author, subject, body; unit separator between fields, record separator after each
GIT_LOG_FORMAT = "%H%x1f%an%x1f%s%x1f%b%x1e"
_TRAILER = re.compile(r"^[A-Za-z][A-Za-z0-9-]*: .+$|^\(cherry picked from commit [0-9a-f]+\)$")
_PREFIX = re.compile(r"^(\w+)(?:\([^)]*\))?!?:\s")
_KINDS = {
    "feat": "feature",
    "fix": "fix",
    "test": "test",
    "perf": "decision",
    "refactor": "decision",
    "revert": "note",
}


@dataclass(frozen=True, slots=True)
class Commit:
    sha: str
    author: str
    subject: str
    body: str


def parse_git_log(text: str) -> list[Commit]:
    """Commits of ``git log --format=GIT_LOG_FORMAT`` output, oldest first."""
    out: list[Commit] = []
    for record in text.split("\x1e"):
        parts = record.strip("\n").split("\x1f")
        if len(parts) == 4 and re.fullmatch(r"[0-9a-f]{40,64}", parts[0]):
            out.append(Commit(parts[0], parts[1].strip(), parts[2].strip(), parts[3]))
    out.reverse()  # git log lists the newest first
    return out


def why_of(body: str) -> str:
    """The body without its trailing trailer block (and without edge blank lines)."""
    lines = body.strip().splitlines()
    end = len(lines)
    while end and (_TRAILER.match(lines[end - 1].strip()) or not lines[end - 1].strip()):
        end -= 1
    return "\n".join(lines[:end]).strip()


def kind_of(subject: str) -> str:
    found = _PREFIX.match(subject)
    return _KINDS.get(found.group(1).lower(), "note") if found else "note"


def commit_draft(commit: Commit) -> Draft | None:
    """The draft of one commit, or None when its message says no why."""
    why = why_of(commit.body)
    if not why or not commit.subject:
        return None
    return Draft(
        kind=kind_of(commit.subject),
        summary=commit.subject[:200],
        body=f"{why}\n\ncommit: {commit.sha}",
        author=commit.author or "unknown",
        agent=AGENT,
        provider="git",
        model="commit-message",
        dedup_key=f"git:{commit.sha}",
    )
