"""The reducers: fold one entry into a :class:`~lifeline.truth.state.State`.

Each reducer adds the entry to an order-independent accumulator (DESIGN §4, "same set, same
truth"), so the fold of a set does not depend on arrival order and an incremental fold of
new entries equals a full fold. The integrity gate runs first: an entry whose id does not
match its content is recorded in ``state.integrity`` and feeds no other reducer.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from lifeline.entry import Entry
from lifeline.truth.parse import pin_target, rewords, thread_of
from lifeline.truth.state import RECENT_KEEP, State

__all__ = ["TRACKED_KINDS", "WHY_KEEP", "fold", "fold_all", "why_excerpt"]

TRACKED_KINDS = frozenset({"bootstrap", "decision", "open", "correction"})
WHY_KEEP = 400  # chars of the body kept in the state as the "why" of a tracked item
_MOD = 2**256


def why_excerpt(body: str, limit: int = WHY_KEEP) -> str:
    """The body on one line, without a trailing ``origin:`` block, cut at ``limit``."""
    text = body.split("\norigin:\n", 1)[0]
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _integrity(state: State, entry: Entry) -> bool:
    try:
        expected = entry.expected_id()
    except UnicodeEncodeError:
        expected = "not-utf8"
    if expected == entry.id:
        return True
    state.integrity[entry.id] = expected
    return False


def _recent(state: State, key: list[str]) -> None:
    recent = state.recent
    if len(recent) >= RECENT_KEEP and key <= recent[0]:
        return
    bisect.insort(recent, key)
    if len(recent) > RECENT_KEEP:
        del recent[0]


def _counters(state: State, entry: Entry) -> None:
    who = f"{entry.provider}/{entry.model}"
    state.contributors[who] = state.contributors.get(who, 0) + 1
    state.kinds[entry.kind] = state.kinds.get(entry.kind, 0) + 1


def fold(state: State, entry: Entry) -> None:
    """Add one entry (not folded before) to ``state``."""
    state.count += 1
    state.digest = (state.digest + int(entry.id, 16)) % _MOD
    if not _integrity(state, entry):
        return
    key = [entry.ts, entry.id]
    _counters(state, entry)
    _recent(state, key)
    thread = thread_of(entry.body) or ""
    if thread:
        bisect.insort(state.threads.setdefault(thread, []), key)
    if entry.kind == "checkpoint" and thread:
        bisect.insort(state.checkpoints.setdefault(thread, []), key)
    pinned = pin_target(entry.kind, entry.body)
    if pinned is not None:
        state.pins[entry.id] = pinned
    if entry.kind == "correction":
        state.corrections[entry.id] = sorted(set(entry.parents))
        if rewords(entry.kind, entry.body):
            bisect.insort(state.rewords, entry.id)
    if entry.kind in TRACKED_KINDS or pinned is not None:
        summary = " ".join(entry.summary.split())
        state.items[entry.id] = [entry.kind, entry.ts, summary, why_excerpt(entry.body), thread]


def fold_all(entries: Iterable[Entry], state: State | None = None) -> State:
    """Fold every entry into ``state`` (a new one by default) and return it."""
    out = state if state is not None else State()
    for entry in entries:
        fold(out, entry)
    return out
