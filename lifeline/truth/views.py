"""Views derived from a folded state: supersession, decisions in force, open, resume, pins.

Supersession is the fixpoint of the correction graph: a correction supersedes its parents
only while it is itself in force, so reverting a reversal restores the original. Ids are
content hashes, so the graph has no cycles and the recursion below always ends.
"""

from __future__ import annotations

from dataclasses import dataclass

from lifeline.truth.state import Item, State

__all__ = ["Truth", "derive"]


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


def _in_force(state: State) -> dict[str, bool]:
    """For every correction: is it in force? (memoised walk, no recursion limit)."""
    correctors: dict[str, list[str]] = {}
    for cid, targets in state.corrections.items():
        for target in targets:
            correctors.setdefault(target, []).append(cid)
    memo: dict[str, bool] = {}
    for start in sorted(state.corrections):
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


def _superseded(state: State) -> tuple[dict[str, str], list[str]]:
    """(superseded id -> first correction in force over it, corrections in force)."""
    in_force = _in_force(state)
    out: dict[str, str] = {}
    live = [cid for cid in sorted(state.corrections) if in_force[cid]]
    for cid in live:
        for target in state.corrections[cid]:
            out.setdefault(target, cid)
    return out, live


def _by_time(state: State, ids: list[str]) -> list[str]:
    return sorted(ids, key=lambda i: (state.items[i][1], i))


def _replaces(state: State, live: list[str], kinds: set[str]) -> set[str]:
    """Corrections in force that stand in for an entry of one of ``kinds``."""
    out: set[str] = set()
    for cid in live:
        for target in state.corrections[cid]:
            item: Item | None = state.items.get(target)
            if item is not None and item[0] in kinds:
                out.add(cid)
    return out


def derive(state: State) -> Truth:
    """Compute the views of ``state``; deterministic for the same state."""
    superseded, live_fixes = _superseded(state)
    live = {i: it for i, it in state.items.items() if i not in superseded}
    as_decision = _replaces(state, live_fixes, {"decision"})
    as_open = _replaces(state, live_fixes, {"open"}) - as_decision
    decisions = [i for i, it in live.items() if it[0] == "decision"] + sorted(as_decision)
    opens = [i for i, it in live.items() if it[0] == "open"] + sorted(as_open)
    boots = _by_time(state, [i for i, it in live.items() if it[0] == "bootstrap"])
    pin_notes: dict[str, list[str]] = {}
    for note, target in sorted(state.pins.items()):
        if note not in superseded and target not in superseded:
            pin_notes.setdefault(target, []).append(note)
    resume: dict[str, str] = {}
    for thread, marks in state.checkpoints.items():
        for _ts, cid in reversed(marks):
            if cid not in superseded:
                resume[thread] = cid
                break
    # Tracked items sort by time; other pinned entries (a fix, a note) are not in the state,
    # so they follow, by id.
    pinned = _by_time(state, [p for p in pin_notes if p in state.items]) + sorted(
        p for p in pin_notes if p not in state.items
    )
    return Truth(
        superseded=superseded,
        decisions=_by_time(state, decisions),
        open=_by_time(state, opens),
        identity=boots[0] if boots else None,
        pinned=pinned,
        pin_notes=pin_notes,
        resume=dict(sorted(resume.items())),
    )
