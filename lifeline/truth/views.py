"""Views derived from a folded state: supersession, decisions in force, open, resume, pins.

Supersession is the fixpoint of the correction graph: a correction supersedes its parents
only while it is itself in force, so reverting a reversal restores the original. Ids are
content hashes, so the graph has no cycles and the walks below always end.

Open questions (docs/truth.md): a correction of an ``open`` closes it — the question leaves
Open and its thread's checkpoints leave Resume — unless the correction says ``status: open``,
which rewords it (the correction is shown as the question). A correction of a rewording acts
on the question itself: it closes it, or rewords it again. When several corrections in force
bear on one question, the newest by ``(ts, id)`` decides.
"""

from __future__ import annotations

from dataclasses import dataclass

from lifeline.truth.state import Item, State

__all__ = ["Corrections", "Truth", "corrections_of", "derive"]


@dataclass(frozen=True, slots=True)
class Truth:
    """What is in force, computed from a :class:`State`."""

    superseded: dict[str, str]  # superseded id -> the correction in force over it
    decisions: list[str]  # in force, oldest first by (ts, id)
    open: list[str]
    identity: str | None
    pinned: list[str]  # pinned ids in force, oldest first
    pin_notes: dict[str, list[str]]  # pinned id -> pin notes in force
    resume: dict[str, str]  # thread -> its live checkpoint id

    def is_superseded(self, entry_id: str) -> bool:
        return entry_id in self.superseded


Targets = dict[str, list[str]]  # correction id -> the ids it supersedes


def _targets(state: State) -> Targets:
    """Each correction's targets; a correction of a rewording also targets its question."""
    reword = set(state.rewords)
    out: Targets = {}
    for start in sorted(state.corrections):
        stack = [start]
        while stack:
            cid = stack[-1]
            own = state.corrections[cid]
            pending = [t for t in own if t in reword and t not in out and t in state.corrections]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            extra = {
                q
                for t in own
                if t in reword and t in out
                for q in out[t]
                if q in state.items and state.items[q][0] == "open"
            }
            out[cid] = sorted(set(own) | extra)
    return out


def _in_force(targets_of: Targets) -> dict[str, bool]:
    """For every correction: is it in force? (memoised walk, no recursion limit)."""
    correctors: dict[str, list[str]] = {}
    for cid, targets in targets_of.items():
        for target in targets:
            correctors.setdefault(target, []).append(cid)
    memo: dict[str, bool] = {}
    for start in sorted(targets_of):
        stack = [start]
        while stack:
            cid = stack[-1]
            pending = [c for c in correctors.get(cid, ()) if c not in memo]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            memo[cid] = not any(memo[c] for c in correctors.get(cid, ()))
    return memo


def _superseded(targets_of: Targets) -> tuple[dict[str, str], list[str]]:
    """(superseded id -> first correction in force over it, corrections in force)."""
    in_force = _in_force(targets_of)
    out: dict[str, str] = {}
    live = [cid for cid in sorted(targets_of) if in_force[cid]]
    for cid in live:
        for target in targets_of[cid]:
            out.setdefault(target, cid)
    return out, live


def _by_time(state: State, ids: list[str]) -> list[str]:
    return sorted(ids, key=lambda i: (state.items[i][1], i))


def _replaces(state: State, targets_of: Targets, live: list[str], kinds: set[str]) -> set[str]:
    """Corrections in force that stand in for an entry of one of ``kinds``."""
    out: set[str] = set()
    for cid in live:
        for target in targets_of[cid]:
            item: Item | None = state.items.get(target)
            if item is not None and item[0] in kinds:
                out.add(cid)
    return out


def _questions(state: State, targets_of: Targets, live: list[str]) -> tuple[set[str], set[str]]:
    """(rewordings shown as open questions, questions closed by a correction)."""
    deciders: dict[str, list[str]] = {}
    for cid in live:
        for target in targets_of[cid]:
            item = state.items.get(target)
            if item is not None and item[0] == "open":
                deciders.setdefault(target, []).append(cid)
    reword = set(state.rewords)
    shown: set[str] = set()
    closed: set[str] = set()
    for question, cids in deciders.items():
        newest = max(cids, key=lambda c: (state.items[c][1], c))
        if newest in reword:
            shown.add(newest)
        else:
            closed.add(question)
    return shown, closed


def _resume(state: State, superseded: dict[str, str], closed: set[str]) -> dict[str, str]:
    """Each thread's newest live checkpoint; a closed question's thread has none."""
    ended = closed | {state.items[q][4] for q in closed if state.items[q][4]}
    resume: dict[str, str] = {}
    for thread, marks in state.checkpoints.items():
        if thread in ended:
            continue
        for _ts, cid in reversed(marks):
            if cid not in superseded:
                resume[thread] = cid
                break
    return dict(sorted(resume.items()))


@dataclass(frozen=True, slots=True)
class Corrections:
    """What the corrections in force do: the part of the truth that depends only on the
    corrections and the items they name (so it can be derived from those alone)."""

    superseded: dict[str, str]  # superseded id -> the correction in force over it
    as_decision: set[str]  # corrections in force standing in for a decision
    as_open: set[str]  # rewordings shown as open questions
    closed: set[str]  # questions closed by a correction


def corrections_of(state: State) -> Corrections:
    """The corrections' effects; reads ``state.items`` only for corrections and targets."""
    targets_of = _targets(state)
    superseded, live_fixes = _superseded(targets_of)
    as_decision = _replaces(state, targets_of, live_fixes, {"decision"})
    reworded, closed = _questions(state, targets_of, live_fixes)
    return Corrections(superseded, as_decision, reworded - as_decision, closed)


def derive(state: State) -> Truth:
    """Compute the views of ``state``; deterministic for the same state."""
    fixes = corrections_of(state)
    superseded, as_decision, as_open, closed = (
        fixes.superseded,
        fixes.as_decision,
        fixes.as_open,
        fixes.closed,
    )
    live = {i: it for i, it in state.items.items() if i not in superseded}
    decisions = [i for i, it in live.items() if it[0] == "decision"] + sorted(as_decision)
    opens = [i for i, it in live.items() if it[0] == "open"] + sorted(as_open)
    boots = _by_time(state, [i for i, it in live.items() if it[0] == "bootstrap"])
    pin_notes: dict[str, list[str]] = {}
    for note, target in sorted(state.pins.items()):
        if note not in superseded and target not in superseded:
            pin_notes.setdefault(target, []).append(note)
    # Tracked items sort by time; other pinned entries (a fix, a note) are not in the state,
    # so they follow, by id.
    pinned = _by_time(state, [p for p in pin_notes if p in state.items]) + sorted(
        p for p in pin_notes if p not in state.items
    )
    return Truth(
        superseded=superseded,
        decisions=_by_time(state, decisions),
        open=_by_time(state, opens),
        identity=boots[-1] if boots else None,  # the newest bootstrap in force
        pinned=pinned,
        pin_notes=pin_notes,
        resume=_resume(state, superseded, closed),
    )
