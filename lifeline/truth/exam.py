"""The context-health exam: would a fresh agent reading this line's context learn *what*
the project is, *why* it is so, what was *decided*, and what comes *next*?

Four checks of 25 points each, computed from the truth of the line (pure, no I/O), each
with the concrete gaps that cost points and the command that closes them. ``lifeline exam``
prints it; ``--min`` turns it into a gate for CI.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lifeline.truth.state import State
from lifeline.truth.views import Truth
from lifeline.wording import count

__all__ = ["CHECK_POINTS", "Check", "Exam", "Gap", "examine"]

CHECK_POINTS = 25
SHOWN_GAPS = 10  # per check; the count says how many there are in all


@dataclass(frozen=True, slots=True)
class Gap:
    check: str
    entry_id: str | None
    message: str


@dataclass(slots=True)
class Check:
    name: str
    score: int
    detail: str
    gaps: list[Gap] = field(default_factory=list)


@dataclass(slots=True)
class Exam:
    checks: list[Check]

    @property
    def score(self) -> int:
        return sum(c.score for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "max": CHECK_POINTS * len(self.checks),
            "checks": [
                {"name": c.name, "score": c.score, "max": CHECK_POINTS, "detail": c.detail}
                for c in self.checks
            ],
            "gaps": [
                {"check": g.check, "id": g.entry_id, "message": g.message}
                for c in self.checks
                for g in c.gaps
            ],
        }


def _share(good: int, total: int) -> int:
    return CHECK_POINTS if total == 0 else round(CHECK_POINTS * good / total)


def _what(state: State, truth: Truth) -> Check:
    if truth.identity is None:
        gap = Gap(
            "what",
            None,
            "no bootstrap entry: a fresh agent does not learn what the project is; `lifeline "
            "log --kind bootstrap --summary 'Project: NAME' --body 'what it is, for whom'`",
        )
        return Check("what", 0, "no project identity", [gap])
    _kind, _ts, summary, why, _thread = state.items[truth.identity]
    if not why:
        gap = Gap(
            "what",
            truth.identity,
            f"the bootstrap {summary!r} has no body: say what the project is and for whom "
            f"(`lifeline correct {truth.identity[:12]} --summary ... --body ...`)",
        )
        return Check("what", CHECK_POINTS // 2, f"project: {summary}", [gap])
    return Check("what", CHECK_POINTS, f"project: {summary}")


def _why(state: State, truth: Truth) -> Check:
    bare = [d for d in truth.decisions if not state.items[d][3]]
    gaps = [
        Gap(
            "why",
            d,
            f"decision {state.items[d][2]!r} says no why: correct it with a body "
            f"(`lifeline correct {d[:12]} --summary ... --body 'because ...'`)",
        )
        for d in bare
    ]
    total = len(truth.decisions)
    detail = f"{total - len(bare)} of {count(total, 'decision')} in force {_say(total)} why"
    return Check("why", _share(total - len(bare), total), detail, gaps)


def _decided(truth: Truth) -> Check:
    if truth.decisions:
        return Check("decided", CHECK_POINTS, f"{count(len(truth.decisions), 'decision')} in force")
    gap = Gap(
        "decided",
        None,
        "no decision in force: record the choices already made "
        "(`lifeline log --kind decision --summary 'Database: PostgreSQL' --body 'because ...'`)",
    )
    return Check("decided", 0, "no decision in force", [gap])


def _next(state: State, truth: Truth, resume: Sequence[Mapping[str, Any]]) -> Check:
    with_next = [r for r in resume if r["blocks"].get("next")]
    covered = set(truth.resume)
    stalled = []
    for q in truth.open:
        thread = state.items[q][4]
        if q not in covered and thread not in covered:
            stalled.append(q)
    gaps = [
        Gap(
            "next",
            q,
            f"open question {state.items[q][2]!r} has no checkpoint: say where it stands "
            f"(`lifeline checkpoint --thread {q[:12]} --next ...`)",
        )
        for q in stalled
    ]
    if not with_next:
        gaps.insert(
            0,
            Gap(
                "next",
                None,
                "no checkpoint says what comes next: "
                "`lifeline checkpoint --thread main --next 'the next step'`",
            ),
        )
    said = CHECK_POINTS // 2  # points for saying what is next; the rest for the questions
    rest = CHECK_POINTS - said
    covered_share = 1.0 if not truth.open else (len(truth.open) - len(stalled)) / len(truth.open)
    points = (said if with_next else 0) + round(rest * covered_share)
    asked = len(truth.open)
    detail = (
        f"{count(len(with_next), 'thread')} {_say(len(with_next))} what is next; "
        f"{asked - len(stalled)} of {count(asked, 'open question')} "
        f"{'has' if asked == 1 else 'have'} a checkpoint"
    )
    return Check("next", points, detail, gaps)


def _say(n: int) -> str:
    """The verb after ``n`` things: ``1 thread says``, ``2 threads say``."""
    return "says" if n == 1 else "say"


def examine(state: State, truth: Truth, resume: Sequence[Mapping[str, Any]]) -> Exam:
    """The four checks, each with its gaps (``resume``: rows of ``resume_of``)."""
    return Exam(
        [_what(state, truth), _why(state, truth), _decided(truth), _next(state, truth, resume)]
    )
